"""Saved-tensor hooks, as ``torch.autograd.graph``: what a node keeps for its backward.

Inside ``saved_tensors_hooks(pack, unpack)`` every node an op records hands each value it
saves to ``pack`` as a Tensor and keeps only what ``pack`` returns; at backward (or when
``grad_fn._saved_<name>`` is read) ``unpack`` turns it back into a Tensor. One mechanism for
every node: the values a node saves are its public slots (``Node._saved_fields``), packed by
:func:`pack_node` when the op records its output (``_ops._base.record``) and restored by
:func:`unpack_node` before the node's backward runs. With no hooks pushed the forward path pays
one check of :data:`state` per op.

As in torch, values under hooks are not version-checked: the hooks own them (a pack that
keeps the tensor sees later in-place writes; one that copies does not).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np

from .._grad_mode import _state as _grad_state
from .._tensor import Tensor, _wrap

if TYPE_CHECKING:
    from .graph import Node

__all__ = [
    "SavedTensor",
    "disable_saved_tensors_hooks",
    "hooks_enabled",
    "hooks_snapshot",
    "pack_node",
    "pack_tensors",
    "restore_hooks",
    "save_on_cpu",
    "saved_tensors_hooks",
    "state",
    "unpack_node",
]

Pack = Callable[[Tensor], Any]
Unpack = Callable[[Any], Tensor]

_FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)
_ALREADY_SET = (
    "Calling register_hooks on a saved tensor whose hooks have already been set. Hint: only "
    "one pair of hooks is allowed at a time."
)
_PACK_IN_PLACE = (
    "A saved tensor pack hook is modifying its input in place. Tensors provided as input to "
    "pack hook can not be modified by in-place operations as this can lead to unexpected "
    "side-effects. Please open an issue if you need to perform in-place operations on the "
    "input to a pack hook."
)
# hookgrad slot names -> torch's saved-attribute names, for nodes that do not say otherwise
_TORCH_NAMES = {"x": "self", "a": "self", "b": "other", "out": "result"}


class _State:
    """``active``: how many hook pairs are pushed in any thread (the forward path's one
    check); the stacks themselves are per thread, as torch's."""

    __slots__ = ("active",)

    def __init__(self) -> None:
        self.active = 0


state = _State()


class _Local(threading.local):
    def __init__(self) -> None:
        self.stack: list[tuple[Pack, Unpack]] = []
        self.disabled: str | None = None


_local = _Local()


class saved_tensors_hooks:
    """Context manager: pack/unpack hooks for the tensors saved by ops run inside it.

    Nested contexts: the innermost pair applies. Inside ``disable_saved_tensors_hooks`` entering
    raises RuntimeError with that context's message.
    """

    def __init__(self, pack_hook: Pack, unpack_hook: Unpack) -> None:
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self) -> None:
        if _local.disabled is not None:
            raise RuntimeError(_local.disabled)
        _local.stack.append((self.pack_hook, self.unpack_hook))
        state.active += 1

    def __exit__(self, *args: object) -> None:
        """Pop the innermost pair (torch's ``__exit__(*args)``: callable bare, and an exit
        with nothing pushed does nothing)."""
        if _local.stack:
            _local.stack.pop()
            state.active -= 1


def hooks_enabled() -> bool:
    """Whether saved-tensor hooks may be pushed in this thread (no
    ``disable_saved_tensors_hooks`` in force): ``torch._C._autograd._saved_tensors_hooks_is_enabled``."""
    return _local.disabled is None


def hooks_snapshot() -> list[tuple[Pack, Unpack]]:
    """This thread's pushed hook pairs, to restore after a backward call: as torch restores
    its thread-local state, hooks entered or exited inside backward (by an unpack hook) do not
    outlive it."""
    return _local.stack[:]


def restore_hooks(snapshot: list[tuple[Pack, Unpack]]) -> None:
    """Put back the pairs :func:`hooks_snapshot` saw (no-op when nothing changed)."""
    stack = _local.stack
    if stack != snapshot:  # pairs of functions: equal only if the very same
        state.active += len(snapshot) - len(stack)
        _local.stack = snapshot


