"""The docs' newcomer path (issue #46): every relative link of README.md and docs/**/*.md resolves, every
`docs/NAME.md` named in backticks exists, and the README's layout table links one design page per capability,
each under 300 lines (the measurement history lives in docs/journal/, linked second)."""

from __future__ import annotations

import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[2]
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_NAMED = re.compile(r"`(docs/[A-Za-z0-9_./-]+\.md)`")
DESIGN_PAGE_MAX_LINES = 300


def _pages() -> list[pathlib.Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("**/*.md"))]


def _relative_links(page: pathlib.Path) -> list[str]:
    out = []
    for m in _LINK.finditer(page.read_text(encoding="utf-8")):
        target = m.group(1)
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        out.append(target.split("#", 1)[0])
    return out


def test_every_relative_link_resolves() -> None:
    broken = [
        f"{page.relative_to(REPO)}: {target}"
        for page in _pages()
        for target in _relative_links(page)
        if not (page.parent / target).exists()
    ]
    assert broken == []


def test_every_named_doc_exists() -> None:
    missing = [
        f"{page.relative_to(REPO)}: {name}"
        for page in _pages()
        for name in _NAMED.findall(page.read_text(encoding="utf-8"))
        if not (REPO / name).exists()
    ]
    assert missing == []


def _layout_design_pages() -> list[pathlib.Path]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    layout = text.split("## Layout", 1)[1]
    pages = []
    for line in layout.splitlines():
        first_cell = line.split("|")[1] if line.startswith("|") and line.count("|") >= 3 else ""
        m = re.match(r"\s*\[`[^`]+`\]\((docs/[^)#]+\.md)\)", first_cell)
        if m and "/journal/" not in m.group(1):
            pages.append(REPO / m.group(1))
    return pages


def test_layout_table_links_a_short_design_page_per_capability() -> None:
    pages = _layout_design_pages()
    assert len(pages) >= 8, pages  # probe, model, attention, Ulysses, MoE, Python, multi-node, results
    long_pages = {
        str(p.relative_to(REPO)): n
        for p in pages
        if (n := len(p.read_text(encoding="utf-8").splitlines())) >= DESIGN_PAGE_MAX_LINES
    }
    assert long_pages == {}
