"""The Tensor: a numpy array plus the autograd metadata PyTorch keeps beside it.

Ops live in ``hookgrad._ops``; the methods here delegate to them so that ``x.exp()`` and
``hookgrad.exp(x)`` share one implementation. Internal code reads the slots (``_data``,
``_requires_grad``) directly: they are the hot path of every op.
"""

from __future__ import annotations

import builtins
import warnings
from collections.abc import Callable, Iterator, Sequence
from inspect import isfunction
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _dtype
from ._memory_format import check_memory_format
from ._size import Size, as_size
from .utils.hooks import HookDict, RemovableHandle, SnapshotHookDict

if TYPE_CHECKING:
    from .autograd.graph import AccumulateGrad, Node

__all__ = ["Tensor"]

_new = object.__new__


def _wrap(data: np.ndarray) -> Tensor:
    """Wrap an array as a Tensor without copying or validating: the ops' fast constructor.

    numpy gives a 0-dim result as a scalar (``np.float32``), which no in-place op can write
    into; it becomes a 0-dim array here, so every tensor holds an ndarray."""
    if type(data) is not np.ndarray:
        data = np.asarray(data)
    t = _new(Tensor)
    t._data = data
    t._grad = None
    t._requires_grad = False
    t._grad_fn = None
    t._output_nr = 0
    t._vbox = [0]
    t._base = None
    t._acc = None
    t._hooks = None
    return t


def _type_name(value: Any) -> str:
    """The name torch's messages give a Python object's type (CPython's ``tp_name``): the bare
    name for builtins and classes defined in Python, ``module.name`` for other C types
    (``numpy.ndarray``)."""
    kind = type(value)
    if kind.__module__ == "builtins" or kind.__flags__ & _HEAP_TYPE:
        return kind.__name__
    return f"{kind.__module__}.{kind.__name__}"


_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class created by a class statement


class _TensorHooks:
    """Hooks owned by the tensor itself rather than by a graph node."""

    __slots__ = ("post_accumulate", "retains_grad", "unreached")

    def __init__(self) -> None:
        self.post_accumulate = HookDict()
        self.retains_grad = False
        # register_hook hooks of a view with no history (Tensor.register_hook): kept, never run
        self.unreached: HookDict | None = None


