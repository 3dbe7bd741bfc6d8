"""hookgrad.tap on its own: what it records, how it samples, and that it leaves no hook behind.

Every test runs on hookgrad's engine and on torch's (the ``lib`` fixture); values are checked
against the module outputs computed directly and against the engine's own module hooks.
"""

from __future__ import annotations

import subprocess
import sys
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import hookgrad
from hookgrad.hookspecs import BackwardPreEvent, ForwardEvent, ForwardPreEvent, FullBackwardEvent

from .conftest import X, hook_state, mlp, twice

ALL_KINDS = ("forward_pre", "forward", "backward_pre", "backward")


def train(model: Any, lib: ModuleType, steps: int, scale: float = 1.0) -> None:
    """``steps`` forward and backward passes of ``scale * model(X).sum()`` (no update)."""
    x = lib.tensor(X)
    for _ in range(steps):
        (model(x).sum() * scale).backward()


def numpy_of(tensor: Any) -> np.ndarray:
    return np.array(tensor.detach().numpy())


# ---------------------------------------------------------------------- what is recorded
def test_records_are_the_plugin_payloads_in_call_order(lib: ModuleType) -> None:
    """Each kind is its hookspec payload, in the order of one module call and its backward."""
    model = mlp(lib)
    with hookgrad.tap(model, "2", kinds=ALL_KINDS) as tap:
        train(model, lib, 1)
    assert [type(r) for r in tap.records] == [
        ForwardPreEvent,
        ForwardEvent,
        BackwardPreEvent,
        FullBackwardEvent,
    ]
    assert [(r.module_name, r.module_type, r.call_index, r.step) for r in tap.records] == [
        ("2", "Linear", 0, 0)
    ] * 4


def test_captured_forward_outputs_equal_the_module_outputs(lib: ModuleType) -> None:
    """tensors(name, "output"): one array per call, equal to the module run directly."""
    model = mlp(lib)
    x = lib.tensor(X)
    with hookgrad.tap(model, ["0", "2"], kinds=("forward",), capture=True) as tap:
        model(x)
        model(x * 2)
    with lib.no_grad():
        hidden = [model[0](x), model[0](x * 2)]
        final = [model[2](model[1](h)) for h in hidden]
    for name, expected in (("0", hidden), ("2", final)):
        got = tap.tensors(name, "output")
        assert len(got) == 2
        for array, tensor in zip(got, expected):
            assert isinstance(array, np.ndarray)
            np.testing.assert_array_equal(array, numpy_of(tensor))
    (args,) = tap.tensors("2", "args")[:1]
    assert isinstance(args, tuple) and len(args) == 1
    np.testing.assert_array_equal(args[0], numpy_of(model[1](hidden[0])))


def test_backward_records_equal_the_engines_own_module_hooks(lib: ModuleType) -> None:
    """grad_output and grad_input of the records are what register_full_backward_hook gets."""
    model = mlp(lib)
    with hookgrad.tap(model, "*", kinds=("backward_pre", "backward"), capture=True) as tap:
        train(model, lib, 1, scale=3.0)
    seen: dict[str, tuple[Any, Any]] = {}
    handles = [
        model[i].register_full_backward_hook(
            lambda module, gi, go, name=str(i): seen.__setitem__(name, (gi, go))
        )
        for i in range(3)
    ]
    train(model, lib, 1, scale=3.0)
    for handle in handles:
        handle.remove()
    for name, (grad_input, grad_output) in seen.items():
        (tapped_out,) = tap.tensors(name, "grad_output")
        (tapped_in,) = tap.tensors(name, "grad_input")
        assert isinstance(tapped_out, tuple) and isinstance(tapped_in, tuple)
        np.testing.assert_array_equal(tapped_out[0], numpy_of(grad_output[0]))
        if grad_input[0] is None:  # the first layer: its input needs no gradient
            assert tapped_in == (None,)
        else:
            np.testing.assert_array_equal(tapped_in[0], numpy_of(grad_input[0]))
    assert float(tap.tensors("2", "grad_output")[0][0].max()) == 3.0


