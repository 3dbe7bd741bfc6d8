"""Loss functions, each one fused graph node: forward value and closed-form gradient together.

Class-dimension inputs ``(N, C, d1, ...)`` are folded to rows ``(M, C)`` with the class last;
gradients are unfolded the same way. Per-row losses ``loss_i`` are reduced by ``mean``/``sum``
or returned with ``none``; the backward turns the upstream gradient into one coefficient
per row (``g / denominator``, ``g`` or ``g[i]``) before applying the row formula.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..._ops._base import Node, Tensor, edge, needs_grad, record, sum_to, wrap
from ..._ops._graph import only, saved_tensor, sign_of, sum_to_tensor
from ..._ops.arith import broadcast_error, where
from ..._ops.unary import sgn
from ...amp._state import state as _autocast
from ...amp._state import to_float32

__all__ = [
    "BinaryCrossEntropyBackward0",
    "BinaryCrossEntropyWithLogitsBackward0",
    "CrossEntropyLossBackward0",
    "CrossEntropyLossBackward1",
    "L1LossBackward0",
    "MseLossBackward0",
    "NllLossBackward0",
    "SmoothL1LossBackward0",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "cross_entropy",
    "l1_loss",
    "mse_loss",
    "nll_loss",
    "reduction_mode",
    "smooth_l1_loss",
]

_REDUCTIONS = ("none", "mean", "sum")


def reduction_mode(size_average: bool | None, reduce: bool | None, reduction: str) -> str:
    """Validate ``reduction``; the deprecated ``size_average``/``reduce`` pair overrides it."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = ("mean" if size_average else "sum") if reduce else "none"
        warnings.warn(
            "size_average and reduce args will be deprecated, please use "
            f"reduction='{reduction}' instead.",
            UserWarning,
            stacklevel=3,
        )
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _reduce(per_element: np.ndarray, reduction: str, dtype: np.dtype[Any]) -> np.ndarray:
    if reduction == "mean":
        return np.asarray(per_element.mean(), dtype=dtype)
    if reduction == "sum":
        return np.asarray(per_element.sum(), dtype=dtype)
    return per_element.astype(dtype, copy=False)


