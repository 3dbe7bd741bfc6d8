"""The per-step gradient summary: each gradient's 2-norm, computed once and shared by every plugin.

Several plugins need the norms of the same gradients at the same optimizer step (nan_guard for
finiteness, grad_stats for its records, grad_clip for the total norm). :func:`grad_norms`
computes them with the engine's :meth:`~hookgrad.engines.Engine.grad_norms` kernel (one
device sync for the batch) and remembers each value against the tensor's identity and version
counter, so the next plugin asking gets it without device work, and a gradient changed since
(in place: its version counter moved; or replaced: another tensor) is normed again.

The cache holds weak references only: it never keeps a gradient alive, and an entry whose
tensor died (its id possibly reused by a new tensor) is never returned. Kernels that write a
tensor without moving its version counter (``unscale_``, as torch's
``_amp_foreach_non_finite_check_and_unscale_`` does) call :func:`forget` on what they wrote;
a kernel that scales tensors by a known factor (a clip) carries their norms over with
:func:`scaled`.

Several plugins ask for the very same gradients at one step (all of a model's, in the
optimizer's order), so the last batch asked for is also kept whole: a call with the same
tensors at the same versions is answered from it by comparing two lists, without a lookup per
tensor. Its weak references drop it the moment one of its tensors dies.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._protocol import Engine

__all__ = ["forget", "grad_norms", "scaled"]

_Entry = tuple["weakref.ReferenceType[Any]", int, "float | None"]
"""(weak reference to the tensor, its version counter then, its 2-norm)."""

_CACHE: dict[int, _Entry] = {}
"""id(tensor) -> its entry; checked against the tensor itself on every read."""


class _Batch:
    """The tensors of the last call, whole: their ids, and their versions and norms.

    Its values go into the per-tensor entries only when a call asks for other tensors
    (:meth:`spill`): a step whose plugins all ask for the same gradients makes none.
    """

    __slots__ = ("ids", "ref_ids", "refs", "state")

    def __init__(self, tensors: Sequence[Any], versions: list[int], norms: list[float | None]):
        self.ids = tuple(map(id, tensors))
        # The callbacks drop the batch when a tensor dies (its id may then be reused).
        self.refs = [weakref.ref(t, _batch_died) for t in tensors]
        self.ref_ids = frozenset(map(id, self.refs))
        self.state = (versions, norms)  # one attribute: a reader never sees half an update

    def spill(self) -> None:
        """Make the batch's values per-tensor entries (it is being let go)."""
        versions, norms = self.state
        for key, ref, version, norm in zip(self.ids, self.refs, versions, norms, strict=True):
            _CACHE[key] = (ref, version, norm)


_last: _Batch | None = None


def _batch_died(ref: Any) -> None:
    """A tensor of a batch died: drop the batch if it is still the last one (an older
    batch kept alive elsewhere, say by a traceback's frame, must not drop the current)."""
    global _last
    last = _last
    if last is not None and id(ref) in last.ref_ids:
        _last = None


def _let_go_of_last() -> None:
    global _last
    last, _last = _last, None
    if last is not None:
        last.spill()


_engine_lookup: Callable[[Any], Engine | None] | None = None
"""hookgrad.engines.engine_of, once imported (a function-level import costs a microsecond)."""

_MIN_LIMIT = 256
_limit = _MIN_LIMIT
"""Entries past which the dead ones are swept (then twice the live ones, at least 256)."""


