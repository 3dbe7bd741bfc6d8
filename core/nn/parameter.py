"""``nn.Parameter``: a leaf Tensor that a Module registers as one of its parameters."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._dtype import float32
from .._tensor import Tensor, _wrap

__all__ = ["Buffer", "Parameter"]


class Parameter(Tensor):
    """A Tensor that is a module parameter: assigning one to a Module attribute registers it.

    ``Parameter(t)`` shares ``t``'s memory and version counter (as torch's ``_make_subclass``
    does) and is always a leaf. Results of ops on a Parameter are plain Tensors, so a
    Parameter costs normal tensors nothing.
    """

    # A __dict__ as torch tensors have: code tags parameters (``p.registered = True``, the
    # registration hooks of torch's own tests do). Parameters are few; plain Tensors stay slim.
    __slots__ = ("__dict__",)

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        if data is None:
            array, vbox = np.empty((0,), dtype=float32), [0]
        elif isinstance(data, Tensor):
            array, vbox = data._data, data._vbox
        else:
            raise TypeError(
                f"Parameter(): argument 'data' must be Tensor, not {type(data).__name__}"
            )
        self._data = array
        self._grad = None
        self._requires_grad = False
        self._grad_fn = None
        self._output_nr = 0
        self._vbox = vbox
        self._base = None
        self._acc = None
        self._hooks = None
        if requires_grad:
            self.requires_grad_(True)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (_rebuild_parameter, (self._data, self._requires_grad))


def _rebuild_parameter(data: np.ndarray, requires_grad: bool) -> Parameter:
    """Unpickling target of :meth:`Parameter.__reduce_ex__`."""
    return Parameter(_wrap(data), requires_grad)


class Buffer(Tensor):
    """A tensor that, assigned as a Module attribute, registers itself as a buffer
    (``torch.nn.Buffer``): ``module.running = nn.Buffer(t, persistent=False)``.

    Like torch's, it is ``data`` detached (same memory and version counter) keeping its
    ``requires_grad``, with ``persistent`` saying whether ``state_dict`` includes it.
    """

    __slots__ = ("__dict__",)
    persistent: bool
    _is_buffer: bool

    def __init__(self, data: Tensor | None = None, *, persistent: bool = True) -> None:
        if data is None:
            array, vbox, requires_grad = np.empty((0,), dtype=float32), [0], False
        elif isinstance(data, Tensor):
            array, vbox, requires_grad = data._data, data._vbox, data._requires_grad
        else:
            raise TypeError(f"Buffer(): argument 'data' must be Tensor, not {type(data).__name__}")
        self._data = array
        self._grad = None
        self._requires_grad = False
        self._grad_fn = None
        self._output_nr = 0
        self._vbox = vbox
        self._base = None
        self._acc = None
        self._hooks = None
        self.persistent = persistent
        self._is_buffer = True
        if requires_grad:
            self.requires_grad_(True)
