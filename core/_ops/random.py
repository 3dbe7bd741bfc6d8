"""Sampling: in-place fills (normal_, uniform_, bernoulli_, exponential_), bernoulli,
multinomial, normal, and the histograms (histc, histogram).

Every draw comes from a hookgrad :class:`Generator`, which draws torch's CPU numbers
(:mod:`hookgrad._random_stream`): ``normal_``, ``uniform_``, ``bernoulli_``/``bernoulli`` and
``normal``, ``exponential_`` and ``multinomial`` give torch's values for the same seed (one
sample, or none replaced: the largest ``weight / Exp(1)`` draws, as torch's fast path).
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from .._creation import Generator, _generator, _shape
from .._dtype import float32
from ._base import Tensor, grad_state, not_a_tensor, wrap
from .inplace import _LEAF_MESSAGE, bump

__all__ = [
    "bernoulli",
    "bernoulli_",
    "exponential_",
    "histc",
    "histogram",
    "multinomial",
    "normal",
    "normal_",
    "uniform_",
]

histogram_result = namedtuple("histogram", ["hist", "bin_edges"])  # type: ignore[name-match]


def _fill(x: Tensor, values: Any) -> Tensor:
    """Write ``values`` into ``x`` in place, refused on a leaf that requires grad (as torch)."""
    if grad_state.enabled and x._requires_grad and x.grad_fn is None:
        raise RuntimeError(_LEAF_MESSAGE)
    x._data[...] = values
    return bump(x)


def normal_(
    x: Tensor, mean: float = 0.0, std: float = 1.0, *, generator: Generator | None = None
) -> Tensor:
    """Fill with draws from N(mean, std**2)."""
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    return _fill(x, _generator(generator).normal(x._data.shape, x._data.dtype, mean, std))


def uniform_(
    x: Tensor, a: float = 0.0, b: float = 1.0, *, generator: Generator | None = None
) -> Tensor:
    """Fill with draws from U(a, b)."""
    if a > b:
        raise RuntimeError(
            f"uniform_ expects to return a [from, to) range, but found from={a:g} > to={b:g}"
        )
    return _fill(x, _generator(generator).uniform(x._data.shape, x._data.dtype, a, b))


def exponential_(x: Tensor, lambd: float = 1.0, *, generator: Generator | None = None) -> Tensor:
    """Fill with draws from Exp(lambd)."""
    if lambd <= 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd:g}")
    return _fill(x, _generator(generator).exponential(x._data.shape, lambd))


def _probabilities(p: Any) -> np.ndarray:
    probs = p._data if isinstance(p, Tensor) else np.asarray(p)
    if ((probs < 0) | (probs > 1)).any():
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
    return probs


def bernoulli_(x: Tensor, p: Any = 0.5, *, generator: Generator | None = None) -> Tensor:
    """Fill with 0/1 draws that are 1 with probability ``p`` (a number or a tensor)."""
    probs = _probabilities(p) if isinstance(p, Tensor) else float(_probabilities(p))
    return _fill(x, _generator(generator).bernoulli(probs, x._data.shape))


def bernoulli(x: Tensor, p: Any = None, *, generator: Generator | None = None) -> Tensor:
    """0/1 draws, 1 with the probability in each entry of ``x`` (or ``p``), in x's dtype."""
    probs = _probabilities(x if p is None else p)
    draws = _generator(generator).bernoulli(probs, x._data.shape)
    return wrap(draws.astype(x._data.dtype))


