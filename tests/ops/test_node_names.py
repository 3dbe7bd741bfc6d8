"""grad_fn node names: users and hook authors see them, so they are torch's.

Each row runs on hookgrad and, when installed, on torch 2.13 with the same literal expectation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

NAMES: list[tuple[str, Callable[[Any, Any, Any], Any]]] = [
    ("MulBackward0", lambda L, x, y: x * y),
    ("MulBackward0", lambda L, x, y: x * 2),
    ("MulBackward0", lambda L, x, y: 2 * x),
    ("MulBackward0", lambda L, x, y: 2 / x),
    ("AddBackward0", lambda L, x, y: x + y),
    ("AddBackward0", lambda L, x, y: x + 2),
    ("AddBackward0", lambda L, x, y: L.add(x, y, alpha=2)),
    ("SubBackward0", lambda L, x, y: x - y),
    ("SubBackward0", lambda L, x, y: x - 2),
    ("RsubBackward1", lambda L, x, y: 2 - x),
    ("DivBackward0", lambda L, x, y: x.div(y)),
    ("DivBackward0", lambda L, x, y: x / 2),
    ("PowBackward0", lambda L, x, y: x.pow(2)),
    ("PowBackward1", lambda L, x, y: x**y),
    ("PowBackward2", lambda L, x, y: 2**x),
    ("NegBackward0", lambda L, x, y: x.neg()),
    ("SumBackward0", lambda L, x, y: x.sum()),
    ("SumBackward1", lambda L, x, y: x.sum(0)),
    ("SumBackward1", lambda L, x, y: x.sum((0, 1))),
    ("MeanBackward0", lambda L, x, y: x.mean()),
    ("MeanBackward1", lambda L, x, y: x.mean(1)),
    ("VarBackward0", lambda L, x, y: x.var()),
    ("StdBackward0", lambda L, x, y: x.std(0)),
    ("ExpBackward0", lambda L, x, y: x.exp()),
    ("LogBackward0", lambda L, x, y: x.log()),
    ("SqrtBackward0", lambda L, x, y: x.sqrt()),
    ("AbsBackward0", lambda L, x, y: x.abs()),
    ("SinBackward0", lambda L, x, y: x.sin()),
    ("CosBackward0", lambda L, x, y: x.cos()),
    ("TanhBackward0", lambda L, x, y: x.tanh()),
    ("SigmoidBackward0", lambda L, x, y: x.sigmoid()),
    ("ReluBackward0", lambda L, x, y: x.relu()),
    ("ClampBackward1", lambda L, x, y: x.clamp(0, 1)),
    ("ClampBackward1", lambda L, x, y: x.clamp(min=0)),
    ("ClampBackward0", lambda L, x, y: x.clamp(min=y)),
    ("ClampBackward0", lambda L, x, y: L.clamp(x, y, y + 1)),
    ("WhereBackward0", lambda L, x, y: L.where(x > 2, x, y)),
    ("MaximumBackward0", lambda L, x, y: L.maximum(x, y)),
    ("MinimumBackward0", lambda L, x, y: L.minimum(x, y)),
    ("MmBackward0", lambda L, x, y: x @ y.T),
    ("MvBackward0", lambda L, x, y: x @ y[0]),
    ("DotBackward0", lambda L, x, y: x[0] @ y[0]),
    ("BmmBackward0", lambda L, x, y: x.unsqueeze(0).bmm(y.T.unsqueeze(0))),
    ("TBackward0", lambda L, x, y: x.t()),
    ("PermuteBackward0", lambda L, x, y: x.T),
    ("PermuteBackward0", lambda L, x, y: x.permute(1, 0)),
    ("TransposeBackward0", lambda L, x, y: x.transpose(0, 1)),
    ("TransposeBackward0", lambda L, x, y: x.mT),
    ("ViewBackward0", lambda L, x, y: x.view(6)),
    ("ViewBackward0", lambda L, x, y: x.reshape(3, 2)),
    ("ViewBackward0", lambda L, x, y: x.flatten()),
    ("UnsafeViewBackward0", lambda L, x, y: x.T.reshape(6)),
    ("SelectBackward0", lambda L, x, y: x[0]),
    ("SelectBackward0", lambda L, x, y: x[:, 1]),
    ("SelectBackward0", lambda L, x, y: x[..., 0]),
    ("SliceBackward0", lambda L, x, y: x[1:]),
    ("SliceBackward0", lambda L, x, y: x[0, 1:]),
    ("UnsqueezeBackward0", lambda L, x, y: x[None]),
    ("AliasBackward0", lambda L, x, y: x[...]),
    ("IndexBackward0", lambda L, x, y: x[L.tensor([0, 0])]),
    ("IndexBackward0", lambda L, x, y: x[x > 2]),
    ("UnsqueezeBackward0", lambda L, x, y: x.unsqueeze(0)),
    ("SqueezeBackward0", lambda L, x, y: x.unsqueeze(0).squeeze()),
    ("SqueezeBackward1", lambda L, x, y: x.unsqueeze(0).squeeze(0)),
    ("ExpandBackward0", lambda L, x, y: x[0].expand(2, 3)),
    ("CatBackward0", lambda L, x, y: L.cat([x, y])),
    ("StackBackward0", lambda L, x, y: L.stack([x, y])),
    ("SplitBackward0", lambda L, x, y: x.split(1)[0]),
    ("SplitBackward0", lambda L, x, y: x.chunk(2)[1]),
    ("SplitWithSizesBackward0", lambda L, x, y: x.split([1, 1])[0]),
    ("UnbindBackward0", lambda L, x, y: x.unbind(1)[2]),
    ("MaxBackward1", lambda L, x, y: x.max()),
    ("MinBackward1", lambda L, x, y: x.min()),
    ("MaxBackward0", lambda L, x, y: x.max(0)[0]),
    ("MinBackward0", lambda L, x, y: x.min(1).values),
    ("AmaxBackward0", lambda L, x, y: x.amax(0)),
    ("AminBackward0", lambda L, x, y: x.amin(1)),
    ("LinalgVectorNormBackward0", lambda L, x, y: x.norm()),
    ("LinalgVectorNormBackward0", lambda L, x, y: x.norm(p=1, dim=0)),
    ("ProdBackward0", lambda L, x, y: x.prod()),
    ("ProdBackward1", lambda L, x, y: x.prod(0)),
    ("LogsumexpBackward0", lambda L, x, y: x.logsumexp(1)),
    ("CloneBackward0", lambda L, x, y: x.clone()),
    ("ToCopyBackward0", lambda L, x, y: x.to(L.float64)),
    ("ToCopyBackward0", lambda L, x, y: x.double()),
    ("SoftmaxBackward0", lambda L, x, y: x.softmax(-1)),
    ("LogSoftmaxBackward0", lambda L, x, y: x.log_softmax(-1)),
    ("MaskedFillBackward0", lambda L, x, y: x.masked_fill(x > 2, 0.0)),
    ("GatherBackward0", lambda L, x, y: x.gather(1, L.tensor([[0], [1]]))),
    ("TrilBackward0", lambda L, x, y: x.tril()),
    ("TriuBackward0", lambda L, x, y: L.triu(x, 1)),
    ("FlipBackward0", lambda L, x, y: x.flip(0)),
    ("SliceBackward0", lambda L, x, y: x.narrow(1, 1, 2)),
    ("IndexSelectBackward0", lambda L, x, y: x.index_select(1, L.tensor([0, 0]))),
    ("ViewBackward0", lambda L, x, y: x.repeat_interleave(2, dim=0)),
    ("IndexSelectBackward0", lambda L, x, y: x.repeat_interleave(L.tensor([1, 2]), dim=0)),
    ("CumsumBackward0", lambda L, x, y: x.cumsum(0)),
    ("CumprodBackward0", lambda L, x, y: L.cumprod(x, 1)),
    ("BmmBackward0", lambda L, x, y: L.bmm(x[None], y.T[None])),
    ("BaddbmmBackward0", lambda L, x, y: L.baddbmm(x[None, :, :2], x[None], y.T[None])),
    ("MvBackward0", lambda L, x, y: L.mv(x, y[0])),
    ("LerpBackward0", lambda L, x, y: L.lerp(x, y, 0.3)),
    ("LerpBackward1", lambda L, x, y: x.lerp(y, y)),
    ("AddcmulBackward0", lambda L, x, y: L.addcmul(x, x, y, value=2)),
    ("AddcdivBackward0", lambda L, x, y: x.addcdiv(x, y)),
    ("Log10Backward0", lambda L, x, y: x.log10()),
    ("Log2Backward0", lambda L, x, y: L.log2(x)),
    ("VarMeanBackward0", lambda L, x, y: L.var_mean(x, 1)[0]),
    ("StdMeanBackward0", lambda L, x, y: L.std_mean(x)[1]),
    ("SortBackward0", lambda L, x, y: x.sort(1).values),
    ("TopkBackward0", lambda L, x, y: x.topk(2)[0]),
    ("MedianBackward0", lambda L, x, y: x.median()),
    ("MedianBackward1", lambda L, x, y: x.median(1).values),
    ("ScatterBackward0", lambda L, x, y: x.scatter(1, L.tensor([[0], [2]]), y)),
    ("ScatterBackward1", lambda L, x, y: x.scatter(1, L.tensor([[0], [2]]), 5.0)),
    ("ScatterAddBackward0", lambda L, x, y: L.scatter_add(x, 1, L.tensor([[0], [2]]), y)),
]


@pytest.mark.parametrize(
    ("expected", "program"), NAMES, ids=[f"{i:02d}-{name}" for i, (name, _) in enumerate(NAMES)]
)
def test_grad_fn_name_matches_torch(lib: Any, expected: str, program: Callable[..., Any]) -> None:
    """The op's grad_fn class and name() are torch's node name."""
    x = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    y = lib.tensor([[0.5, 1.5, 2.5], [3.5, 4.5, 5.5]], requires_grad=True)
    fn = program(lib, x, y).grad_fn
    assert type(fn).__name__ == expected
    assert fn.name() == expected


def test_scalar_operand_leaves_a_none_edge(lib: Any) -> None:
    """``x * 2`` and ``x + 2`` keep a (None, 0) edge for the number, as torch's nodes do."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    for out in (x * 2, x + 2, x - 2, x / 2):
        (first, second) = out.grad_fn.next_functions
        assert type(first[0]).__name__ == "AccumulateGrad"
        assert second == (None, 0)


def test_reciprocal_is_recorded_for_number_over_tensor(lib: Any) -> None:
    """``2 / x`` is ``2 * x.reciprocal()``: a MulBackward0 fed by ReciprocalBackward0."""
    x = lib.tensor([1.0, 4.0], requires_grad=True)
    out = 2 / x
    assert out.grad_fn.next_functions[0][0].name() == "ReciprocalBackward0"
    out.sum().backward()
    assert x.grad.tolist() == [-2.0, -0.125]
