"""The revision a result records (bench/common/provenance.py) and the one a build records (src/gpu/git_revision.cmake):
the bare commit for a clean tree; for uncommitted changes to tracked files "<sha>-dirty.<12 hex digits of the SHA-256
of `git diff HEAD --binary`>", the same string from both, different for different changes."""
import hashlib
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "common"))
import provenance  # noqa: E402

if shutil.which("git") is None:
    pytest.skip("git is not installed", allow_module_level=True)


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch):
    r = tmp_path / "r"
    r.mkdir()
    git(r, "init", "-q")
    git(r, "config", "user.email", "t@example.com")
    git(r, "config", "user.name", "t")
    (r / "a.txt").write_text("one\n")
    git(r, "add", "a.txt")
    git(r, "commit", "-q", "-m", "one")
    monkeypatch.setattr(provenance, "REPO", str(r))
    monkeypatch.delenv("XSTAGE_GIT_REVISION", raising=False)
    return r


def cmake_revision(repo, tmp_path):
    out = tmp_path / "rev.hpp"
    subprocess.run(["cmake", f"-DSRC_DIR={repo}", f"-DOUT_FILE={out}", "-P", str(REPO / "src/gpu/git_revision.cmake")],
                   check=True, capture_output=True)
    return re.search(r'kXstageGitRevision = "([^"]*)"', out.read_text()).group(1)


def test_clean_tree_is_the_commit(repo):
    assert provenance.git_revision() == git(repo, "rev-parse", "HEAD")


def test_dirty_tree_records_the_hash_of_its_diff(repo, tmp_path):
    head = git(repo, "rev-parse", "HEAD")
    (repo / "a.txt").write_text("two\n")
    diff = subprocess.run(["git", "-C", str(repo), "diff", "HEAD", "--binary"], check=True, capture_output=True).stdout
    first = provenance.git_revision()
    assert first == f"{head}-dirty.{hashlib.sha256(diff).hexdigest()[:12]}"
    (repo / "a.txt").write_text("three\n")
    assert provenance.git_revision() not in (first, head)  # another change, another string
    (repo / "untracked.txt").write_text("x\n")  # untracked files are not part of the build's revision
    assert provenance.git_revision().startswith(f"{head}-dirty.")
    if shutil.which("cmake"):
        assert cmake_revision(repo, tmp_path) == provenance.git_revision()


def test_given_and_environment_win(repo, monkeypatch):
    assert provenance.git_revision("abc") == "abc"
    monkeypatch.setenv("XSTAGE_GIT_REVISION", "def")
    assert provenance.git_revision() == "def"