class Tensor:
    """A multi-dimensional array that records operations for automatic differentiation."""

    __slots__ = (
        "__weakref__",
        "_acc",
        "_base",
        "_data",
        "_detached_from",
        "_grad",
        "_grad_fn",
        "_hooks",
        "_output_nr",
        "_requires_grad",
        "_vbox",
        "_view_kind",
        "_view_version",
    )

    _data: np.ndarray
    _grad: Tensor | None
    _requires_grad: bool
    _grad_fn: Node | None
    _output_nr: int
    _vbox: list[int]
    _base: Tensor | None
    _acc: AccumulateGrad | None
    _hooks: _TensorHooks | None
    # Set only on views (``_base`` is not None), by ``hookgrad.autograd._view.make_view``, and
    # read only after checking ``_base``: the version the view's history was made at, and how
    # the view was made (torch's CreationMeta). See hookgrad.autograd._view.
    _view_version: int
    _view_kind: int
    # Set only on detach() outputs, read (with a default) only when one is written in place:
    # the tensor it was detached from, whose node may keep the shared array as its output.
    _detached_from: Tensor

    # numpy must defer to Tensor's reflected operators (np.float32(2) * t -> t.__rmul__).
    __array_ufunc__ = None

    def __init__(self, *args: Any, requires_grad: bool = False, device: Any = None) -> None:
        """``torch.Tensor(...)``, the legacy constructor: ``Tensor(2, 3)`` or ``Tensor(size)``
        is a tensor of that shape, ``Tensor([1, 2])`` one of those values, both in the default
        dtype (float32); ``Tensor(t)`` shares ``t``'s data. Ops build tensors with ``_wrap``."""
        from ._creation import _cpu_only
        from ._dtype import get_default_dtype
        from ._tensor_types import legacy_array

        _cpu_only(device)
        if len(args) == 1 and isinstance(args[0], Tensor):
            self._data, self._vbox = args[0]._data, args[0]._vbox
        else:
            self._data = legacy_array(args, get_default_dtype(), "Tensor")
            self._vbox = [0]
        self._grad = None
        self._requires_grad = False
        self._grad_fn = None
        self._output_nr = 0
        self._base = None
        self._acc = None
        self._hooks = None
        if requires_grad:
            self.requires_grad_(True)

    # ------------------------------------------------------------------ metadata
    @property
    def shape(self) -> Size:
        return as_size(self._data.shape)

    def size(self, dim: int | None = None) -> Any:
        shape = self._data.shape
        if dim is None:
            return as_size(shape)
        if not -len(shape) <= dim < len(shape):
            if not shape:
                raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
            raise IndexError(
                f"Dimension out of range (expected to be in range of [{-len(shape)}, "
                f"{len(shape) - 1}], but got {dim})"
            )
        return shape[dim]

    def dim(self) -> int:
        return self._data.ndim

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return int(self._data.size)

    nelement = numel

    @property
    def dtype(self) -> np.dtype[Any]:
        return self._data.dtype

    @property
    def device(self) -> _dtype.device:
        return _dtype.device("cpu")

    @property
    def is_cuda(self) -> bool:
        return False

    @property
    def is_sparse(self) -> bool:
        """Always False: hookgrad tensors are dense (strided), as torch's default."""
        return False

    # The layout and device probes of torch (``is_xpu``, ``is_mps``, ...): False on a CPU
    # tensor, as torch's answer for a dense CPU tensor (DCGAN's forward asks ``is_xpu``).
    is_xpu = is_mps = is_meta = is_quantized = is_mkldnn = is_nested = is_sparse_csr = is_cuda

    def is_floating_point(self) -> bool:
        return _dtype.is_floating(self._data.dtype)

    def element_size(self) -> int:
        return int(self._data.itemsize)

    @property
    def _version(self) -> int:
        return self._vbox[0]

    @property
    def output_nr(self) -> int:
        """Which output of its ``grad_fn`` this tensor is: 0 for leaves and single outputs,
        the piece's number for ``unbind``/``split``/``chunk``, as torch's."""
        return self._output_nr

    # ------------------------------------------------------------------ autograd state
    @property
    def grad_fn(self) -> Node | None:
        """The node that made this tensor. A view whose base was written in place since its
        history was recorded (through the base or another view) gets a new history first, as
        torch's: an ``AsStridedBackward0`` into the base's current one."""
        if self._base is None or self._view_version == self._vbox[0]:  # history current
            return self._grad_fn
        return _current_grad_fn(self)

    @grad_fn.setter
    def grad_fn(self, node: Node | None) -> None:
        self._grad_fn = node
        if self._base is not None:  # a history set now is current (torch's set_gradient_edge)
            self._view_version = self._vbox[0]

    @property
    def requires_grad(self) -> bool:
        if self._requires_grad:
            return True
        base = self._base  # a view requires grad when its base does (autograd._view)
        return base is not None and base._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if self.grad_fn is not None and not requires_grad:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use "
                "a computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach()."
            )
        if requires_grad and not _dtype.can_require_grad(self._data.dtype):
            raise RuntimeError(
                "only Tensors of floating point and complex dtype can require gradients"
            )
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def grad(self) -> Tensor | None:
        if self._grad is None and self.grad_fn is not None and not self.retains_grad:
            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. "
                "Its .grad attribute won't be populated during autograd.backward(). If you "
                "indeed want the .grad field to be populated for a non-leaf Tensor, use "
                ".retain_grad() on the non-leaf Tensor.",
                UserWarning,
                stacklevel=2,
            )
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"assigned grad expected to be a Tensor or None but got {type(value).__name__}"
                )
            if value._data.dtype != self._data.dtype:
                raise RuntimeError(
                    f"attempting to assign a gradient with dtype "
                    f"'{_dtype.c_type_name(value._data.dtype)}' to a tensor with grad_dtype "
                    f"'{_dtype.scalar_type_name(self._data.dtype)}'. The gradient must match the "
                    "tensor's grad_dtype (defaults to the tensor's dtype). You can set the "
                    "tensor's grad_dtype attribute with a specific dtype, or None to allow any "
                    "dtype. Set grad_dtype with caution. Diverging the dtypes of a tensor and its "
                    "gradient may break downstream systems that assume they match."
                )
            if value._data.shape != self._data.shape:
                raise RuntimeError(
                    f"attempting to assign a gradient of size '{list(value._data.shape)}' to a "
                    f"tensor of size '{list(self._data.shape)}'. Please ensure that the gradient "
                    "and the tensor are the same size"
                )
        self._grad = value

    @property
    def data(self) -> Tensor:
        """A tensor sharing this one's array, detached from the graph and, unlike
        :meth:`detach`, with a version counter of its own (as torch's): writing through it
        in place is invisible to autograd's saved-tensor checks."""
        return _wrap(self._data)

    @data.setter
    def data(self, value: Tensor) -> None:
        """Make this tensor hold ``value``'s array (shared, not copied), as torch's ``set_data``:
        shape and dtype may change; the graph position, ``requires_grad``, ``.grad`` and the
        version counter stay this tensor's own."""
        if not isinstance(value, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {_type_name(value)}")
        if self._requires_grad and value._data.dtype.kind not in "fc":
            raise RuntimeError(
                "data set to a tensor that requires gradients must be floating point or complex "
                "dtype"
            )
        self._data = value._data

    @property
    def retains_grad(self) -> bool:
        return self._hooks is not None and self._hooks.retains_grad

    @property
    def _post_acc_hooks(self) -> HookDict | None:
        return None if self._hooks is None else self._hooks.post_accumulate

    def _own_hooks(self) -> _TensorHooks:
        if self._hooks is None:
            self._hooks = _TensorHooks()
        return self._hooks

    def detach(self) -> Tensor:
        """A tensor outside the graph sharing this one's memory and version counter: no view
        for autograd (``_base`` is None, as torch's), but a write through it still
        invalidates the output this tensor's node saved (``_ops.inplace.pin_saved_output``)."""
        out = _wrap(self._data)
        out._vbox = self._vbox
        out._detached_from = self
        return out

    def _is_view(self) -> bool:
        """True for the result of a view op (``_base`` is its base), as torch's."""
        return self._base is not None

    def _read_only_alias(self) -> Tensor:
        """This tensor over a read-only view, same autograd identity (``hookgrad._read_only``):
        what event payloads hand to plugins."""
        return _read_only.read_only_alias(self)

    def detach_(self) -> Tensor:
        if self._base is not None:
            raise RuntimeError(_DETACH_VIEW_MESSAGE)
        self._grad_fn = None
        self._requires_grad = False
        return self

    # ------------------------------------------------------------------ hooks
    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
        """Register ``hook(grad)``, run each backward before the gradient is used (T-1..T-6).

        A view that requires grad only through its base and has no history (made under
        no_grad, or before the base required grad) takes the hook, as torch's does, but no
        gradient ever reaches it: the hook is kept on the tensor and never runs."""
        if not self._requires_grad and not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        from ._ops._base import edge

        target = edge(self)
        if target is None:
            hooks = self._own_hooks()
            if hooks.unreached is None:
                hooks.unreached = HookDict()
            table = hooks.unreached
        else:
            node, nr = target
            table = node._hook_tables().tensor_pre.setdefault(nr, SnapshotHookDict())
        handle = RemovableHandle(table)
        table[handle.id] = hook
        return handle

    def register_post_accumulate_grad_hook(self, hook: Callable[[Tensor], None]) -> RemovableHandle:
        """Register ``hook(tensor)``, run after ``.grad`` of this leaf is updated (T-9, T-10)."""
        if not self._requires_grad and not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            raise RuntimeError(
                "post accumulate grad hooks cannot be registered on non-leaf tensors"
            )
        table = self._own_hooks().post_accumulate
        handle = RemovableHandle(table)
        table[handle.id] = hook
        return handle

    def retain_grad(self) -> None:
        """Keep ``.grad`` for a non-leaf (after all its hooks, T-11); a no-op on leaves."""
        if not self._requires_grad and not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is None or self.retains_grad:
            return
        self._own_hooks().retains_grad = True
        self.grad_fn._hook_tables().retains_grad[self._output_nr] = self

    def backward(
        self,
        gradient: Tensor | None = None,
        retain_graph: bool | None = None,
        create_graph: bool = False,
        inputs: Sequence[Tensor] | Tensor | None = None,
    ) -> None:
        """Accumulate the gradient of this tensor into the leaves' ``.grad``."""
        from .autograd import backward

        backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    # ------------------------------------------------------------------ conversion
    def numpy(self, *, force: bool = False) -> np.ndarray:
        if self._requires_grad and not force:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."
            )
        return self._data

    def item(self) -> Any:
        if self._data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self._data.size} elements cannot be converted to Scalar"
            )
        return self._data.reshape(()).item()

    def tolist(self) -> Any:
        return self._data.tolist()

    def __float__(self) -> float:
        return float(self._scalar())

    def __int__(self) -> int:
        return int(self._scalar())

    def _scalar(self) -> Any:
        """The one entry, for ``float()`` and ``int()`` (torch's ValueError for several)."""
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return self._data.reshape(()).item()

    def __index__(self) -> int:
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self._data.reshape(()).item())

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __hash__(self) -> int:
        return id(self)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        return self._data if dtype is None else self._data.astype(dtype)

    def __repr__(self) -> str:
        from ._format import tensor_repr

        return tensor_repr(self)

    def __format__(self, format_spec: str) -> str:
        """A 0-dim tensor formats as its value (``f"{loss:.4f}"``); any other tensor, and a
        subclass such as Parameter, as an object: ``str`` for an empty spec, else TypeError
        (torch's rule, to the letter)."""
        if type(self) is Tensor and self._data.ndim == 0:
            return format(self.item(), format_spec)
        return object.__format__(self, format_spec)

    def __reduce_ex__(self, protocol: Any) -> Any:
        from ._creation import _rebuild

        return (_rebuild, (self._data, self._requires_grad))

    def __deepcopy__(self, memo: dict[int, Any]) -> Tensor:
        if self.grad_fn is not None:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the "
                "deepcopy protocol at the moment."
            )
        out = type(self).__new__(type(self))
        Tensor.__init__(out, self._data.copy(), requires_grad=self._requires_grad)
        if self._grad is not None:
            out._grad = _wrap(self._grad._data.copy())
        memo[id(self)] = out
        return out

    # ------------------------------------------------------------------ arithmetic
    def __add__(self, other: Any) -> Tensor:
        return _arith.add(self, other)

    def __radd__(self, other: Any) -> Tensor:
        return _arith.add(self, other)

    def __sub__(self, other: Any) -> Tensor:
        return _arith.sub(self, other)

    def __rsub__(self, other: Any) -> Tensor:
        return _arith.rsub(self, other)

    def __mul__(self, other: Any) -> Tensor:
        return _arith.mul(self, other)

    def __rmul__(self, other: Any) -> Tensor:
        return _arith.mul(self, other)

    def __truediv__(self, other: Any) -> Tensor:
        return _arith.div(self, other)

    def __rtruediv__(self, other: Any) -> Tensor:
        return _arith.rdiv(self, other)

    def __pow__(self, exponent: Any) -> Tensor:
        return _arith.pow(self, exponent)

    def __rpow__(self, base: Any) -> Tensor:
        return _arith.rpow(self, base)

    def __matmul__(self, other: Tensor) -> Tensor:
        return _arith.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Tensor:
        return _arith.matmul(_as_tensor_like(other, self), self)

    def __neg__(self) -> Tensor:
        return _arith.neg(self)

    def __pos__(self) -> Tensor:
        return self

    def __abs__(self) -> Tensor:
        return _unary.abs(self)

    def __floordiv__(self, other: Any) -> Tensor:
        return _arith.floor_divide(self, other)

    def __mod__(self, other: Any) -> Tensor:
        return _arith.remainder(self, other)

    def add(self, other: Any, *, alpha: Any = 1) -> Tensor:
        return _arith.add(self, other, alpha=alpha)

    def sub(self, other: Any, *, alpha: Any = 1) -> Tensor:
        return _arith.sub(self, other, alpha=alpha)

    subtract = sub
    mul = __mul__
    multiply = __mul__
    div = __truediv__
    divide = __truediv__
    true_divide = __truediv__
    pow = __pow__
    matmul = __matmul__
    neg = __neg__
    negative = __neg__
    floor_divide = __floordiv__
    remainder = __mod__

    def mm(self, mat2: Tensor) -> Tensor:
        return _products.mm(self, mat2)

    def bmm(self, mat2: Tensor) -> Tensor:
        return _products.bmm(self, mat2)

    def baddbmm(self, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        return _products.baddbmm(self, batch1, batch2, beta=beta, alpha=alpha)

    def mv(self, vec: Tensor) -> Tensor:
        return _products.mv(self, vec)

    def lerp(self, end: Tensor, weight: Any) -> Tensor:
        return _pointwise.lerp(self, end, weight)

    def addcmul(self, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
        return _pointwise.addcmul(self, tensor1, tensor2, value=value)

    def addcdiv(self, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
        return _pointwise.addcdiv(self, tensor1, tensor2, value=value)

    def dot(self, other: Tensor) -> Tensor:
        return _products.dot(self, other)

    def maximum(self, other: Tensor) -> Tensor:
        return _arith.maximum(self, other)

    def minimum(self, other: Tensor) -> Tensor:
        return _arith.minimum(self, other)

    # ------------------------------------------------------------------ comparisons
    def __eq__(self, other: Any) -> Tensor:  # type: ignore[override]
        return _compare.eq(self, other)

    def __ne__(self, other: Any) -> Tensor:  # type: ignore[override]
        return _compare.ne(self, other)

    def __lt__(self, other: Any) -> Tensor:
        return _compare.lt(self, other)

    def __le__(self, other: Any) -> Tensor:
        return _compare.le(self, other)

    def __gt__(self, other: Any) -> Tensor:
        return _compare.gt(self, other)

    def __ge__(self, other: Any) -> Tensor:
        return _compare.ge(self, other)

    def __invert__(self) -> Tensor:
        return _compare.logical_not(self)

    def __and__(self, other: Any) -> Tensor:
        return _compare.logical_and(self, other)

    def __or__(self, other: Any) -> Tensor:
        return _compare.logical_or(self, other)

    eq = __eq__
    ne = __ne__
    lt = __lt__
    le = __le__
    gt = __gt__
    ge = __ge__

    def isnan(self) -> Tensor:
        return _compare.isnan(self)

    def isinf(self) -> Tensor:
        return _compare.isinf(self)

    def isfinite(self) -> Tensor:
        return _compare.isfinite(self)

    def all(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        return _compare.all(self, dim, keepdim)

    def any(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        return _compare.any(self, dim, keepdim)

    def equal(self, other: Tensor) -> bool:
        return bool(
            self._data.shape == other._data.shape and np.array_equal(self._data, other._data)
        )

    def allclose(
        self, other: Tensor, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False
    ) -> bool:
        return bool(np.allclose(self._data, other._data, rtol=rtol, atol=atol, equal_nan=equal_nan))

    # ------------------------------------------------------------------ elementwise
    def exp(self) -> Tensor:
        return _unary.exp(self)

    def log(self) -> Tensor:
        return _unary.log(self)

    def sqrt(self) -> Tensor:
        return _unary.sqrt(self)

    def log10(self) -> Tensor:
        return _unary.log10(self)

    def log2(self) -> Tensor:
        return _unary.log2(self)

    def abs(self) -> Tensor:
        return _unary.abs(self)

    def sin(self) -> Tensor:
        return _unary.sin(self)

    def cos(self) -> Tensor:
        return _unary.cos(self)

    def tanh(self) -> Tensor:
        return _unary.tanh(self)

    def sigmoid(self) -> Tensor:
        return _unary.sigmoid(self)

    def relu(self) -> Tensor:
        return _unary.relu(self)

    def sign(self) -> Tensor:
        return _unary.sign(self)

    def clamp(self, min: Any = None, max: Any = None) -> Tensor:
        return _unary.clamp(self, min, max)

    clip = clamp

    def softmax(self, dim: int) -> Tensor:
        return _reduce.softmax(self, dim)

    def log_softmax(self, dim: int) -> Tensor:
        return _reduce.log_softmax(self, dim)

    # ------------------------------------------------------------------ reductions
    def sum(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
        return _reduce.sum(self, dim, keepdim, dtype=dtype)

    def mean(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
        return _reduce.mean(self, dim, keepdim, dtype=dtype)

    def var(
        self,
        dim: Any = None,
        unbiased: bool | None = None,
        keepdim: bool = False,
        *,
        correction: Any = None,
    ) -> Tensor:
        return _reduce.var(self, dim, unbiased, keepdim, correction=correction)

    def std(
        self,
        dim: Any = None,
        unbiased: bool | None = None,
        keepdim: bool = False,
        *,
        correction: Any = None,
    ) -> Tensor:
        return _reduce.std(self, dim, unbiased, keepdim, correction=correction)

    def max(self, dim: Any = None, keepdim: bool = False) -> Any:
        return _reduce.max(self, dim, keepdim)

    def min(self, dim: Any = None, keepdim: bool = False) -> Any:
        return _reduce.min(self, dim, keepdim)

    def amax(self, dim: Any = (), keepdim: bool = False) -> Tensor:
        return _reduce.amax(self, dim, keepdim)

    def amin(self, dim: Any = (), keepdim: bool = False) -> Tensor:
        return _reduce.amin(self, dim, keepdim)

    def argmax(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        return _reduce.argmax(self, dim, keepdim)

    def argmin(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        return _reduce.argmin(self, dim, keepdim)

    def norm(self, p: Any = "fro", dim: Any = None, keepdim: bool = False) -> Tensor:
        return _reduce.norm(self, p, dim, keepdim)

    def prod(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        return _reduce.prod(self, dim, keepdim)

    def logsumexp(self, dim: Any, keepdim: bool = False) -> Tensor:
        return _reduce.logsumexp(self, dim, keepdim)

    def cumsum(self, dim: builtins.int, *, dtype: Any = None) -> Tensor:
        return _cumulative.cumsum(self, dim, dtype=dtype)

    def cumprod(self, dim: builtins.int, *, dtype: Any = None) -> Tensor:
        return _cumulative.cumprod(self, dim, dtype=dtype)

    def sort(
        self, dim: builtins.int = -1, descending: builtins.bool = False, *, stable: Any = False
    ) -> Any:
        return _sorting.sort(self, dim, descending, stable=stable)

    def argsort(
        self, dim: builtins.int = -1, descending: builtins.bool = False, *, stable: Any = False
    ) -> Tensor:
        return _sorting.argsort(self, dim, descending, stable=stable)

    def topk(
        self,
        k: builtins.int,
        dim: builtins.int = -1,
        largest: builtins.bool = True,
        sorted: builtins.bool = True,
    ) -> Any:
        return _sorting.topk(self, k, dim, largest, sorted)

    def median(self, dim: Any = None, keepdim: builtins.bool = False) -> Any:
        return _sorting.median(self, dim, keepdim)

    # ------------------------------------------------------------------ shape
    def reshape(self, *shape: Any) -> Tensor:
        return _shape.reshape(self, *shape)

    def view(self, *shape: Any) -> Tensor:
        return _shape.view(self, *shape)

    def view_as(self, other: Tensor) -> Tensor:
        return _shape.view(self, other._data.shape)

    def reshape_as(self, other: Tensor) -> Tensor:
        return _shape.reshape(self, other._data.shape)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        return _shape.flatten(self, start_dim, end_dim)

    def squeeze(self, dim: Any = None) -> Tensor:
        return _shape.squeeze(self, dim)

    def unsqueeze(self, dim: int) -> Tensor:
        return _shape.unsqueeze(self, dim)

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        return _shape.transpose(self, dim0, dim1)

    def permute(self, *dims: Any) -> Tensor:
        return _shape.permute(self, *dims)

    def t(self) -> Tensor:
        return _shape.t(self)

    def tril(self, diagonal: builtins.int = 0) -> Tensor:
        return _rearrange.tril(self, diagonal)

    def triu(self, diagonal: builtins.int = 0) -> Tensor:
        return _rearrange.triu(self, diagonal)

    def flip(self, *dims: Any) -> Tensor:
        return _rearrange.flip(self, *dims)

    def narrow(self, dim: builtins.int, start: Any, length: builtins.int) -> Tensor:
        return _rearrange.narrow(self, dim, start, length)

    def index_select(self, dim: builtins.int, index: Tensor) -> Tensor:
        return _rearrange.index_select(self, dim, index)

    def repeat_interleave(
        self, repeats: Any = None, dim: Any = None, *, output_size: Any = None
    ) -> Tensor:
        return _rearrange.repeat_interleave(self, repeats, dim, output_size=output_size)

    @property
    def T(self) -> Tensor:
        return _shape.permute(self, tuple(range(self._data.ndim - 1, -1, -1)))

    @property
    def mT(self) -> Tensor:
        return _shape.transpose(self, -2, -1)

    def expand(self, *sizes: Any) -> Tensor:
        return _shape.expand(self, *sizes)

    def expand_as(self, other: Tensor) -> Tensor:
        return _shape.expand(self, other._data.shape)

    def broadcast_to(self, size: Any) -> Tensor:
        return _shape.expand(self, size)

    def split(self, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
        return _shape.split(self, split_size_or_sections, dim)

    def split_with_sizes(self, split_sizes: Any, dim: int = 0) -> tuple[Tensor, ...]:
        return _shape.split_with_sizes(self, split_sizes, dim)

    def select(self, dim: builtins.int, index: builtins.int) -> Tensor:
        return _shape.select(self, dim, index)

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        return _shape.chunk(self, chunks, dim)

    def unbind(self, dim: int = 0) -> tuple[Tensor, ...]:
        return _shape.unbind(self, dim)

    def diagonal(
        self, offset: builtins.int = 0, dim1: builtins.int = 0, dim2: builtins.int = 1
    ) -> Tensor:
        return _diagonal.diagonal(self, offset, dim1, dim2)

    def diag(self, diagonal: builtins.int = 0) -> Tensor:
        return _diagonal.diag(self, diagonal)

    def diag_embed(
        self, offset: builtins.int = 0, dim1: builtins.int = -2, dim2: builtins.int = -1
    ) -> Tensor:
        return _diagonal.diag_embed(self, offset, dim1, dim2)

    def trace(self) -> Tensor:
        return _diagonal.trace(self)

    def cuda(self, device: Any = None, non_blocking: bool = False) -> Tensor:
        """Refused with the error of ``.to("cuda")``: hookgrad computes on the CPU."""
        return self.to("cuda")

    def contiguous(self, memory_format: Any = None) -> Tensor:
        """``self`` if its entries are laid out in row-major order, else a row-major copy
        (``CloneBackward0`` in the graph), so that ``.view()`` works on the result.
        ``memory_format`` is checked and otherwise ignored (hookgrad._memory_format)."""
        check_memory_format(self._data.ndim, memory_format)
        return self if self._data.flags.c_contiguous else _shape.clone(self)

    def is_contiguous(self, memory_format: Any = None) -> bool:
        return bool(self._data.flags.c_contiguous)

    def clone(self, *, memory_format: Any = None) -> Tensor:
        check_memory_format(self._data.ndim, memory_format)
        return _shape.clone(self)

    def to(self, *args: Any, **kwargs: Any) -> Tensor:
        return _shape.to(self, *args, **kwargs)

    def type(self, dtype: Any = None, non_blocking: builtins.bool = False) -> Any:
        """Without ``dtype``, torch's type name (``'torch.FloatTensor'``); else a cast to a
        dtype, a typed class (``hookgrad.DoubleTensor``) or its name."""
        from ._tensor_types import type_dtype, type_name

        if dtype is None:
            return type_name(self._data.dtype)
        return _shape.to(self, type_dtype(dtype))

    def type_as(self, other: Tensor) -> Tensor:
        return _shape.to(self, other._data.dtype)

    def float(self) -> Tensor:
        return _shape.to(self, _dtype.float32)

    def double(self) -> Tensor:
        return _shape.to(self, _dtype.float64)

    def half(self) -> Tensor:
        return _shape.to(self, _dtype.float16)

    def bfloat16(self) -> Tensor:
        return _shape.to(self, _dtype.resolve_dtype("bfloat16"))

    def long(self) -> Tensor:
        return _shape.to(self, _dtype.int64)

    def int(self) -> Tensor:
        return _shape.to(self, _dtype.int32)

    def bool(self) -> Tensor:
        return _shape.to(self, _dtype.bool_)

    def cpu(self) -> Tensor:
        return self

    # ------------------------------------------------------------------ indexing
    def __getitem__(self, index: Any) -> Tensor:
        return _index.getitem(self, index)

    def __setitem__(self, index: Any, value: Any) -> None:
        _index.setitem(self, index, value)

    def masked_fill(self, mask: Tensor, value: Any) -> Tensor:
        return _index.masked_fill(self, mask, value)

    def gather(self, dim: builtins.int, index: Tensor) -> Tensor:
        return _index.gather(self, dim, index)

    def scatter(
        self, dim: builtins.int, index: Tensor, src: Any = None, *, value: Any = None
    ) -> Tensor:
        return _index.scatter(self, dim, index, src, value=value)

    def scatter_add(self, dim: builtins.int, index: Tensor, src: Tensor) -> Tensor:
        return _index.scatter_add(self, dim, index, src)

    def nonzero(self, *, as_tuple: builtins.bool = False) -> Any:
        return _index.nonzero(self, as_tuple=as_tuple)

    def argwhere(self) -> Tensor:
        return _index.nonzero(self)

    def where(self, condition: Tensor, other: Any) -> Tensor:
        return _arith.where(condition, self, other)

    # ------------------------------------------------------------------ in place
    def __iadd__(self, other: Any) -> Tensor:
        return _inplace.add_(self, other)

    def __isub__(self, other: Any) -> Tensor:
        return _inplace.sub_(self, other)

    def __imul__(self, other: Any) -> Tensor:
        return _inplace.mul_(self, other)

    def __itruediv__(self, other: Any) -> Tensor:
        return _inplace.div_(self, other)

    def add_(self, other: Any, *, alpha: Any = 1) -> Tensor:
        return _inplace.add_(self, other, alpha=alpha)

    def sub_(self, other: Any, *, alpha: Any = 1) -> Tensor:
        return _inplace.sub_(self, other, alpha=alpha)

    def mul_(self, other: Any) -> Tensor:
        return _inplace.mul_(self, other)

    def div_(self, other: Any) -> Tensor:
        return _inplace.div_(self, other)

    def clamp_(self, min: Any = None, max: Any = None) -> Tensor:
        return _inplace.clamp_(self, min, max)

    clip_ = clamp_

    def zero_(self) -> Tensor:
        return _inplace.fill_(self, 0)

    def fill_(self, value: Any) -> Tensor:
        return _inplace.fill_(self, value)

    def copy_(self, src: Any) -> Tensor:
        return _inplace.copy_(self, src)

    def masked_fill_(self, mask: Tensor, value: Any) -> Tensor:
        return _inplace.masked_fill_(self, mask, value)

    def relu_(self) -> Tensor:
        return _inplace.relu_(self)

    def sign_(self) -> Tensor:
        return _inplace.functional_(self, _unary.sign)

    def tril_(self, diagonal: builtins.int = 0) -> Tensor:
        return _inplace.functional_(self, lambda s: _rearrange.tril(s, diagonal))

    def triu_(self, diagonal: builtins.int = 0) -> Tensor:
        return _inplace.functional_(self, lambda s: _rearrange.triu(s, diagonal))

    def lerp_(self, end: Tensor, weight: Any) -> Tensor:
        return _inplace.functional_(self, lambda s: _pointwise.lerp(s, end, weight), end, weight)

    def addcmul_(self, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
        return _inplace.functional_(
            self, lambda s: _pointwise.addcmul(s, tensor1, tensor2, value=value), tensor1, tensor2
        )

    def addcdiv_(self, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
        return _inplace.functional_(
            self, lambda s: _pointwise.addcdiv(s, tensor1, tensor2, value=value), tensor1, tensor2
        )

    def scatter_(
        self, dim: builtins.int, index: Tensor, src: Any = None, *, value: Any = None
    ) -> Tensor:
        return _inplace.functional_(
            self, lambda s: _index.scatter(s, dim, index, src, value=value), src
        )

    def scatter_add_(self, dim: builtins.int, index: Tensor, src: Tensor) -> Tensor:
        return _inplace.functional_(self, lambda s: _index.scatter_add(s, dim, index, src), src)

    # ------------------------------------------------------------------ sampling
    def normal_(self, mean: Any = 0.0, std: Any = 1.0, *, generator: Any = None) -> Tensor:
        return _random.normal_(self, mean, std, generator=generator)

    def uniform_(self, a: Any = 0.0, b: Any = 1.0, *, generator: Any = None) -> Tensor:
        return _random.uniform_(self, a, b, generator=generator)

    def exponential_(self, lambd: Any = 1.0, *, generator: Any = None) -> Tensor:
        return _random.exponential_(self, lambd, generator=generator)

    def bernoulli_(self, p: Any = 0.5, *, generator: Any = None) -> Tensor:
        return _random.bernoulli_(self, p, generator=generator)

    def bernoulli(self, p: Any = None, *, generator: Any = None) -> Tensor:
        return _random.bernoulli(self, p, generator=generator)

    def multinomial(
        self,
        num_samples: builtins.int,
        replacement: builtins.bool = False,
        *,
        generator: Any = None,
    ) -> Tensor:
        return _random.multinomial(self, num_samples, replacement, generator=generator)

    def histc(self, bins: builtins.int = 100, min: Any = 0, max: Any = 0) -> Tensor:
        return _random.histc(self, bins, min, max)

    def histogram(
        self,
        bins: Any = 100,
        *,
        range: Any = None,
        weight: Any = None,
        density: builtins.bool = False,
    ) -> Any:
        return _random.histogram(self, bins, range=range, weight=weight, density=density)

    # ------------------------------------------------------------------ factories
    # ``dtype`` defaults to this tensor's, ``device`` is the CPU (another device raises).
    def new_zeros(
        self,
        *size: Any,
        dtype: Any = None,
        device: Any = None,
        requires_grad: builtins.bool = False,
    ) -> Tensor:
        from ._creation import zeros

        return zeros(*size, dtype=self._dtype_or(dtype), device=device, requires_grad=requires_grad)

    def new_ones(
        self,
        *size: Any,
        dtype: Any = None,
        device: Any = None,
        requires_grad: builtins.bool = False,
    ) -> Tensor:
        from ._creation import ones

        return ones(*size, dtype=self._dtype_or(dtype), device=device, requires_grad=requires_grad)

    def new_empty(
        self,
        *size: Any,
        dtype: Any = None,
        device: Any = None,
        requires_grad: builtins.bool = False,
    ) -> Tensor:
        from ._creation import empty

        return empty(*size, dtype=self._dtype_or(dtype), device=device, requires_grad=requires_grad)

    def new_full(
        self,
        size: Any,
        fill_value: Any,
        *,
        dtype: Any = None,
        device: Any = None,
        requires_grad: builtins.bool = False,
    ) -> Tensor:
        from ._creation import full

        return full(
            size,
            fill_value,
            dtype=self._dtype_or(dtype),
            device=device,
            requires_grad=requires_grad,
        )

    def new_tensor(
        self,
        data: Any,
        *,
        dtype: Any = None,
        device: Any = None,
        requires_grad: builtins.bool = False,
    ) -> Tensor:
        from ._creation import tensor

        return tensor(data, dtype=self._dtype_or(dtype), device=device, requires_grad=requires_grad)

    def new(self, *args: Any, device: Any = None) -> Tensor:
        """The legacy constructor in this tensor's dtype: ``new()`` is empty, ``new(2, 3)``
        uninitialised of that size, ``new(data)`` a copy of the data, ``new(tensor)`` an alias."""
        from ._creation import _cpu_only

        _cpu_only(device)
        if len(args) == 1 and isinstance(args[0], Tensor):
            return args[0]
        if not args or all(isinstance(a, builtins.int) for a in args):
            return self.new_empty(args or (0,))
        return self.new_tensor(args[0] if len(args) == 1 else args)

    def _dtype_or(self, dtype: Any) -> Any:
        return self._data.dtype if dtype is None else dtype


def _as_tensor_like(value: Any, like: Tensor) -> Tensor:
    if isinstance(value, Tensor):
        return value
    return _wrap(np.asarray(value, dtype=like._data.dtype))


# The op modules import Tensor from here, so they are bound after the class exists.
from . import _read_only  # noqa: E402
from ._ops import arith as _arith  # noqa: E402
from ._ops import compare as _compare  # noqa: E402
from ._ops import composite as _composite  # noqa: E402
from ._ops import cumulative as _cumulative  # noqa: E402
from ._ops import diagonal as _diagonal  # noqa: E402
from ._ops import elementwise as _elementwise  # noqa: E402
from ._ops import index as _index  # noqa: E402
from ._ops import inplace as _inplace  # noqa: E402
from ._ops import pointwise as _pointwise  # noqa: E402
from ._ops import products as _products  # noqa: E402
from ._ops import random as _random  # noqa: E402
from ._ops import rearrange as _rearrange  # noqa: E402
from ._ops import reduce as _reduce  # noqa: E402
from ._ops import shape as _shape  # noqa: E402
from ._ops import sorting as _sorting  # noqa: E402
from ._ops import unary as _unary  # noqa: E402
from ._ops._base import numpy_names as _numpy_names  # noqa: E402
from .autograd._view import DETACH_VIEW_MESSAGE as _DETACH_VIEW_MESSAGE  # noqa: E402
from .autograd._view import current_grad_fn as _current_grad_fn  # noqa: E402


def _method_and_inplace(name: str, op: Callable[..., Tensor]) -> None:
    """``Tensor.name`` calls ``op``; ``Tensor.name_`` writes its result in place."""

    def inplace(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return _inplace.functional_(self, lambda s: op(s, *args, **kwargs), *args)

    inplace.__name__ = inplace.__qualname__ = name + "_"
    setattr(Tensor, name, op)
    setattr(Tensor, name + "_", inplace)


# The table-driven elementwise ops (floor, log1p, erf, atan2, logical_and, ...) and reciprocal.
for _name, _op in {
    **_elementwise.UNARY, **_elementwise.BINARY, **_elementwise.LOGICAL,
    "reciprocal": _unary.reciprocal,
}.items():  # fmt: skip
    _method_and_inplace(_name, _op)
Tensor.isclose = _elementwise.isclose  # type: ignore[attr-defined]
for _name, _op in _composite.COMPOSITE.items():
    setattr(Tensor, _name, _op)

# torch's argument parser takes numpy's ``axis``/``keepdims`` for ``dim``/``keepdim`` in every
# method that has them, except those torch writes in Python (``split``, ``norm``, ``unflatten``).
_PYTHON_IN_TORCH = {"split", "norm", "unflatten"}
for _name, _method in tuple(vars(Tensor).items()):
    if isfunction(_method) and not _name.startswith("_") and _name not in _PYTHON_IN_TORCH:
        setattr(Tensor, _name, _numpy_names(_method))
del _name, _method
