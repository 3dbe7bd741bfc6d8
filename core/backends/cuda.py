"""``torch.backends.cuda``: the TF32 switch programs set, with torch's default."""

from __future__ import annotations

from types import SimpleNamespace

__all__ = ["is_built", "matmul"]

matmul = SimpleNamespace(allow_tf32=False)
"""``torch.backends.cuda.matmul.allow_tf32``: accepted, nothing computes in TF32 here."""


def is_built() -> bool:
    return False
