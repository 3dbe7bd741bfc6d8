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
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeAlias, runtime_checkable

if TYPE_CHECKING:
    from ..hookspecs import TensorSummary
    from ..hookspecs._stats import GradSummary

__all__ = [
    "BackwardBegin",
    "BackwardEnd",
    "Clamped",
    "Engine",
    "Grads",
    "HandleGroup",
    "ModuleCall",
    "ModuleHookSource",
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


# --------------------------------------------------------------------------------- module calls
@runtime_checkable
class ModuleHookSource(Protocol):
    """An engine that installs the runtime's module hooks itself (torch's adapter).

    hookgrad's numpy engine offers none: the runtime's bridge registers hookgrad's global
    module hooks directly (its fast path, which needs the engine's per-call records).
    """

    def install_module_hooks(self, hooks: ModuleHooks, *, backward: bool) -> Removable:
        """Call ``hooks`` around every module call of the process; with ``backward``, route
        each call's backward events to the ModuleCall its ``forward_pre`` returned."""
        ...


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

    @property
    def api(self) -> ModuleType:
        """The engine's torch-style top-level module (``hookgrad`` or ``torch``), for code that
        builds the same model or tensors on either engine (the demo, the tests)."""
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

    # ----------------------------------------------------------------------------- module calls
    def observe_module_calls(
        self, begin: Callable[[Any], None], end: Callable[[Any], None]
    ) -> Removable:
        """Call ``begin(module)`` before every module call of the process and ``end(module)``
        after it, whether it returned or raised (how the runtime spots outermost calls)."""
        ...

    def unwrap(self, module: Any) -> Any:
        """The model a wrapper module stands for (torch's DistributedDataParallel and
        DataParallel: the module they wrap; what ``torch.compile(net)`` returns: ``net``), else
        ``module`` itself. Events and parameter names skip the wrapper: ``DDP(net)`` is named
        as ``net`` is."""
        ...

    # -------------------------------------------------------------------- distributed agreement
    def agree_on_step(self, optimizer: Any, vetoed_by: str | None, failed: bool) -> str | None:
        """The verdict on this step of ``optimizer`` that every rank of the run takes.

        ``vetoed_by`` names what vetoed the step on this rank (None: nothing did) and
        ``failed`` says the gate raised here (the caller raises that error after this returns).
        Outside a distributed run, hookgrad's engine always, it returns ``vetoed_by`` and
        touches nothing. In one (a process group of world size above 1) every rank calls it
        once per gated step and takes part in one small collective; then:

        * a gate failed on another rank, none here: RuntimeError ``"optimizer step abandoned:
          a plugin failed on rank R"`` (R the lowest such rank), so no rank waits for ever;
        * a rank vetoed: ``"NAME@rankR"`` on every rank, R the lowest vetoing rank and NAME
          what vetoed there (learning NAME costs one more collective, on vetoed steps only);
        * otherwise None: every rank steps.
        """
        ...

    # ------------------------------------------------------------------ kernels
    # The numeric work the plugins share, one method per job, implemented by each adapter in
    # its ``_kernels`` module. Each takes a batch (a sequence of tensors, None entries allowed
    # where a gradient may be missing), runs where the tensors are and hands at most one
    # result to the host: a plugin costs at most one device sync per step.

    # ------------------------------ clipping: total norms, to a norm, by value, unit-wise (AGC)
    def total_norms(
        self,
        groups: Sequence[Sequence[Any]],
        norm_types: Sequence[float],
        error_if_nonfinite: bool = False,
    ) -> list[tuple[float, ...]]:
        """For each group, its norm of each order in ``norm_types``: all tensors of the group
        viewed as one vector, as ``torch.nn.utils.get_total_norm`` computes it (in the tensors'
        promoted dtype; ``inf`` is the max-abs norm; an empty group's norm is 0.0).

        None entries are skipped. ``error_if_nonfinite``: raise torch's RuntimeError when a
        group's norm of the first order is nan or inf. One host sync for all groups and orders.
        """
        ...

    def clip_with_norm_(self, tensors: Sequence[Any], max_norm: float, total_norm: float) -> float:
        """Scale the tensors in place by ``min(max_norm / (total_norm + 1e-6), 1)``, computed
        as ``torch.nn.utils.clip_grads_with_norm_`` does, in the tensors' promoted dtype; return
        that coefficient.

        A coefficient of exactly 1 (or no tensor) changes nothing, not even a version counter
        (torch multiplies by 1.0); a nan or inf ``total_norm`` makes the tensors nan or zero,
        as in torch. None entries are skipped. No host sync: the coefficient is computed on
        the host from ``total_norm`` (a :meth:`total_norms` result).
        """
        ...

    def clamp(self, tensors: Sequence[Any], limit: float, *, in_place: bool) -> Clamped:
        """Clamp the tensors to ``[-limit, limit]`` if some entry lies outside (NaN entries do
        not, infinities do), in place or into new tensors, as ``clip_grad_value_`` (resp.
        ``Tensor.clamp``) does; also the 2-norm of all tensors before and after.

        None entries are skipped and kept (as None) in ``Clamped.tensors``, which is None when
        no entry was outside: the values are then unchanged (torch's adapter, which clamps
        before it knows, to keep to one host sync, has written them in place nonetheless).
        """
        ...

    def agc_clip_(
        self, weights: Sequence[Any], grads: Sequence[Any | None], clipping: float, eps: float
    ) -> tuple[float, float, bool]:
        """Adaptive gradient clipping (Brock et al. 2021), each ``grads[i]`` in place against
        ``weights[i]``: (2-norm of all grads before, after, whether any unit was scaled).

        A unit is an output row (index of the first dim) of a tensor of two or more dims, the
        whole tensor otherwise (timm's ``unitwise_norm``); a unit whose gradient norm exceeds
        ``clipping * max(weight norm, eps)`` is scaled down to it (gradient norm floored at
        1e-6). None grads are skipped. One host sync for all parameters.
        """
        ...

    # ---------------------------------------------------------------------- gradient statistics
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

    def restore_(self, tensors: Sequence[Any], snapshots: Sequence[Any]) -> None:
        """Write each :meth:`snapshot` back into its tensor, in place, without autograd (a
        rolled-back parameter keeps its identity, so optimizers and hooks keep seeing it);
        the version counters move. No host sync."""
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

    def zero_units(self, tensors: Sequence[Any | None]) -> list[Any | None]:
        """For each tensor, a numpy bool array with one flag per *unit*, True where every
        entry of the unit is exactly 0 (a NaN is not 0); None for None.

        A unit is an index of the first dim (an output row of a Linear's weight, an output
        channel of a Conv's, an entry of a vector), as :meth:`agc_clip_` counts units; a 0-dim
        tensor is one unit. One vectorised pass over the entries (the tensors whose units
        have the same size reduced together, so a stack of equal layers costs one reduction),
        one host sync for the batch (param_health's dead units: rows of a weight gradient that
        stay exactly zero).
        """
        ...

    # -------------------------------------------------------------- finiteness and loss scaling
    def first_nonfinite(self, values: Sequence[Any], skip: Any = None) -> int | None:
        """The index of the first entry of ``values`` holding a NaN or an Inf, or None.

        Entries that are not tensors of this engine (None for a missing gradient, a module's
        non-tensor arguments) are skipped, and so are integer and bool tensors (always finite)
        and ``skip``, a tensor the caller already found finite (numpy: any tensor sharing its
        array; torch: that very tensor); a tensor met again (numpy: an array) is screened
        once, so a batch may hold it twice. Huge finite values (whose squares overflow) are
        finite. numpy: a dot-product screen per array, stopping at the first non-finite one
        (a long batch of small arrays, a backward's gradients: first one screen per chunk of
        them joined, about a MiB each);
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

    # ---------------------------------------------------- gradient norms (the per-step summary)
    # The kernels behind :func:`hookgrad.engines.grad_norms`, the per-step gradient summary every
    # plugin shares (computed once, cached by tensor and version counter there, not here).
    def grad_norms(self, tensors: Sequence[Any | None]) -> list[float | None]:
        """The 2-norm of each tensor (None for None), all entries included: nan or inf when
        some entry is NaN or Inf, or when a huge finite entry's square overflows.

        float32 and float64 tensors are normed in their own dtype, as ``torch._foreach_norm``
        (``clip_grad_norm_``'s per-tensor step) computes them, so :meth:`total_norm_of` can
        rebuild ``clip_grad_norm_``'s total bit for bit; narrower floats in float32 (their
        squares overflow at 256 in float16). One host sync for the batch.
        """
        ...

    def total_norm_of(self, tensors: Sequence[Any], norms: Sequence[float]) -> float | None:
        """The 2-norm of all ``tensors`` together from their :meth:`grad_norms` ``norms``,
        bit for bit ``get_total_norm(tensors, 2.0)``; None when that cannot be rebuilt from
        them (a tensor narrower than float32; torch: a tensor not on the CPU), so the caller
        asks :meth:`total_norms`. No device work: the norms are on the host already.
        """
        ...


class Clamped(NamedTuple):
    """What :meth:`Engine.clamp` did: the clamped tensors (None: nothing was outside the
    limit, nothing changed) and the 2-norm of all the tensors before and after."""

    tensors: tuple[Any, ...] | None
    pre_norm: float
    post_norm: float
