"""Integrations of xstage's kernels into other libraries; each submodule imports its library only when used."""

__all__: list[str] = []  # the submodules are imported by name (`import xstage.integrations.diffusers`)
