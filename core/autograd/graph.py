"""Autograd graph nodes, as ``torch.autograd.graph``.

A :class:`Node` is what ``tensor.grad_fn`` returns: one recorded operation. Its ``_next``
edges point at the nodes that produced its inputs, each as ``(node, output_nr)``, or None for
an input that needs no gradient. Hook tables stay None until a hook is registered, so nodes
without hooks cost the engine one attribute check.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..utils.hooks import HookDict, RemovableHandle, SnapshotHookDict
from ._saved import (
    SavedTensor,
    disable_saved_tensors_hooks,
    save_on_cpu,
    saved_tensors_hooks,
    saved_value,
    torch_name,
)

if TYPE_CHECKING:
    from .._tensor import Tensor
    from ._saved import _Packed

__all__ = [
    "AccumulateGrad",
    "Node",
    "disable_saved_tensors_hooks",
    "register_multi_grad_hook",
    "save_on_cpu",
    "saved_tensors_hooks",
]

Edge = tuple["Node", int]

# Leaf accumulation outranks every other ready node (torch gives it the largest sequence number).
ACCUMULATE_PRIORITY: int = sys.maxsize

_sequence = iter(range(sys.maxsize))

# next_sequence_nr() -> int: the creation order of graph nodes; the engine runs the most
# recent ready node first. The iterator's own __next__, so a call costs no Python frame.
next_sequence_nr: Callable[[], int] = _sequence.__next__


class _WeakTensors(dict):
    """output_nr -> tensor, each held by a weak reference; reads give the live tensors.

    A plain dict underneath, so the engine's emptiness checks stay C-speed.
    """

    __slots__ = ()

    def __setitem__(self, nr: int, tensor: Tensor) -> None:
        dict.__setitem__(self, nr, weakref.ref(tensor))

    def __getitem__(self, nr: int) -> Tensor | None:
        ref: weakref.ref[Tensor] = dict.__getitem__(self, nr)
        return ref()

    def items(self) -> list[tuple[int, Tensor]]:  # type: ignore[override]
        """The (output_nr, tensor) pairs whose tensor is still alive."""
        pairs = ((nr, ref()) for nr, ref in dict.items(self))
        return [(nr, t) for nr, t in pairs if t is not None]


class NodeHooks:
    """The hook tables of one node, created on the first registration."""

    __slots__ = ("post", "pre", "retains_grad", "tensor_pre")

    def __init__(self) -> None:
        # output_nr -> hooks registered through Tensor.register_hook for that output.
        self.tensor_pre: dict[int, SnapshotHookDict] = {}
        # output_nr -> the tensor whose .grad retain_grad() fills (runs after tensor_pre),
        # held weakly as torch's retains_grad hook holds it: the graph must not keep a
        # non-leaf alive, and a dead one has no .grad to fill.
        self.retains_grad: _WeakTensors = _WeakTensors()
        self.pre = HookDict()
        self.post = HookDict()


class Node:
    """One recorded operation: computes input gradients from output gradients."""

    __slots__ = ("__weakref__", "_freed", "_hooks", "_next", "_packed", "_seq", "_versions")

    # Number of forward outputs, i.e. gradient slots the engine buffers for this node.
    _n_out: int = 1
    # True for custom Functions: missing output gradients become zeros before backward().
    _materialize: bool = False
    # Names of the slots holding saved values, freed after backward unless retain_graph.
    _saved_fields: ClassVar[tuple[str, ...]] = ()
    # True for pass-through nodes that save nothing and fill in missing gradients themselves:
    # the engine calls their backward_multi directly, skipping the saved-state checks, and
    # runs a hook-free one as soon as it is ready when nothing outranks it (_engine._drain).
    _plain_identity: ClassVar[bool] = False
    # Saved slot -> torch's name for it (grad_fn._saved_<name>), where the defaults of
    # hookgrad.autograd._saved (x/a -> self, b -> other, out -> result) do not fit.
    _torch_saved_names: ClassVar[dict[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("__slots__", ())
        if isinstance(own, str):
            own = (own,)
        cls._saved_fields = cls._saved_fields + tuple(s for s in own if not s.startswith("_"))
        _define_saved_attributes(cls)

    def __init__(self, edges: tuple[Edge | None, ...]) -> None:
        self._next = edges
        self._seq = next(_sequence)
        self._hooks: NodeHooks | None = None
        self._versions: tuple[tuple[Tensor, int], ...] = ()
        self._freed = False
        # Saved values as saved-tensor hooks packed them (hookgrad.autograd._saved), by slot.
        self._packed: dict[str, _Packed] | None = None

    # -- to be provided by each operation ---------------------------------------------------
    def backward(self, grad: Any) -> tuple[np.ndarray | None, ...]:
        """Given the gradient of the output, return one gradient per edge (None where unneeded)."""
        raise NotImplementedError(f"{type(self).__name__} defines no backward formula")

    def backward_multi(self, grads: list[np.ndarray | None]) -> Sequence[np.ndarray | None]:
        """Multi-output nodes override this; grads holds one entry per output (None if unused)."""
        return self.backward(grads[0])

    def backward_graph(self, grads: list[Tensor | None]) -> Sequence[Tensor | None]:
        """``create_graph=True``: the input gradients computed with recorded hookgrad ops, so
        that they can be differentiated again. ``grads`` holds one Tensor per output (None if
        unused). Nodes without such a formula refuse rather than cut the graph."""
        raise RuntimeError(
            f"{self.name()} has no double-backward formula in hookgrad: create_graph=True "
            "cannot differentiate through it"
        )

    # -- public API mirroring torch.autograd.graph.Node -------------------------------------
    def name(self) -> str:
        return type(self).__name__

    @property
    def next_functions(self) -> tuple[tuple[Node | None, int], ...]:
        return tuple((None, 0) if e is None else e for e in self._next)

    @property
    def metadata(self) -> dict[str, Any]:
        return {}

    def register_hook(self, fn: Callable[..., Any]) -> RemovableHandle:
        """Register ``fn(grad_inputs, grad_outputs)`` to run after this node's backward.

        A non-None return replaces ``grad_inputs`` (the gradients sent to ``next_functions``).
        """
        hooks = self._hook_tables()
        handle = RemovableHandle(hooks.post)
        hooks.post[handle.id] = fn
        return handle

    def register_prehook(self, fn: Callable[..., Any]) -> RemovableHandle:
        """Register ``fn(grad_outputs)`` to run before this node's backward; may replace them."""
        hooks = self._hook_tables()
        handle = RemovableHandle(hooks.pre)
        hooks.pre[handle.id] = fn
        return handle

    def __dir__(self) -> list[str]:
        names = {torch_name(self, f) for f in self._saved_fields}
        saved = [f"{prefix}{n}" for n in sorted(names) for prefix in ("_raw_saved_", "_saved_")]
        return [*super().__dir__(), *saved]

    def _hook_tables(self) -> NodeHooks:
        if self._hooks is None:
            self._hooks = NodeHooks()
        return self._hooks

    # -- engine support -----------------------------------------------------------------------
    def _save(self, *tensors: Tensor) -> None:
        """Remember the versions of tensors this node's formula reads at backward time."""
        self._versions = tuple((t, t._vbox[0]) for t in tensors)

    def _release(self) -> None:
        for field in self._saved_fields:
            setattr(self, field, None)
        self._packed = None
        self._freed = True

    def __repr__(self) -> str:
        return f"<{type(self).__name__} object at {id(self):#x}>"


