"""``torch.utils.tensorboard``'s ``SummaryWriter``, for scripts that log with it (karpathy's
makemore imports it on its first lines). torch's writer is TensorBoard's own; this one is
tensorboardX's (the ``hookgrad[tensorboard]`` extra, the writer of the ``[events] tensorboard``
sink too), whose ``add_*`` methods are given hookgrad tensors as numpy arrays, as torch's
writer turns torch tensors into arrays."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

try:
    from tensorboardX import SummaryWriter as _TensorboardXWriter
except ImportError as error:  # as torch's module, which needs the tensorboard package
    raise ImportError(
        "hookgrad.utils.tensorboard needs tensorboardX: pip install 'hookgrad[tensorboard]'"
    ) from error

from .._tensor import Tensor

__all__ = ["SummaryWriter"]


def _as_array(value: Any) -> Any:
    """A hookgrad tensor (or a dict of them, as ``add_scalars`` takes) as numpy arrays."""
    if isinstance(value, Tensor):
        return value.detach().numpy()
    if isinstance(value, dict):
        return {key: _as_array(item) for key, item in value.items()}
    return value


def _taking_tensors(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        args = tuple(_as_array(a) for a in args)
        return method(self, *args, **{k: _as_array(v) for k, v in kwargs.items()})

    return call


class SummaryWriter(_TensorboardXWriter):
    """tensorboardX's ``SummaryWriter`` whose ``add_*`` methods take hookgrad tensors."""


for _name in dir(_TensorboardXWriter):
    if _name.startswith("add_"):
        setattr(SummaryWriter, _name, _taking_tensors(getattr(_TensorboardXWriter, _name)))