# --------------------------------------------------------------------------- regression
class _PairwiseBackward(Node):
    """Losses of ``input - target``: one gradient, negated for the target."""

    __slots__ = ("_scale", "_sx", "_sy", "diff")

    _scale: float
    _sx: tuple[int, ...]
    _sy: tuple[int, ...]
    diff: np.ndarray

    def _grad(self, g: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ex, ey = self._next
        grad = self._grad(g)
        return (
            sum_to(grad, self._sx) if ex is not None else None,
            sum_to(-grad, self._sy) if ey is not None else None,
        )

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        ex, ey = self._next
        grad = self._graph_grad(only(grads))
        return (
            sum_to_tensor(grad, self._sx) if ex is not None else None,
            sum_to_tensor(-grad, self._sy) if ey is not None else None,
        )

    def _graph_grad(self, g: Tensor) -> Tensor:
        return super().backward_graph([g])[0]  # type: ignore[return-value]


class MseLossBackward0(_PairwiseBackward):
    """``2 * (x - y) / N`` times the upstream gradient (``/ N`` only for mean)."""

    __slots__ = ()

    def _grad(self, g: np.ndarray) -> np.ndarray:
        return self.diff * (g * self._scale)

    def _graph_grad(self, g: Tensor) -> Tensor:
        x, y = saved_tensor(self, 0), saved_tensor(self, 1)
        return (x - y) * (g * self._scale)


class L1LossBackward0(_PairwiseBackward):
    """``sign(x - y) / N`` times the upstream gradient (``/ N`` only for mean)."""

    __slots__ = ()

    def _grad(self, g: np.ndarray) -> np.ndarray:
        return sgn(self.diff) * (g * self._scale)

    def _graph_grad(self, g: Tensor) -> Tensor:
        return sign_of(saved_tensor(self, 0) - saved_tensor(self, 1)) * (g * self._scale)


def _difference(input: Tensor, target: Tensor) -> np.ndarray:
    x, y = input._data, target._data
    if x.shape != y.shape:
        warnings.warn(
            f"Using a target size ({_torch_size(y.shape)}) that is different to the input size "
            f"({_torch_size(x.shape)}). This will likely lead to incorrect results due to "
            "broadcasting. Please ensure they have the same size.",
            UserWarning,
            stacklevel=3,
        )
    try:
        diff = x - y
    except ValueError:  # numpy's broadcasting error; torch's is a RuntimeError
        raise broadcast_error(x, y) from None
    if diff.dtype != x.dtype and x.dtype.kind == "f":
        diff = diff.astype(x.dtype)
    return diff


def _torch_size(shape: tuple[int, ...]) -> str:
    return f"hookgrad.Size({list(shape)})"


def _pairwise(
    input: Tensor, target: Tensor, diff: np.ndarray, out: np.ndarray, node: _PairwiseBackward
) -> Tensor:
    node.diff = diff
    node._sx, node._sy = input._data.shape, target._data.shape
    node._save(input, target)
    return record(out, node)


def mse_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """Mean (or summed, or elementwise) squared error."""
    if _autocast.lower is not None:  # torch's CPU autocast: in float32
        input, target = to_float32(input, target)
    mode = reduction_mode(size_average, reduce, reduction)
    diff = _difference(input, target)
    dtype = diff.dtype
    if mode == "none":
        out = diff * diff
    else:
        flat = diff.reshape(-1)
        total = np.dot(flat, flat)
        out = np.asarray(total / flat.size if mode == "mean" else total, dtype=dtype)
    if not needs_grad(input, target):
        return wrap(out)
    node = MseLossBackward0((edge(input), edge(target)))
    node._scale = 2.0 / diff.size if mode == "mean" else 2.0
    return _pairwise(input, target, diff, out, node)


def l1_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """Mean (or summed, or elementwise) absolute error."""
    if _autocast.lower is not None:  # torch's CPU autocast: in float32
        input, target = to_float32(input, target)
    mode = reduction_mode(size_average, reduce, reduction)
    diff = _difference(input, target)
    out = _reduce(np.abs(diff), mode, diff.dtype)
    if not needs_grad(input, target):
        return wrap(out)
    node = L1LossBackward0((edge(input), edge(target)))
    node._scale = 1.0 / diff.size if mode == "mean" else 1.0
    return _pairwise(input, target, diff, out, node)


class SmoothL1LossBackward0(_PairwiseBackward):
    """``(x - y) / beta`` inside the quadratic zone, ``sign(x - y)`` outside."""

    __slots__ = ("_beta",)

    _beta: float

    def _grad(self, g: np.ndarray) -> np.ndarray:
        d, beta = self.diff, self._beta
        inner = np.where(np.abs(d) < beta, d / d.dtype.type(beta), np.sign(d))
        return inner * (g * self._scale)


def smooth_l1_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Tensor:
    """Huber-like loss: quadratic for ``|x - y| < beta``, linear beyond; ``beta=0`` is L1."""
    if _autocast.lower is not None:  # torch's CPU autocast: in float32
        input, target = to_float32(input, target)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    if beta == 0:
        return l1_loss(input, target, size_average, reduce, reduction)
    mode = reduction_mode(size_average, reduce, reduction)
    diff = _difference(input, target)
    a = np.abs(diff)
    per = np.where(a < beta, 0.5 * diff * diff / diff.dtype.type(beta), a - 0.5 * beta)
    out = _reduce(per, mode, diff.dtype)
    if not needs_grad(input, target):
        return wrap(out)
    node = SmoothL1LossBackward0((edge(input), edge(target)))
    node._beta = beta
    node._scale = 1.0 / diff.size if mode == "mean" else 1.0
    return _pairwise(input, target, diff, out, node)


# --------------------------------------------------------------------------- classification
def _class_last(x: np.ndarray) -> np.ndarray:
    """``(C,)`` -> ``(1, C)``; ``(N, C)`` as is; ``(N, C, d1, ...)`` -> ``(N * d1 * ..., C)``."""
    if x.ndim == 1:
        return x[None, :]
    if x.ndim == 2:
        return x
    return np.moveaxis(x, 1, -1).reshape(-1, x.shape[1])


def _class_back(rows: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Undo :func:`_class_last`."""
    if len(shape) <= 2:
        return rows.reshape(shape)
    return np.moveaxis(rows.reshape(shape[0], *shape[2:], shape[1]), -1, 1)


def _row_coefficients(
    g: np.ndarray, reduction: str, denominator: Any, rows: int, valid: np.ndarray | None = None
) -> np.ndarray:
    """The upstream gradient as one factor per row.

    A mean over no weight at all (every target ignored) is nan, but its ignored rows still
    get an exact zero gradient, as in torch: their factor is 0 rather than ``g / 0``.
    """
    if reduction == "none":
        return g.reshape(rows)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = g / denominator if reduction == "mean" else g
    coef = np.broadcast_to(scale, (rows,))
    if valid is not None and reduction == "mean" and denominator == 0:
        coef = np.where(valid, coef, 0).astype(coef.dtype, copy=False)
    return coef


def _row_coefficients_graph(
    g: Tensor, reduction: str, denominator: Any, rows: int, valid: np.ndarray
) -> Tensor:
    """:func:`_row_coefficients` for a recorded gradient."""
    if reduction == "none":
        return g.reshape(rows)
    coef = (g / float(denominator) if reduction == "mean" else g).expand(rows)
    if reduction == "mean" and denominator == 0:
        coef = where(wrap(valid), coef, 0)
    return coef


def _rows_of(x: Tensor) -> Tensor:
    """:func:`_class_last` for a Tensor on the graph."""
    ndim = x._data.ndim
    if ndim == 1:
        return x.reshape(1, -1)
    if ndim == 2:
        return x
    return x.permute(0, *range(2, ndim), 1).reshape(-1, x._data.shape[1])


def _rows_back(rows: Tensor, shape: tuple[int, ...]) -> Tensor:
    """:func:`_class_back` for a Tensor on the graph."""
    if len(shape) <= 2:
        return rows.reshape(shape)
    ndim = len(shape)
    moved = rows.reshape(shape[0], *shape[2:], shape[1])
    return moved.permute(0, ndim - 1, *range(1, ndim - 1))


class _ClassTargets:
    """Class-index targets checked against the input, with ignore_index and class weights."""

    __slots__ = ("index", "per_row_weight", "valid")

    def __init__(
        self,
        x_shape: tuple[int, ...],
        target: np.ndarray,
        weight: np.ndarray | None,
        ignore_index: int,
        dtype: np.dtype[Any],
    ) -> None:
        _check_target_shape(x_shape, target.shape)
        classes = x_shape[0] if len(x_shape) == 1 else x_shape[1]
        t = target.reshape(-1)
        valid = t != ignore_index
        bad = t[valid & ((t < 0) | (t >= classes))]
        if bad.size:
            raise IndexError(f"Target {bad[0]} is out of bounds.")
        self.valid = valid
        self.index = np.where(valid, t, 0)
        w = valid.astype(dtype)
        self.per_row_weight = w if weight is None else w * weight[self.index]


def _check_target_shape(x_shape: tuple[int, ...], t_shape: tuple[int, ...]) -> None:
    expected = () if len(x_shape) == 1 else (x_shape[0], *x_shape[2:])
    if t_shape == expected:
        return
    if len(x_shape) >= 2 and len(t_shape) >= 1 and t_shape[0] != x_shape[0]:
        raise ValueError(
            f"Expected input batch_size ({x_shape[0]}) to match target batch_size ({t_shape[0]})."
        )
    raise RuntimeError(f"Expected target size {list(expected)}, got {list(t_shape)}")


def _class_weight(weight: Tensor | None, classes: int) -> np.ndarray | None:
    if weight is None:
        return None
    w = weight._data
    if w.shape != (classes,):
        raise RuntimeError(
            f"weight tensor should be defined either for all {classes} classes or no classes "
            f"but got weight tensor of shape: {list(w.shape)}"
        )
    return w


def _check_index_dtype(target: np.ndarray) -> None:
    if target.dtype.kind not in "iu":
        raise RuntimeError(
            f"expected scalar type Long but found {target.dtype}: class-index targets must be "
            "integers"
        )


class NllLossBackward0(Node):
    """``-w[t_i]`` at each row's target class, times the row's upstream factor."""

    __slots__ = ("_classes", "_denominator", "_reduction", "_shape", "targets")

    _classes: int
    _denominator: Any
    _reduction: str
    _shape: tuple[int, ...]
    targets: _ClassTargets

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        t = self.targets
        rows = t.index.size
        coef = _row_coefficients(g, self._reduction, self._denominator, rows, t.valid)
        grad = np.zeros((rows, self._classes), dtype=g.dtype)
        grad[np.arange(rows), t.index] = -t.per_row_weight * coef
        return (_class_back(grad, self._shape),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        t = self.targets
        rows = t.index.size
        coef = _row_coefficients_graph(
            only(grads), self._reduction, self._denominator, rows, t.valid
        )
        picked = np.zeros((rows, self._classes), dtype=t.per_row_weight.dtype)
        picked[np.arange(rows), t.index] = -t.per_row_weight
        return (_rows_back(wrap(picked) * coef.unsqueeze(1), self._shape),)


def _reduce_rows(
    loss_rows: np.ndarray, reduction: str, denominator: Any, t_shape: tuple[int, ...], dtype: Any
) -> np.ndarray:
    if reduction == "none":
        return loss_rows.reshape(t_shape).astype(dtype, copy=False)
    total = loss_rows.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        value = total / denominator if reduction == "mean" else total
    return np.asarray(value, dtype=dtype)


def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of class indices given log-probabilities ``input``."""
    if _autocast.lower is not None:  # torch's CPU autocast: in float32
        input, target, weight = to_float32(input, target, weight)
    mode = reduction_mode(size_average, reduce, reduction)
    x = input._data
    _check_index_dtype(target._data)
    classes = x.shape[0] if x.ndim == 1 else x.shape[1]
    w = _class_weight(weight, classes)
    targets = _ClassTargets(x.shape, target._data, w, ignore_index, x.dtype)
    x2 = _class_last(x)
    loss_rows = -targets.per_row_weight * x2[np.arange(x2.shape[0]), targets.index]
    denominator = targets.per_row_weight.sum()
    out = _reduce_rows(loss_rows, mode, denominator, target._data.shape, x.dtype)
    if not needs_grad(input):
        return wrap(out)
    node = NllLossBackward0((edge(input),))
    node.targets, node._shape, node._classes = targets, x.shape, classes
    node._reduction, node._denominator = mode, denominator
    node._save(input)
    return record(out, node)


def _log_softmax_rows(x2: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Shifted logits ``z``, ``exp(z)``, its row sums and their log (``logp = z - lse``)."""
    z = x2 - x2.max(axis=1, keepdims=True)
    e = np.exp(z)
    sums = e.sum(axis=1)
    return z, e, sums, np.log(sums)


class CrossEntropyLossBackward0(Node):
    """Class indices: ``softmax(x) * sum(q) - q`` per row, ``q`` the weighted smoothed target.

    One node for torch's ``log_softmax`` + ``nll_loss`` (+ label smoothing) chain.
    """

    __slots__ = (
        "_classes",
        "_denominator",
        "_reduction",
        "_shape",
        "_smoothing",
        "exp",
        "sums",
        "targets",
        "weight",
    )

    _classes: int
    _denominator: Any
    _reduction: str
    _shape: tuple[int, ...]
    _smoothing: float
    exp: np.ndarray
    sums: np.ndarray
    targets: _ClassTargets
    weight: np.ndarray | None

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        t, w, eps, classes = self.targets, self.weight, self._smoothing, self._classes
        rows = t.index.size
        coef = _row_coefficients(g, self._reduction, self._denominator, rows, t.valid)
        hard = (1 - eps) * t.per_row_weight
        total = hard
        if eps:
            weight_sum = classes if w is None else w.sum()
            total = hard + (eps / classes) * weight_sum * t.valid
        grad = self.exp * ((total * coef) / self.sums)[:, None]
        grad[np.arange(rows), t.index] -= hard * coef
        if eps:
            smooth = ((eps / classes) * coef * t.valid)[:, None]
            grad -= smooth if w is None else smooth * w
        return (_class_back(grad.astype(g.dtype, copy=False), self._shape),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        t, w, eps, classes = self.targets, self.weight, self._smoothing, self._classes
        rows = t.index.size
        g = only(grads)
        coef = _row_coefficients_graph(g, self._reduction, self._denominator, rows, t.valid)
        hard = (1 - eps) * t.per_row_weight
        target = np.zeros((rows, classes), dtype=self.exp.dtype)
        target[np.arange(rows), t.index] = hard
        total = hard
        if eps:
            total = hard + (eps / classes) * (classes if w is None else w.sum()) * t.valid
            smooth = ((eps / classes) * t.valid)[:, None]
            target += smooth if w is None else smooth * w
        p = _rows_of(saved_tensor(self, 0)).softmax(1)
        scaled = p * wrap(total.astype(target.dtype)[:, None]) - wrap(target)
        return (_rows_back(scaled * coef.unsqueeze(1), self._shape),)


class CrossEntropyLossBackward1(Node):
    """Probability targets: ``softmax(x) * sum(q) - q`` per row; the target gets ``-q' logp``."""

    __slots__ = ("_denominator", "_reduction", "_shape", "_t_shape", "logp", "q", "target_scale")

    _denominator: Any
    _reduction: str
    _shape: tuple[int, ...]
    _t_shape: tuple[int, ...]
    logp: np.ndarray
    q: np.ndarray
    target_scale: Any

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ex, et = self._next
        logp, q = self.logp, self.q
        coef = _row_coefficients(g, self._reduction, self._denominator, logp.shape[0])[:, None]
        gx = gt = None
        if ex is not None:
            grad = np.exp(logp) * q.sum(axis=1, keepdims=True) - q
            gx = _class_back((grad * coef).astype(g.dtype, copy=False), self._shape)
        if et is not None:
            grad = -logp * self.target_scale * coef
            gt = _class_back(grad.astype(g.dtype, copy=False), self._t_shape)
        return (gx, gt)


def _cross_entropy_indices(
    input: Tensor, target: Tensor, w: np.ndarray | None, ignore_index: int, mode: str, eps: float
) -> Tensor:
    x = input._data
    _check_index_dtype(target._data)
    classes = x.shape[0] if x.ndim == 1 else x.shape[1]
    targets = _ClassTargets(x.shape, target._data, w, ignore_index, x.dtype)
    z, e, sums, lse = _log_softmax_rows(_class_last(x))
    picked = z[np.arange(z.shape[0]), targets.index] - lse
    loss_rows = -(1 - eps) * targets.per_row_weight * picked
    if eps:
        weighted = z.sum(axis=1) - classes * lse if w is None else z @ w - lse * w.sum()
        loss_rows = loss_rows - (eps / classes) * weighted * targets.valid
    denominator = targets.per_row_weight.sum()
    out = _reduce_rows(loss_rows, mode, denominator, target._data.shape, x.dtype)
    if not needs_grad(input):
        return wrap(out)
    node = CrossEntropyLossBackward0((edge(input),))
    node.exp, node.sums, node.targets, node.weight = e, sums, targets, w
    node._classes, node._shape, node._smoothing = classes, x.shape, eps
    node._reduction, node._denominator = mode, denominator
    node._save(input)
    return record(out, node)


def _cross_entropy_probs(
    input: Tensor, target: Tensor, w: np.ndarray | None, mode: str, eps: float
) -> Tensor:
    x, t = input._data, target._data
    classes = x.shape[0] if x.ndim == 1 else x.shape[1]
    z, _, _, lse = _log_softmax_rows(_class_last(x))
    logp = z - lse[:, None]
    scale: Any = (1 - eps) if w is None else (1 - eps) * w
    q = _class_last(t) * scale + (0 if not eps else (eps / classes) * (1 if w is None else w))
    loss_rows = -(q * logp).sum(axis=1)
    rows = loss_rows.shape[0]
    t_shape = () if x.ndim == 1 else (x.shape[0], *x.shape[2:])
    out = _reduce_rows(loss_rows, mode, rows, t_shape, x.dtype)
    if not needs_grad(input, target):
        return wrap(out)
    node = CrossEntropyLossBackward1((edge(input), edge(target)))
    node.logp, node.q, node.target_scale = logp, q, scale
    node._shape, node._t_shape = x.shape, t.shape
    node._reduction, node._denominator = mode, rows
    node._save(input, target)
    return record(out, node)


def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross entropy of logits ``input`` against class indices or class probabilities."""
    if _autocast.lower is not None:  # torch's CPU autocast: in float32
        input, target, weight = to_float32(input, target, weight)
    mode = reduction_mode(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    x, t = input._data, target._data
    classes = x.shape[0] if x.ndim == 1 else x.shape[1]
    w = _class_weight(weight, classes)
    if t.dtype.kind == "f":
        if t.shape != x.shape:
            raise RuntimeError(
                f"Expected target size {list(x.shape)} for probability targets, got {list(t.shape)}"
            )
        return _cross_entropy_probs(input, target, w, mode, label_smoothing)
    return _cross_entropy_indices(input, target, w, ignore_index, mode, label_smoothing)


# --------------------------------------------------------------------------- binary
def _softplus_neg(x: np.ndarray) -> np.ndarray:
    """``log(1 + exp(-x))`` without overflow."""
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(-x, 0)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


class BinaryCrossEntropyWithLogitsBackward0(Node):
    """``w * (lw * sigmoid(x) - pw * y)`` for the input, ``w * (-x + (pw-1) softplus(-x))``
    for the target, where ``lw = 1 + (pw - 1) * y`` (``pw = 1`` without pos_weight)."""

    __slots__ = ("_scale", "_sx", "_sy", "pos_weight", "weight", "x", "y")

    _scale: float
    _sx: tuple[int, ...]
    _sy: tuple[int, ...]
    pos_weight: np.ndarray | None
    weight: np.ndarray | None
    x: np.ndarray
    y: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ex, ey = self._next
        x, y, w, pw = self.x, self.y, self.weight, self.pos_weight
        coef = g * self._scale if w is None else (g * self._scale) * w
        gx = gy = None
        if ex is not None:
            sig = _sigmoid(x)
            d = sig - y if pw is None else (1 + (pw - 1) * y) * sig - pw * y
            gx = sum_to((d * coef).astype(x.dtype, copy=False), self._sx)
        if ey is not None:
            d = -x if pw is None else (pw - 1) * _softplus_neg(x) - x
            gy = sum_to((d * coef).astype(y.dtype, copy=False), self._sy)
        return (gx, gy)


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    """Sigmoid + binary cross entropy in one numerically stable step."""
    if _autocast.lower is not None:  # torch's CPU autocast: in float32
        input, target, weight, pos_weight = to_float32(input, target, weight, pos_weight)
    mode = reduction_mode(size_average, reduce, reduction)
    x, y = input._data, target._data
    if x.shape != y.shape:
        raise ValueError(
            f"Target size ({_torch_size(y.shape)}) must be the same as input size "
            f"({_torch_size(x.shape)})"
        )
    w = None if weight is None else weight._data
    pw = None if pos_weight is None else pos_weight._data
    softplus = _softplus_neg(x)
    log_weight = softplus if pw is None else (1 + (pw - 1) * y) * softplus
    loss = (1 - y) * x + log_weight
    if w is not None:
        loss = loss * w
    out = _reduce(loss, mode, x.dtype)
    if not needs_grad(input, target):
        return wrap(out)
    node = BinaryCrossEntropyWithLogitsBackward0((edge(input), edge(target)))
    node.x, node.y, node.weight, node.pos_weight = x, y, w, pw
    node._sx, node._sy = x.shape, y.shape
    node._scale = 1.0 / loss.size if mode == "mean" else 1.0
    node._save(input, target)
    return record(out, node)


class BinaryCrossEntropyBackward0(Node):
    """``w * (x - y) / max(x * (1 - x), 1e-12)`` for the input (torch's clamp of the
    denominator), and ``w * (log(1 - x) - log(x))``, unclamped, for a target that requires
    grad."""

    __slots__ = ("_scale", "weight", "x", "y")

    _scale: float
    weight: np.ndarray | None
    x: np.ndarray
    y: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ex, ey = self._next
        x, y, w = self.x, self.y, self.weight
        coef = g * self._scale if w is None else (g * self._scale) * w
        gx = gy = None
        if ex is not None:
            denom = np.maximum((1 - x) * x, x.dtype.type(1e-12))
            gx = ((x - y) / denom * coef).astype(x.dtype, copy=False)
        if ey is not None:
            with np.errstate(divide="ignore", invalid="ignore"):  # unclamped, as torch's
                d = np.log1p(-x) - np.log(x)
            gy = (d * coef).astype(y.dtype, copy=False)
        return (gx, gy)


def binary_cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """Binary cross entropy of probabilities; each log is clamped at -100, as torch's."""
    if _autocast.lower is not None:  # torch's CPU autocast: in float32
        input, target, weight = to_float32(input, target, weight)
    mode = reduction_mode(size_average, reduce, reduction)
    x, y = input._data, target._data
    if x.shape != y.shape:
        raise ValueError(
            f"Using a target size ({_torch_size(y.shape)}) that is different to the input "
            f"size ({_torch_size(x.shape)}) is deprecated. Please ensure they have the same size."
        )
    if ((x < 0) | (x > 1)).any():
        raise RuntimeError("all elements of input should be between 0 and 1")
    w = None if weight is None else np.broadcast_to(weight._data, x.shape)
    with np.errstate(divide="ignore"):
        log_x = np.maximum(np.log(x), -100)
        log_1mx = np.maximum(np.log1p(-x), -100)
    loss = -(y * log_x + (1 - y) * log_1mx)
    if w is not None:
        loss = loss * w
    out = _reduce(loss, mode, x.dtype)
    if not needs_grad(input, target):
        return wrap(out)
    node = BinaryCrossEntropyBackward0((edge(input), edge(target)))
    node.x, node.y, node.weight = x, y, w
    node._scale = 1.0 / loss.size if mode == "mean" else 1.0
    node._save(input, target)
    return record(out, node)
