"""spike_guard: loss and gradient-norm spikes skipped, clipped, rolled back or stopped, on both
engines, with the records that say so."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

import hookgrad
from hookgrad.plugins.spike_guard import SpikeError, SpikeGuard
from hookgrad.testing import capture_events

torch = pytest.importorskip("torch")

ENGINES = [pytest.param(hookgrad, id="hookgrad"), pytest.param(torch, id="torch")]
RNG = np.random.default_rng(7)
INPUTS = RNG.standard_normal((16, 4)).astype(np.float32)
TARGETS = RNG.standard_normal((16, 1)).astype(np.float32)
WEIGHT = np.array([[0.3, -0.2, 0.1, 0.4]], dtype=np.float32)


class Run:
    """A linear regression trained for ``steps`` steps, its loss multiplied by ``factor``
    at the steps in ``spikes``; keeps the weights after every step."""

    def __init__(
        self,
        lib: Any,
        config: dict[str, Any],
        steps: int,
        spikes: dict[int, float],
        optimizer: Callable[[Any], Any] | None = None,
    ) -> None:
        self.lib = lib
        self.model = lib.nn.Linear(4, 1)
        with lib.no_grad():
            self.model.weight.copy_(lib.tensor(WEIGHT))
            self.model.bias.zero_()
        make = optimizer or (lambda params: lib.optim.SGD(params, lr=0.05, momentum=0.9))
        self.optimizer = make(self.model.parameters())
        self.weights: list[np.ndarray] = []
        self.lrs: list[float] = []
        plugin = SpikeGuard(SpikeGuard.Config(**config))
        engine = "torch" if lib is torch else "hookgrad"
        x, y = lib.tensor(INPUTS), lib.tensor(TARGETS)
        with capture_events(("spike_guard", plugin), engine=engine) as capture:
            capture.runtime.watch(self.model)
            self.capture = capture
            for step in range(steps):
                self.optimizer.zero_grad()
                loss = ((self.model(x) - y) ** 2).mean() * spikes.get(step, 1.0)
                loss.backward()
                self.optimizer.step()
                self.weights.append(self.model.weight.detach().numpy().copy())
                self.lrs.append(self.optimizer.param_groups[0]["lr"])

    def records(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [
            r for r in self.capture.of_plugin("spike_guard") if kind is None or r["kind"] == kind
        ]


@pytest.mark.parametrize("lib", ENGINES)
def test_a_loss_spike_is_skipped_and_leaves_weights_and_state_alone(lib: Any) -> None:
    """After the warmup a loss 50x its usual size is a spike: the step is vetoed (the weights
    and the momentum stay as they were), one skip_step record says which signal and by how
    much; the steps around it train as usual."""
    run = Run(lib, {"signals": ["loss"], "warmup_steps": 10}, steps=20, spikes={15: 50.0})
    (record,) = run.records()
    assert (record["kind"], record["step"]) == ("skip_step", 15)
    data = record["data"]
    assert (data["reason"], data["signal"]) == ("spike", "loss")
    assert data["z"] > 6.0 and data["value"] > 10 * data["mean"] and data["std"] > 0
    np.testing.assert_array_equal(run.weights[15], run.weights[14])
    assert not np.array_equal(run.weights[16], run.weights[15])


@pytest.mark.parametrize("lib", ENGINES)
def test_nothing_is_decided_during_the_warmup(lib: Any) -> None:
    """A spike within the first warmup_steps steps is only learnt, never acted on."""
    run = Run(lib, {"warmup_steps": 10}, steps=12, spikes={5: 1000.0})
    assert run.records() == []


@pytest.mark.parametrize("lib", ENGINES)
def test_clip_to_scales_the_gradients_to_the_spike_threshold(lib: Any) -> None:
    """grad_norm with clip_to: the gradients are scaled to a total norm of mean + z * std
    and the step runs; the record gives the scale."""
    config = {"signals": ["grad_norm"], "action": "clip_to", "warmup_steps": 10, "z": 4.0}
    run = Run(lib, config, steps=16, spikes={12: 40.0})
    (record,) = run.records()
    assert (record["kind"], record["step"]) == ("spike_clipped", 12)
    data = record["data"]
    target = data["mean"] + 4.0 * data["std"]
    assert data["scale"] == pytest.approx(target / data["value"], rel=1e-5)
    assert not np.array_equal(run.weights[12], run.weights[11])  # the step ran, clipped


def test_clip_to_asked_for_the_loss_is_a_config_error() -> None:
    """Scaling gradients cannot clip a loss: such a config names the way out."""
    with pytest.raises(ValidationError, match="applies to the grad_norm signal only"):
        SpikeGuard.Config(action="clip_to")
    SpikeGuard.Config(action="clip_to", loss_action="skip")  # both given their own: fine


@pytest.mark.parametrize("lib", ENGINES)
def test_rollback_restores_the_latest_snapshot_and_cools_the_learning_rate(lib: Any) -> None:
    """rollback: the spiked step is vetoed and the weights and optimizer state go back to
    the snapshot after the latest snapshot_every-th good step; the learning rate is
    multiplied by lr_factor for cooldown steps, then given back."""
    config = {
        "signals": ["loss"],
        "action": "rollback",
        "warmup_steps": 8,
        "snapshot_every": 4,
        "lr_factor": 0.5,
        "cooldown": 2,
    }

    def adam(params: Any) -> Any:
        return lib.optim.Adam(params, lr=0.01)

    run = Run(lib, config, steps=16, spikes={13: 80.0}, optimizer=adam)
    (record,) = run.records()
    assert (record["kind"], record["step"]) == ("rolled_back", 13)
    # good steps 1..12 are steps 0..11: the 12th good step (step 11) took the last snapshot
    assert record["data"]["snapshot_step"] == 11
    np.testing.assert_array_equal(run.weights[13], run.weights[11])
    assert run.lrs[12:16] == [0.01, 0.005, 0.005, 0.01]
    state = run.optimizer.state_dict()["state"][0]
    assert int(state["step"]) == 14  # 12 steps at the snapshot, then steps 14 and 15


@pytest.mark.parametrize("lib", ENGINES)
def test_stop_raises_spike_error_naming_the_step(lib: Any) -> None:
    """action stop: SpikeError, a RuntimeError, naming the step and the signal's numbers."""
    with pytest.raises(SpikeError, match=r"a spike at step 12: loss = ") as caught:
        Run(lib, {"action": "stop", "warmup_steps": 10}, steps=14, spikes={12: 60.0})
    assert isinstance(caught.value, RuntimeError)
    assert hookgrad.SpikeError is SpikeError


