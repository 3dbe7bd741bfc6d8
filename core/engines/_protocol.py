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
    from ..hookspecs._stats import GradSummary

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

    # ------------------------------------------------------------------ grad_stats kernels
    # Gradient statistics for grad_stats, shaped for a per-step summary shared by every
    # plugin: a step's gradients (or weights) in, one result per tensor out, in order.
    def grad_summaries(self, tensors: Sequence[Any | None]) -> list[GradSummary | None]:
        """The :class:`~hookgrad.hookspecs._stats.GradSummary` of each tensor (None for None).

        The statistics of :func:`hookgrad.hookspecs.tensor_stats`, in the tensors' own units,
        computed in float64 on the tensors' device: ``norm``, ``mean``, ``std`` (population),
        ``min``, ``max`` and ``max_abs`` over the finite entries; ``nonfinite``, ``numel``
        and ``zero_fraction`` counted exactly. One host sync for the whole batch.
        """
        ...

    def histograms(
        self, tensors: Sequence[Any | None], bins: int, ranges: Sequence[tuple[float, float] | None]
    ) -> list[dict[str, list[Any]] | None]:
        """``np.histogram(t, bins, range)`` of each tensor: ``{"counts": [...], "edges": [...]}``.

        ``ranges`` holds each tensor's finite (min, max), so only finite entries are counted;
        the edges are numpy's, to the bit, in the tensor's dtype. None for a None tensor or
        range, or where the range's width overflows the dtype. One host sync for the batch.
        """
        ...

    def snapshot(self, tensors: Sequence[Any | None]) -> list[Any | None]:
        """Copies of the tensors' values, kept where the tensors are (no host transfer), for
        :meth:`diff_norms` after they change in place; None for None."""
        ...

    def diff_norms(
        self, after: Sequence[Any | None], before: Sequence[Any | None]
    ) -> list[tuple[float, float] | None]:
        """``(||a - b||, ||b||)`` (L2, in the tensors' units) of each tensor ``a`` of ``after``
        and its :meth:`snapshot` ``b`` of ``before``; None where either is None. The difference
        is taken in the tensors' dtype, the norms accumulated in float64 where they would
        overflow. One host sync for the batch.
        """
        ...
