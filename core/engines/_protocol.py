"""The engine interface: what the runtime needs from an autograd engine, and nothing more.

hookgrad's runtime drives models of more than one engine: its own numpy engine and PyTorch.
Both offer the same torch-style tensor, module and optimizer API, so most of what the runtime
and the plugins do needs no interface at all. What differs sits here, one adapter per engine
(:mod:`hookgrad.engines.numpy`, :mod:`hookgrad.engines.torch`): the training-loop points torch
has no public hook for (an observer around ``backward``, a gate that can veto an optimizer
step) and the few numeric kernels the plugins share (norms, finiteness, clipping, summaries), so
plugin code never names an engine: it asks :func:`hookgrad.engines.engine_of` for the engine
of the tensors at hand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

if TYPE_CHECKING:
    from ..hookspecs import TensorSummary

__all__ = [
    "BackwardBegin",
    "BackwardEnd",
    "Engine",
    "Grads",
    "HandleGroup",
    "ModuleCall",
    "ModuleHooks",
    "Removable",
    "StepGate",
    "StepPost",
]

BackwardBegin: TypeAlias = Callable[[Any, Any], Any]
"""``begin(root, seed) -> replacement seed or None``: before the walk, once per root."""

BackwardEnd: TypeAlias = Callable[[Any], None]
"""``end(root)``: after the walk, once every ``.grad`` is final (DDP's averaging included)."""

StepGate: TypeAlias = Callable[[Any], bool]
"""``gate(optimizer) -> bool``: False vetoes that step."""

StepPost: TypeAlias = Callable[[Any], None]
"""``hook(optimizer)``: after each step taken (not after a vetoed one)."""


Grads: TypeAlias = tuple[Any, ...]
"""Gradients of a module call's inputs or outputs, one entry each (None where there is none)."""


class ModuleCall(Protocol):
    """One module call's backward events: what the engine calls during backward.

    A return value other than None replaces the gradients (same length), as the return of a
    torch full backward pre-hook (``grad_output``) or full backward hook (``grad_input``) does.
    """

    def backward_pre(self, grad_output: Grads) -> Grads | None:
        """The gradients of the call's outputs are known; the module's backward is next."""
        ...

    def full_backward(self, grad_input: Grads, grad_output: Grads) -> Grads | None:
        """The gradients of the call's inputs are known (None for inputs needing none)."""
        ...


class ModuleHooks(Protocol):
    """What an engine calls around every module call (the runtime's bridge implements it)."""

    def forward_pre(self, module: Any, args: tuple[Any, ...]) -> tuple[ModuleCall | None, Any]:
        """Before the call: (the call's backward receiver or None, replacement args or None)."""
        ...

    def forward(
        self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any
    ) -> Any:
        """After the call: a replacement output, or None."""
        ...

    def forward_failed(self, module: Any) -> None:
        """The call raised; nothing of it reaches backward."""
        ...


class Removable(Protocol):
    """A registration that can be undone (a hook handle)."""

    def remove(self) -> None: ...


class HandleGroup:
    """Several registrations undone together (one per engine, or per hook of one feature)."""

    __slots__ = ("_handles",)

    def __init__(self, handles: Iterable[Removable]) -> None:
        self._handles = tuple(handles)

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


@runtime_checkable
class Engine(Protocol):
    """One autograd engine as the runtime sees it."""

    @property
    def name(self) -> str:
        """``"hookgrad"`` or ``"torch"``: the value of the ``engine`` config key."""
        ...

    def owns(self, value: object) -> bool:
        """Whether ``value`` is a tensor of this engine."""
        ...

    def summaries(self, tensors: Sequence[Any]) -> list[TensorSummary]:
        """:func:`hookgrad.hookspecs.tensor_stats` of each tensor, computed where the tensors
        are (on their device) and handed to the host together."""
        ...

    def observe_backward(self, begin: BackwardBegin | None, end: BackwardEnd | None) -> Removable:
        """Call ``begin`` before and ``end`` after every outermost ``backward`` of the process.

        ``begin(root, seed)`` runs once per root, in order, before the graph walk; ``seed`` is
        the gradient the caller passed, or None for a scalar root's implicit one, and a non-None
        return replaces it. ``end(root)`` runs once per root after the walk, when every
        ``.grad`` is final, and only if the walk did not raise. ``autograd.grad`` notifies
        nobody: it accumulates nothing.
        """
        ...

    def gate_optimizer_steps(self, gate: StepGate) -> Removable:
        """Ask ``gate(optimizer)`` before every optimizer step of the process, ahead of the
        step hooks registered with the engine; False makes the step change no parameter and no
        optimizer state, and evaluate no closure."""
        ...

    def on_optimizer_step_post(self, hook: StepPost) -> Removable:
        """Call ``hook(optimizer)`` after every optimizer step taken, after the step's own post
        hooks (the engine's global post hooks run last)."""
        ...

    # ------------------------------------------------------------------ kernels
    # The numeric work the plugins share, one method per job, implemented by each adapter in
    # its ``_kernels`` module. Each takes a batch (a sequence of tensors, None entries allowed
    # where a gradient may be missing), runs where the tensors are and hands at most one
    # result to the host: a plugin costs at most one device sync per step.

    # ---------------------------------------------------- finiteness and loss scaling
    # (nan_guard, grad_scale)
    def first_nonfinite(self, values: Sequence[Any], skip: Any = None) -> int | None:
        """The index of the first entry of ``values`` holding a NaN or an Inf, or None.

        Entries that are not tensors of this engine (None for a missing gradient, a module's
        non-tensor arguments) are skipped, and so are integer and bool tensors (always finite)
        and ``skip``, a tensor the caller already found finite (numpy: any tensor sharing its
        array; torch: that very tensor). Huge finite values (whose squares overflow) are
        finite. numpy: a dot-product screen per array, stopping at the first non-finite one;
        torch: one fused L2-norm screen per device and dtype and one host sync, a second only
        when the screen flags a tensor (a true NaN/Inf, or a norm that overflowed).
        """
        ...

    def nonfinite_counts(self, tensors: Sequence[Any]) -> list[tuple[int, int]]:
        """``(nan, inf)`` per tensor: how many entries are NaN and how many +-Inf ((0, 0) for
        None, integer and bool tensors). torch: one host sync per device."""
        ...

    def zero_nonfinite_(self, tensors: Sequence[Any]) -> int:
        """Set every NaN and +-Inf entry of ``tensors`` to 0 in place with ``masked_fill_``
        (which bumps the version counter), on the tensors holding such entries only; how
        many entries were set. None entries are skipped. torch: the per-tensor counts come
        to the host in one sync per device, then only the tensors that need it are written.
        """
        ...

    def unscale_(self, tensors: Sequence[Any], inv_scale: float) -> bool:
        """Whether any tensor holds NaN or Inf (checked before scaling), after multiplying
        every tensor in place by ``inv_scale`` rounded to float32, as
        ``torch._amp_foreach_non_finite_check_and_unscale_`` does (``GradScaler.unscale_``):
        products in the tensor's precision (float32 at least), equal to torch's CPU kernel
        bit for bit, and no version counter bumped (torch's kernel bumps none). None entries
        are skipped. torch: one fused kernel per device and dtype, one host sync per device.
        """
        ...

    def dtype_name(self, tensor: Any) -> str:
        """The name of ``tensor``'s dtype without engine prefix: ``"float16"``, ``"float32"``,
        ... (what :class:`~hookgrad.hookspecs.TensorSummary` calls it). No sync."""
        ...

    def running_loss_scaler(self) -> str | None:
        """The name of the engine's own loss scaler whose step is calling the optimizer step
        under way (torch: ``"torch.amp.GradScaler"`` inside ``GradScaler.step``), else None;
        call it from an optimizer step gate. numpy: always None."""
        ...
