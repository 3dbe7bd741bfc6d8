"""Tensor summaries of torch tensors: the torch engine's batched kernel equals numpy's stats."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import hookgrad
from hookgrad.engines import engine_named
from hookgrad.hookspecs import OptimizerStepPreEvent, tensor_stats
from hookgrad.hookspecs._stats import array_stats, to_json

torch = pytest.importorskip("torch")

FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.sampled_from([0.0, -0.0, 1e30, -1e30, 1e-30]),
)


def assert_same(mine: dict[str, Any], reference: dict[str, Any]) -> None:
    """Equal keys; counts, shape and dtype exactly; numbers to float32 tolerance. The mean and
    std of entries that cancel (1e30, -1e30, 1) depend on the order of additions, so their
    tolerance is relative to the largest entry."""
    assert mine.keys() == reference.keys()
    largest = max(abs(reference["min"] or 0.0), abs(reference["max"] or 0.0))
    for key, expected in reference.items():
        got = mine[key]
        if isinstance(expected, float):
            spread = 4e-7 * largest * math.prod(reference["shape"]) if key in ("mean", "std") else 0
            assert got == pytest.approx(expected, rel=2e-6, abs=max(spread, 1e-30)), key
        else:
            assert got == expected, key


@settings(max_examples=60, deadline=None)
@given(arrays(np.float32, st.integers(0, 40), elements=FLOATS))
def test_float32_summaries_equal_numpys(values: np.ndarray) -> None:
    """Any float32 vector (NaN, inf, zeros, huge, empty): the same summary as array_stats."""
    (summary,) = engine_named("torch").summaries([torch.from_numpy(values.copy())])
    assert_same(summary, array_stats(values))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("values", "dtype"),
    [
        ([[1.0, 2.0], [3.0, -4.0]], "float64"),
        ([0.5, -0.25, 0.0], "float16"),
        ([1, -3, 0, 7], "int64"),
        ([True, False, True], "bool"),
        ([], "float32"),
        ([math.nan, math.nan], "float32"),
    ],
)
def test_other_dtypes_and_shapes(values: list[Any], dtype: str) -> None:
    """2-D, float64/16, integers, bools, empty and all-NaN tensors match numpy's stats."""
    array = np.array(values, dtype=dtype)
    (summary,) = engine_named("torch").summaries([torch.from_numpy(array)])
    assert_same(summary, array_stats(array))  # type: ignore[arg-type]


def test_tensor_stats_and_event_summaries_take_torch_tensors() -> None:
    """tensor_stats, to_json (hook arguments) and an optimizer event's summary of torch tensors."""
    weight = torch.nn.Parameter(torch.tensor([[1.0, -2.0], [0.0, 4.0]]))
    weight.grad = torch.tensor([[0.5, math.inf], [0.0, -1.0]])
    bias = torch.nn.Parameter(torch.tensor([3.0, 0.0]))
    expected = array_stats(weight.detach().numpy())
    assert_same(tensor_stats(weight), expected)  # type: ignore[arg-type]
    assert_same(to_json((weight, 2))[0], expected)
    event = OptimizerStepPreEvent.trusted(
        {
            "step": 0,
            "phase": "optimizer_step_pre",
            "optimizer_type": "SGD",
            "parameters": (("fc.weight", weight), ("fc.bias", bias)),
        }
    )
    parameters = event.summary()["parameters"]
    assert_same(parameters["fc.weight"]["grad"], array_stats(weight.grad.numpy()))
    assert parameters["fc.weight"]["grad"]["inf"] == 1
    assert_same(parameters["fc.bias"]["param"], array_stats(bias.detach().numpy()))
    assert parameters["fc.bias"]["grad"] is None


def test_tensor_stats_of_something_else_is_a_type_error() -> None:
    """Not a tensor of any engine: TypeError naming the type."""
    with pytest.raises(TypeError, match="tensor_stats\\(\\) takes a tensor, got list"):
        tensor_stats([1.0])  # type: ignore[arg-type]
    assert tensor_stats(hookgrad.ones(2))["norm"] == pytest.approx(math.sqrt(2))


def test_payloads_validate_torch_tensors_and_keep_them() -> None:
    """Validated events take torch tensors where they take hookgrad's, hand the same objects
    to plugins, and summarise them; anything else is still refused naming the field."""
    from pydantic import ValidationError

    from hookgrad.hookspecs import BackwardBeginEvent, FullBackwardEvent

    loss, seed = torch.tensor(2.0, requires_grad=True), torch.tensor(3.0)
    begin = BackwardBeginEvent(step=1, phase="backward_begin", loss=loss, gradient=seed)
    assert begin.loss is loss and begin.gradient is seed
    grad = torch.tensor([[1.0, -1.0]])
    full = FullBackwardEvent(
        module_name="fc",
        module_type="Linear",
        call_index=0,
        step=1,
        phase="backward",
        grad_input=(None,),
        grad_output=(grad,),
    )
    assert full.grad_output[0] is grad
    assert_same(full.summary()["grad_output"][0], array_stats(grad.numpy()))
    with pytest.raises(ValidationError, match="loss\n  Input should be an instance of Tensor"):
        BackwardBeginEvent(step=1, phase="backward_begin", loss=[2.0])