def multinomial(
    x: Tensor,
    num_samples: int,
    replacement: bool = False,
    *,
    generator: Generator | None = None,
) -> Tensor:
    """Indices drawn from the categorical distribution(s) in the rows of ``x`` (weights)."""
    w = x._data
    if w.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if w.dtype.kind != "f":
        raise RuntimeError("multinomial only supports floating-point dtypes for input")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    rows = w.reshape(-1, w.shape[-1]).astype(np.float64)
    if not replacement and num_samples > rows.shape[1]:
        raise RuntimeError(
            "cannot sample n_sample > prob_dist.size(-1) samples without replacement"
        )
    if (rows < 0).any() or not np.isfinite(rows).all():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    totals = rows.sum(axis=1)
    if (totals <= 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    rng = _generator(generator)
    if replacement and num_samples > 1:  # torch's: double uniform draws in the cumulative sums
        cumulative = np.cumsum(rows / totals[:, None], axis=1)
        draws = rng.uniform((rows.shape[0], num_samples), np.float64)
        out = np.stack([np.searchsorted(c, d, side="right") for c, d in zip(cumulative, draws)])
        out = np.minimum(out, rows.shape[1] - 1)
    else:  # torch's: the largest weight / Exp(1) draw (zero weights last, never refused)
        exp = rng.exponential(w.shape, 1.0).astype(w.dtype).reshape(rows.shape)
        keys = w.reshape(rows.shape) / exp
        out = np.argsort(-keys, axis=1, kind="stable")[:, :num_samples]
    return wrap(out.reshape(*w.shape[:-1], num_samples).astype(np.int64))


def normal(
    mean: Any,
    std: Any = 1.0,
    size: Any = None,
    *,
    generator: Generator | None = None,
    dtype: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Draws from N(mean, std**2): elementwise for tensor ``mean``/``std`` (broadcast), or
    ``size`` draws for two numbers (a leaf that ``requires_grad`` if asked, as torch's)."""
    from .._dtype import resolve_dtype

    rng = _generator(generator)
    tm, ts = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not tm and not ts:
        if size is None:
            raise TypeError("normal() received an invalid combination of arguments")
        target = resolve_dtype(dtype) or float32
        out = wrap(rng.normal(_shape((size,), "normal"), target, mean, std))
        return out.requires_grad_(True) if requires_grad else out
    m = mean._data if tm else np.asarray(mean)
    s = std._data if ts else np.asarray(std)
    if (s < 0).any():
        raise RuntimeError("normal expects all elements of std >= 0.0")
    like = mean._data if tm else std._data
    shape = np.broadcast_shapes(m.shape, s.shape)
    draws = rng.normal(shape, like.dtype)  # torch: normal_(0, 1), then * std + mean
    return wrap((draws * s + m).astype(like.dtype))


def histc(x: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:
    """Counts in ``bins`` equal bins over [min, max] (the data's range when both are 0);
    entries outside are ignored, the last bin includes ``max``. torch's binning formula."""
    d = x._data
    if d.dtype.kind != "f":
        raise RuntimeError(f"\"histogram_cpu\" not implemented for '{_type_name(d)}'")
    if bins <= 0:
        raise RuntimeError("torch.histc: bins must be > 0, but got " + str(bins))
    # every edge in the input's dtype, as torch computes them
    kind = d.dtype.type
    lo, hi = kind(min), kind(max)
    if lo == hi and d.size:
        lo, hi = d.min(), d.max()
    if lo == hi:
        lo, hi = lo - kind(1), hi + kind(1)
    if lo > hi:
        raise RuntimeError("torch.histc: max must be larger than min")
    inside = d[(d >= lo) & (d <= hi)]
    pos = ((inside - lo) * kind(bins) / (hi - lo)).astype(np.int64)
    pos = np.minimum(pos, bins - 1)
    return wrap(np.bincount(pos, minlength=bins).astype(d.dtype))


def _type_name(d: np.ndarray) -> str:
    from .._dtype import scalar_type_name

    return scalar_type_name(d.dtype)


def histogram(
    x: Tensor,
    bins: Any = 100,
    *,
    range: tuple[float, float] | None = None,
    weight: Tensor | None = None,
    density: bool = False,
) -> Any:
    """``(hist, bin_edges)``: ``bins`` equal bins over ``range`` (default: the data's range),
    or the given edges when ``bins`` is a tensor."""
    if not isinstance(x, Tensor):
        raise not_a_tensor("histogram", "input", x, 1)
    d = x._data
    edges: Any = bins._data if isinstance(bins, Tensor) else int(bins)
    w = None if weight is None else weight._data
    hist, bin_edges = np.histogram(d, edges, range=range, weights=w, density=density)
    return histogram_result(wrap(hist.astype(d.dtype)), wrap(bin_edges.astype(d.dtype)))