def test_backward_events_carry_the_index_of_the_call_they_differentiate(lib: ModuleType) -> None:
    """A module called twice: each backward record has its own call's index and gradients."""
    model = twice(lib)
    with hookgrad.tap(model, "lin", kinds=("forward", "backward"), capture=True) as tap:
        train(model, lib, 1)
    fired: list[Any] = []
    handle = model.lin.register_full_backward_hook(lambda m, gi, go: fired.append(go[0]))
    train(model, lib, 1)
    handle.remove()
    by_index = {r.call_index: r for r in tap.records if r.phase == "backward"}
    assert sorted(by_index) == [0, 1]
    grads = tap.tensors("lin", "grad_output")
    order = [r.call_index for r in tap.records if r.phase == "backward"]
    assert order == [1, 0]  # backward runs the calls in reverse order (B-11)
    for call_index, grad in zip(order, grads):
        np.testing.assert_array_equal(grad[0], numpy_of(fired[order.index(call_index)]))
    assert not np.array_equal(grads[0][0], grads[1][0])


def test_steps_count_backward_passes_from_zero_without_a_runtime(lib: ModuleType) -> None:
    """Without a runtime a step is a completed backward pass; forwards alone do not count."""
    model = mlp(lib)
    x = lib.tensor(X)
    with hookgrad.tap(model, "0", kinds=("forward",)) as tap:
        model(x)
        model(x).sum().backward()  # still step 0
        model(x)  # step 1
        model(x)
        model(x).sum().backward()
        model(x)  # step 2
    assert [r.step for r in tap.records] == [0, 0, 1, 1, 1, 2]


# ---------------------------------------------------------------------- sampling
@pytest.mark.parametrize(
    ("sampling", "steps"),
    [
        ({"every": 3}, [0, 3, 6]),
        ({"steps": range(2, 4)}, [2, 3]),
        ({"every": 2, "steps": range(1, 6)}, [2, 4]),
        ({"steps": {5, 1}}, [1, 5]),
    ],
)
def test_every_and_steps_choose_the_recorded_steps(
    lib: ModuleType, sampling: dict[str, Any], steps: list[int]
) -> None:
    """every=N keeps steps 0, N, 2N...; steps= keeps the steps it holds; both: both hold."""
    model = mlp(lib)
    with hookgrad.tap(model, ["0", "2"], **sampling) as tap:
        train(model, lib, 7)
    per_step = 4  # forward and backward of two modules
    assert [r.step for r in tap.records] == [s for s in steps for _ in range(per_step)]


def test_max_records_keeps_the_first_records(lib: ModuleType) -> None:
    """max_records=5 keeps exactly the first five records an unlimited tap makes."""
    model = mlp(lib)
    with hookgrad.tap(model, "*", kinds=ALL_KINDS) as full:
        train(model, lib, 2)
    with hookgrad.tap(model, "*", kinds=ALL_KINDS, max_records=5) as capped:
        train(model, lib, 2)
    key = [(r.phase, r.module_name, r.step) for r in full.records]
    assert [(r.phase, r.module_name, r.step) for r in capped.records] == key[:5]
    assert len(full.records) == 2 * 4 * 4


# ---------------------------------------------------------------------- hooks and exits
def test_every_hook_is_removed_on_exit(lib: ModuleType) -> None:
    """After the block: no module, global or backward-observer hook of the tap is left."""
    model = mlp(lib)
    before = hook_state(lib, model)
    with hookgrad.tap(model, "*", kinds=ALL_KINDS, capture=True):
        assert hook_state(lib, model) != before
        train(model, lib, 1)
    assert hook_state(lib, model) == before


def test_hooks_are_removed_when_the_body_raises_and_the_error_propagates(lib: ModuleType) -> None:
    """An exception in the body leaves the block unchanged and every hook gone."""
    model = mlp(lib)
    before = hook_state(lib, model)
    error = KeyError("in the body")
    with pytest.raises(KeyError) as caught, hookgrad.tap(model, "*", kinds=ALL_KINDS) as tap:
        train(model, lib, 1)
        raise error
    assert caught.value is error
    assert hook_state(lib, model) == before
    assert len(tap.records) == 4 * 4