class save_on_cpu(saved_tensors_hooks):
    """torch's offloading hooks: saved tensors kept on the CPU, moved back at unpack. Every
    hookgrad tensor is on the CPU, so a saved tensor is kept as it is (a copy with
    ``pin_memory``, as torch's pinned buffer)."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        def pack_to_cpu(tensor: Tensor) -> tuple[Any, Tensor]:
            return (tensor.device, tensor.clone() if pin_memory else tensor)

        def unpack_from_cpu(packed: tuple[Any, Tensor]) -> Tensor:
            device, tensor = packed
            return tensor.to(device)

        super().__init__(pack_to_cpu, unpack_from_cpu)


class disable_saved_tensors_hooks:
    """Context manager under which using saved-tensor hooks raises RuntimeError(message)."""

    def __init__(self, error_message: str) -> None:
        self.error_message = error_message
        self._previous: str | None = None

    def __enter__(self) -> None:
        if _local.stack:
            raise RuntimeError(self.error_message)
        self._previous = _local.disabled
        _local.disabled = self.error_message

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _local.disabled = self._previous


class _Packed:
    """A saved value as its hooks keep it: what pack returned, the unpack to apply, and where
    the saved tensor sat in the graph (``grad_fn``, ``output_nr``)."""

    __slots__ = ("grad_fn", "output_nr", "packed", "unpack")

    def __init__(self, packed: Any, unpack: Unpack, saved: Tensor) -> None:
        self.packed = packed
        self.unpack = unpack
        self.grad_fn = saved.grad_fn
        self.output_nr = saved._output_nr

    def tensor(self) -> Tensor:
        """unpack's result, joined to the saved tensor's place in the graph as torch's
        ``SavedVariable.unpack`` joins it whatever the hook returned."""
        out = self.unpack(self.packed)
        if not isinstance(out, Tensor):
            raise TypeError(
                "Output of saved tensor unpack_hook expected to be a Tensor but got result of "
                f"type {type(out).__name__}"
            )
        grad_fn = self.grad_fn
        if grad_fn is None or out.grad_fn is grad_fn:
            return out
        joined = _wrap(out._data)
        joined._vbox = out._vbox
        joined._requires_grad = True
        joined.grad_fn = grad_fn
        joined._output_nr = self.output_nr
        return joined


def _saved_tensor(node: Node, value: np.ndarray, field: str) -> Tensor:
    """The tensor a node's saved array belongs to: the recorded input itself when the node
    knows it, the node's output (``grad_fn`` the node) for a saved result, else a tensor
    over the array."""
    for tensor, _ in node._versions:
        if tensor._data is value:
            return tensor
    tensor = _wrap(value)
    if torch_name(node, field) == "result":
        tensor._requires_grad = True
        tensor.grad_fn = node
    return tensor


def _pack(pack: Pack, tensor: Tensor) -> Any:
    """``pack(tensor)`` as torch calls it: on a value outside the graph (torch hands it
    detached, so grad mode is off), refusing a hook that writes to it in place."""
    version = tensor._vbox[0]
    previous = _grad_state.enabled
    _grad_state.enabled = False
    try:
        packed = pack(tensor)
    finally:
        _grad_state.enabled = previous
    if tensor._vbox[0] != version:
        raise RuntimeError(_PACK_IN_PLACE)
    return packed


def pack_node(node: Node, output: Tensor) -> None:
    """Hand each array ``node`` saved to the innermost pack hook (``record`` calls this while
    hooks are pushed); the node keeps only the packed forms."""
    if not _local.stack or node._packed is not None:
        return  # another thread's hooks, or a further output of a node already packed
    pack, unpack = _local.stack[-1]
    packed: dict[str, _Packed] = {}
    for field in node._saved_fields:
        value = getattr(node, field, None)
        if isinstance(value, np.ndarray):
            tensor = output if output._data is value else _saved_tensor(node, value, field)
            packed[field] = _Packed(_pack(pack, tensor), unpack, tensor)
            setattr(node, field, None)
    node._packed = packed
    node._versions = ()  # the hooks own the values now: no version check (as torch)


def pack_tensors(tensors: tuple[Tensor | None, ...]) -> list[_Packed | None] | None:
    """A custom Function's saved tensors packed by the innermost pack hook, or None when no
    hooks are pushed in this thread."""
    if not _local.stack:
        return None
    pack, unpack = _local.stack[-1]
    return [None if t is None else _Packed(_pack(pack, t), unpack, t) for t in tensors]


def unpack_node(node: Node) -> None:
    """Before ``node``'s backward: unpack each packed value into its slot (every backward
    unpacks again, as torch calls unpack_hook each time)."""
    assert node._packed is not None
    for field, saved in node._packed.items():
        setattr(node, field, saved.tensor()._data)


def torch_name(node: Node | type[Node], field: str) -> str:
    """torch's name for the value ``node`` (or its class) saves in slot ``field``."""
    return node._torch_saved_names.get(field, _TORCH_NAMES.get(field, field))


class SavedTensor:
    """``grad_fn._raw_saved_<name>``: one saved value, which may be given its own hooks."""

    __slots__ = ("_field", "_node")

    def __init__(self, node: Node, field: str) -> None:
        self._node = node
        self._field = field

    def register_hooks(self, pack_hook: Pack, unpack_hook: Unpack) -> None:
        """Pack the saved value now; unpack it at backward and on ``_saved_<name>``."""
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("register_hooks(): incompatible function arguments")
        node = self._node
        if node._freed:
            raise RuntimeError(_FREED_MESSAGE)
        packed = node._packed if node._packed is not None else {}
        if self._field in packed:
            raise RuntimeError(_ALREADY_SET)
        value = getattr(node, self._field)
        saved = _saved_tensor(node, value, self._field)
        packed[self._field] = _Packed(_pack(pack_hook, saved), unpack_hook, saved)
        setattr(node, self._field, None)
        node._packed = packed
        node._versions = tuple((t, v) for t, v in node._versions if t._data is not value)

    def unpack(self) -> Tensor | None:
        return saved_value(self._node, self._field)


def saved_value(node: Node, field: str) -> Tensor | None:
    """``grad_fn._saved_<name>``: the saved value as a Tensor (unpacked if it was packed), or
    None for an optional value the op did not get (clamp's missing bound)."""
    if node._freed:
        raise RuntimeError(_FREED_MESSAGE)
    if node._packed is not None and field in node._packed:
        return node._packed[field].tensor()
    value = getattr(node, field)
    return None if value is None else _saved_tensor(node, value, field)