@pytest.mark.parametrize("lib", ENGINES)
def test_spikes_in_a_row_stop_training_whatever_the_action(lib: Any) -> None:
    """max_consecutive spikes in a row raise SpikeError naming them; the skipped ones before
    are recorded."""
    spikes = dict.fromkeys(range(12, 20), 100.0)
    with pytest.raises(SpikeError, match=r"3 spikes in a row \(steps 12, 13, 14\)"):
        Run(lib, {"warmup_steps": 10, "max_consecutive": 3}, steps=20, spikes=spikes)


@pytest.mark.parametrize("lib", ENGINES)
def test_a_nan_loss_is_a_spike_with_no_z(lib: Any) -> None:
    """A non-finite value is a spike whatever the statistics; its z is written as null."""
    run = Run(lib, {"signals": ["loss"], "warmup_steps": 5}, steps=8, spikes={6: math.nan})
    (record,) = run.records("skip_step")
    assert record["step"] == 6 and record["data"]["z"] is None


def test_both_engines_make_the_same_decisions() -> None:
    """The same run on hookgrad and torch: the same records, numbers to float32 tolerance."""
    config = {"warmup_steps": 10}
    spikes = {13: 30.0, 17: 0.2}
    ours, theirs = (Run(lib, config, 20, spikes).records() for lib in (hookgrad, torch))
    assert [(r["kind"], r["step"], r["data"]["signal"]) for r in ours] == [
        (r["kind"], r["step"], r["data"]["signal"]) for r in theirs
    ]
    for mine, reference in zip(ours, theirs, strict=True):
        for key in ("value", "z", "mean", "std"):
            assert mine["data"][key] == pytest.approx(reference["data"][key], rel=1e-4)


def test_import_hookgrad_loads_no_plugin_until_spike_error_is_asked_for() -> None:
    """hookgrad.SpikeError is there on first access; import hookgrad alone loads no plugin."""
    code = (
        "import sys, hookgrad\n"
        "assert 'hookgrad.plugins.spike_guard' not in sys.modules\n"
        "assert issubclass(hookgrad.SpikeError, RuntimeError)\n"
        "assert 'hookgrad.plugins.spike_guard' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