def grad_norms(tensors: Sequence[Any]) -> list[float | None]:
    """The 2-norm of each tensor (None for None), from this step's shared summary.

    Values already computed for the very same tensor at its current version counter are
    returned as they are; the others are computed together by their engine (one device sync)
    and kept for the next caller. A norm is nan or inf when the tensor holds a NaN or an Inf,
    or when a huge finite entry's square overflows (confirm with
    :meth:`~hookgrad.engines.Engine.first_nonfinite` before calling a gradient non-finite).
    float32 and float64 tensors are normed in their own dtype (as ``clip_grad_norm_`` norms
    each of them), narrower floats in float32.

    Changes the cache cannot see: writes through a tensor's storage that leave its version
    counter alone (``tensor.data``, the numpy array under a hookgrad tensor).
    """
    global _last
    try:
        versions = [t._version for t in tensors]
    except AttributeError:  # a None (or not a tensor: _compute names it)
        versions = None
    last = _last
    if last is not None:
        if versions == last.state[0] and tuple(map(id, tensors)) == last.ids:
            return list(last.state[1])
        _let_go_of_last()
    if (
        versions is not None
        and len({type(t) for t in tensors}) == 1
        and _CACHE.keys().isdisjoint(map(id, tensors))
    ):  # no None, one engine, none known: a new step's first ask, the common case
        norms = _engine_of(tensors[0]).grad_norms(tensors) if tensors else []
        _last = _Batch(tensors, versions, list(norms))
        return norms
    norms = [None] * len(tensors)
    missing: list[int] = []
    cache = _CACHE
    if cache:
        for i, t in enumerate(tensors):
            if t is None:
                continue
            entry = cache.get(id(t))
            if entry is not None and entry[1] == t._version and entry[0]() is t:
                norms[i] = entry[2]
            else:
                missing.append(i)
    else:
        missing = [i for i, t in enumerate(tensors) if t is not None]
    if missing:
        _compute(tensors, missing, norms, keep=versions is None)
    if versions is not None:
        _last = _Batch(tensors, versions, list(norms))
    return norms


def forget(tensors: Sequence[Any]) -> None:
    """Drop the cached norms of ``tensors``: they were written without a version bump."""
    _let_go_of_last()
    if _CACHE:
        for t in tensors:
            if t is not None:
                _CACHE.pop(id(t), None)


def scaled(tensors: Sequence[Any], versions: Sequence[int], factor: float) -> None:
    """``tensors``, at ``versions`` then, were multiplied in place by ``factor`` (a clip): their
    cached norms, if current then, become ``|factor|`` times theirs, so the next reader (the
    post-clip statistics) needs no device pass. A non-finite norm is dropped instead: a
    product with huge finite entries need not overflow as their squares did."""
    magnitude = abs(factor)
    last = _last
    if last is not None and tuple(map(id, tensors)) == last.ids:
        then, norms = last.state
        if list(versions) == then and all(n is not None and math.isfinite(n) for n in norms):
            last.state = ([t._version for t in tensors], [n * magnitude for n in norms])  # type: ignore[operator]
            return
    _let_go_of_last()
    if not _CACHE:
        return
    for t, version in zip(tensors, versions, strict=True):
        key, now = id(t), t._version
        entry = _CACHE.get(key)
        if entry is None or entry[1] != version or entry[0]() is not t:
            continue
        norm = entry[2]
        if norm is not None and math.isfinite(norm):
            _CACHE[key] = (entry[0], now, norm * magnitude)
        else:
            del _CACHE[key]


def _compute(
    tensors: Sequence[Any], missing: list[int], norms: list[float | None], *, keep: bool
) -> None:
    """Norm ``tensors[i]`` for each i in ``missing`` (by engine) into ``norms``, and into the
    per-tensor entries if ``keep`` (else the caller keeps them as the last batch)."""
    by_type: dict[type, list[int]] = {}  # a tensor type is of one engine
    for i in missing:
        by_type.setdefault(type(tensors[i]), []).append(i)
    cache = _CACHE
    for indices in by_type.values():
        batch = [tensors[i] for i in indices]
        values = _engine_of(batch[0]).grad_norms(batch)
        for i, norm in zip(indices, values, strict=True):
            norms[i] = norm
        if keep:
            for t, norm in zip(batch, values, strict=True):
                cache[id(t)] = (weakref.ref(t), t._version, norm)
    if len(cache) > _limit:
        _sweep()


def _sweep() -> None:
    """Drop the entries of dead tensors; the limit follows the live ones, so sweeps stay rare."""
    global _limit
    # list() copies the items at once, so another thread's insert cannot break the loop.
    dead = [key for key, (ref, _, _) in list(_CACHE.items()) if ref() is None]
    for key in dead:
        _CACHE.pop(key, None)
    _limit = max(_MIN_LIMIT, 2 * len(_CACHE))


def _engine_of(tensor: Any) -> Engine:
    global _engine_lookup
    if _engine_lookup is None:
        from . import engine_of  # not at the top: hookgrad.engines imports this module

        _engine_lookup = engine_of
    engine = _engine_lookup(tensor)
    if engine is None:
        raise TypeError(f"grad_norms() takes tensors, got {type(tensor).__name__}")
    return engine
