"""What docs/taps.md promises beyond the basics: call indices, copies, engine differences."""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import hookgrad

from .conftest import X, mlp, twice


def test_call_indices_restart_at_each_call_of_the_model(lib: ModuleType) -> None:
    """call_index counts a module's calls since the model's call began; a direct call after
    it counts on."""
    model = twice(lib)
    x = lib.tensor(X)
    with hookgrad.tap(model, "lin", kinds=("forward",)) as tap:
        model(x)
        model(x)
        model.lin(x)
    assert [r.call_index for r in tap.records] == [0, 1, 0, 1, 2]
    assert tap.modules == ["lin"]


def test_captured_tensors_are_copies_made_at_the_event(lib: ModuleType) -> None:
    """capture=True keeps the values of the moment; a record's own tensors are the live ones."""
    model = mlp(lib)
    x = lib.tensor(X)
    with hookgrad.tap(model, "0", kinds=("forward",), capture=True) as tap:
        model(x)
    x.mul_(2)
    ((args,),) = tap.tensors("0", "args")
    np.testing.assert_array_equal(args, X)
    np.testing.assert_array_equal(tap.records[0].args[0].detach().numpy(), X * 2)


def test_a_wrapper_stands_for_the_model_it_wraps() -> None:
    """torch: tapping DataParallel(model) names the modules as tapping the model does."""
    torch = pytest.importorskip("torch")
    model = mlp(torch)
    wrapped = torch.nn.DataParallel(model)  # no GPU: calls the model directly
    with hookgrad.tap(wrapped, "*", kinds=("forward",)) as tap:
        wrapped(torch.tensor(X))
    assert tap.modules == ["", "0", "1", "2"]
    assert [r.module_name for r in tap.records] == ["0", "1", "2", ""]


def _in_place_model(lib: ModuleType) -> Any:
    class AddsInPlace(lib.nn.Module):  # type: ignore[name-defined,misc]
        def __init__(self) -> None:
            super().__init__()
            self.lin = lib.nn.Linear(3, 2)

        def forward(self, x: Any) -> Any:
            out = self.lin(x)
            out += 1  # in place on the Linear's output
            return out

    lib.manual_seed(0)
    return AddsInPlace()


def test_hookgrad_in_place_on_a_backward_tapped_output_raises_as_a_module_hook_does() -> None:
    """hookgrad's engine: backward kinds on a module whose output is changed in place raise
    torch's error (SEMANTICS B-15); forward kinds alone do not."""
    model = _in_place_model(hookgrad)
    x = hookgrad.tensor(X)
    with hookgrad.tap(model, "lin", kinds=("forward",)) as tap:
        model(x).sum().backward()
    assert len(tap.records) == 1
    with (
        hookgrad.tap(model, "lin", kinds=("backward",)),
        pytest.raises(RuntimeError, match="is a view and is being modified inplace"),
    ):
        model(x)


def test_torch_in_place_on_a_backward_tapped_output_works() -> None:
    """torch: the same model, tapped for backward, trains; grad_output is torch's."""
    torch = pytest.importorskip("torch")
    model = _in_place_model(torch)
    with hookgrad.tap(model, "lin", kinds=("backward",), capture=True) as tap:
        (model(torch.tensor(X)).sum() * 2).backward()
    ((grad,),) = tap.tensors("lin", "grad_output")
    np.testing.assert_array_equal(grad, np.full((5, 2), 2, np.float32))


def test_hookgrad_warns_for_a_tapped_module_whose_inputs_need_no_gradient(lib: ModuleType) -> None:
    """A backward tap on the first layer fed data: torch's B-9 UserWarning on hookgrad's
    engine, as a module hook of your own gets; none on torch models."""
    model = mlp(lib)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with hookgrad.tap(model, "0", kinds=("backward",)) as tap:
            model(lib.tensor(X)).sum().backward()
    messages = [str(w.message) for w in caught if w.category is UserWarning]
    expected = 1 if lib is hookgrad else 0
    assert sum("Full backward hook is firing" in m for m in messages) == expected
    assert tap.records[0].grad_input == (None,)


def test_tensors_reads_each_field_from_the_kind_that_carries_it() -> None:
    """args/kwargs from forward records, else forward_pre; grad_output from backward, else
    backward_pre; a field no recorded kind carries is a ValueError naming both."""
    model = mlp(hookgrad)
    x = hookgrad.tensor(X)
    kinds = ("forward_pre", "backward_pre")
    with hookgrad.tap(model, "0", kinds=kinds, capture=True) as pre:
        model[0](input=x).sum().backward()
    ((), kwargs) = (pre.tensors("0", "args")[0], pre.tensors("0", "kwargs")[0])
    np.testing.assert_array_equal(kwargs["input"], X)
    ((grad,),) = pre.tensors("0", "grad_output")
    np.testing.assert_array_equal(grad, np.ones((5, 4), np.float32))
    with pytest.raises(ValueError, match="'output' comes with forward records; this tap records"):
        pre.tensors("0", "output")
    with hookgrad.tap(model, "0", kinds=("forward", *kinds), capture=True) as both:
        model(x * 3)
    assert len(both.tensors("0", "args")) == 1
    np.testing.assert_array_equal(both.tensors("0", "args")[0][0], X * 3)


def test_taps_nest_each_with_its_own_records_and_steps(lib: ModuleType) -> None:
    """A tap opened inside another on the same model: each records its own steps, the inner
    one's values equal the outer one's for the same call."""
    model = mlp(lib)
    x = lib.tensor(X)
    with hookgrad.tap(model, "*", capture=True) as outer:
        model(x).sum().backward()
        with hookgrad.tap(model, "2", kinds=("backward",), capture=True) as inner:
            model(x).sum().backward()
        model(x).sum().backward()
    assert [(r.step, r.phase, r.module_name) for r in inner.records] == [(0, "backward", "2")]
    assert sorted({r.step for r in outer.records}) == [0, 1, 2]
    np.testing.assert_array_equal(
        inner.tensors("2", "grad_output")[0][0], outer.tensors("2", "grad_output")[1][0]
    )
