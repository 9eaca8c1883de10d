"""Integrations of xstage's kernels into other libraries; each submodule imports its library only when used."""