class _SavedAttribute:
    """``grad_fn._saved_<name>`` (a Tensor) or ``_raw_saved_<name>`` (a SavedTensor): one class
    attribute per saved slot under torch's name, made when the class is. Not a ``__getattr__``
    on Node: a type with one makes every attribute read of every node slower (the interpreter
    cannot specialise them), and the engine reads node attributes all through a backward."""

    __slots__ = ("_field", "_make", "_name")

    def __init__(self, name: str, field: str | None, make: Callable[[Node, str], Any]) -> None:
        self._name = name
        self._field = field  # None: a name a base class saves under that this class does not
        self._make = make

    def __get__(self, node: Node | None, owner: type | None = None) -> Any:
        if node is None:
            return self
        if self._field is None:
            raise AttributeError(f"{type(node).__name__!r} object has no attribute {self._name!r}")
        return self._make(node, self._field)


def _define_saved_attributes(cls: type[Node]) -> None:
    """Give ``cls`` its ``_saved_<name>``/``_raw_saved_<name>`` attributes (torch's names for
    its saved slots), hiding a base class's that no slot of ``cls`` carries any more."""
    names = {torch_name(cls, field): field for field in cls._saved_fields}
    inherited = {
        attr
        for base in cls.__mro__[1:]
        for attr, value in vars(base).items()
        if isinstance(value, _SavedAttribute)
    }
    for prefix, make in (("_raw_saved_", SavedTensor), ("_saved_", saved_value)):
        wanted = {prefix + name: field for name, field in names.items()}
        for attr in inherited - wanted.keys():
            if attr.startswith(prefix):
                setattr(cls, attr, _SavedAttribute(attr, None, make))
        for attr, field in wanted.items():
            setattr(cls, attr, _SavedAttribute(attr, field, make))