def test_records_stop_at_exit(lib: ModuleType) -> None:
    """A backward after the block through a graph built inside it records nothing."""
    model = mlp(lib)
    x = lib.tensor(X)
    with hookgrad.tap(model, "*", kinds=ALL_KINDS) as tap:
        y = model(x)
    recorded = len(tap.records)
    y.sum().backward()
    model(x).sum().backward()
    assert len(tap.records) == recorded == 4 * 2  # the model and its three layers
    assert {r.phase for r in tap.records} == {"forward_pre", "forward"}


# ---------------------------------------------------------------------- errors
def test_a_selector_matching_no_module_raises_with_a_did_you_mean(lib: ModuleType) -> None:
    """The error names the selector, the model and the closest module name."""
    model = twice(lib)
    with pytest.raises(ValueError) as caught:
        hookgrad.tap(model, "lni").start()
    assert str(caught.value) == (
        "tap selector 'lni' matches no module name of the tapped Twice; did you mean 'lin'? "
        "(module names: '', 'lin')"
    )
    assert hook_state(lib, model) == hook_state(lib, twice(lib))


def test_bad_arguments_are_value_errors_naming_the_choices() -> None:
    """An unknown kind (with a did-you-mean), every < 1, a negative max_records."""
    model = mlp(hookgrad)
    with pytest.raises(ValueError, match=r"^unknown tap kind 'forwrd'; did you mean 'forward'\?"):
        hookgrad.tap(model, "*", kinds=("forwrd",))
    with pytest.raises(ValueError, match="every must be an int >= 1, got 0"):
        hookgrad.tap(model, "*", every=0)
    with pytest.raises(ValueError, match="max_records must be None or an int >= 0, got -1"):
        hookgrad.tap(model, "*", max_records=-1)
    with pytest.raises(TypeError, match=r"tap needs a hookgrad or torch nn\.Module, got list"):
        hookgrad.tap([], "*")


def test_tensors_needs_capture_and_names_what_is_missing() -> None:
    """Without capture=True tensors() raises; a module not tapped and an unknown field too."""
    model = mlp(hookgrad)
    with hookgrad.tap(model, "0") as plain:
        train(model, hookgrad, 1)
    with pytest.raises(RuntimeError, match="start it with capture=True"):
        plain.tensors("0", "output")
    with hookgrad.tap(model, "0", capture=True) as tap:
        train(model, hookgrad, 1)
    with pytest.raises(ValueError, match=r"module '1' is not tapped \(choices: '0'\)"):
        tap.tensors("1", "output")
    with pytest.raises(ValueError, match="no tensor field 'outptu'"):
        tap.tensors("0", "outptu")
    assert plain.records[0].output is not None  # records keep the payloads' tensors


def test_a_tap_starts_once() -> None:
    """Starting a tap twice, or again after it stopped, is a RuntimeError."""
    tap = hookgrad.tap(mlp(hookgrad), "*")
    with tap, pytest.raises(RuntimeError, match="a Tap starts once"):
        tap.start()
    with pytest.raises(RuntimeError, match="a Tap starts once"):
        tap.start()


# ---------------------------------------------------------------------- engines
def test_torch_modules_working_in_place_can_be_tapped() -> None:
    """torch: a tapped Linear followed by ReLU(inplace=True) trains; the values are torch's."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(inplace=True))
    with hookgrad.tap(model, "0", capture=True) as tap:
        train(model, torch, 1)
    (grad,) = tap.tensors("0", "grad_output")[0]
    expected = (model[0](torch.tensor(X)) > 0).float().numpy()
    np.testing.assert_array_equal(grad, expected)


def test_importing_hookgrad_loads_neither_the_tap_nor_torch() -> None:
    """hookgrad.tap is loaded on first use; neither step imports torch."""
    probe = (
        "import sys, hookgrad\n"
        "print('hookgrad._tap' in sys.modules)\n"
        "hookgrad.tap\n"
        "print('hookgrad._tap' in sys.modules, 'torch' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["False", "True", "False"]