class AccumulateGrad(Node):
    """The sink of a leaf tensor: adds the incoming gradient into ``variable.grad``."""

    __slots__ = ("variable",)
    _saved_fields = ()

    def __init__(self, variable: Tensor) -> None:
        self._next = ()
        self._seq = ACCUMULATE_PRIORITY
        self._hooks = None
        self._versions = ()
        self._freed = False
        self._packed = None
        self.variable = variable

    def name(self) -> str:
        # torch's C++ class name, which node-walking code and torch's own tests compare with.
        return "torch::autograd::AccumulateGrad"

    def _release(self) -> None:
        # The leaf itself is not a saved value: a second backward must reach it again.
        return None


class _MultiHandle:
    """Handle of a multi-grad hook: removable and a context manager, but with no ``id`` (H-7)."""

    __slots__ = ("_handles",)

    def __init__(self, handles: tuple[RemovableHandle, ...]) -> None:
        self._handles = handles

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()

    def __enter__(self) -> _MultiHandle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.remove()


def register_multi_grad_hook(
    tensors: Sequence[Tensor], fn: Callable[..., Any], *, mode: str = "all"
) -> _MultiHandle:
    """Call ``fn`` once per backward when the gradients of ``tensors`` are ready (MG-1..MG-6).

    Built from one ordinary tensor hook per tensor, as torch builds it, so it sees gradients
    as changed by hooks registered before it. ``mode="all"`` calls ``fn(grads)`` with a list
    (None for tensors that got no gradient) once the last participating tensor is processed;
    ``mode="any"`` calls ``fn(grad)`` with the first gradient computed.
    """
    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    if mode == "any":
        return _MultiHandle(_register_any(tensors, fn))
    return _MultiHandle(_register_all(tensors, fn))


def _register_any(tensors: Sequence[Tensor], fn: Callable[..., Any]) -> tuple[RemovableHandle, ...]:
    from ._engine import current_graph_task

    fired: set[int] = set()

    def hook(grad: Any) -> None:
        running = current_graph_task()
        task = -1 if running is None else running.id
        if task in fired:
            return
        fired.add(task)
        fn(grad)

    return tuple(t.register_hook(hook) for t in tensors if t.requires_grad)


def _register_all(tensors: Sequence[Tensor], fn: Callable[..., Any]) -> tuple[RemovableHandle, ...]:
    from .._ops._base import edge
    from ._engine import current_graph_task

    nodes = []
    for t in tensors:
        e = edge(t)
        if e is None:
            raise AssertionError("Expected gradient function to be set")
        nodes.append(e[0])
    # Per running backward: [hook calls so far, calls expected, gradients by position].
    pending: dict[int, list[Any]] = {}

    def make_hook(index: int) -> Callable[[Any], None]:
        def hook(grad: Any) -> None:
            task = current_graph_task()
            key = -1 if task is None else task.id
            state = pending.get(key)
            if state is None:
                expected = sum(1 for n in nodes if task is not None and task.will_execute(n))
                state = pending[key] = [0, expected, [None] * len(nodes)]
            state[0] += 1
            state[2][index] = grad
            if state[0] == state[1]:
                del pending[key]
                fn(state[2])

        return hook

    return tuple(t.register_hook(make_hook(i)) for i, t in enumerate(tensors))
