"""Fixtures for the contract tests: one payload of every kind, built from real tensors."""

from __future__ import annotations

import pluggy
import pytest

import hookgrad
from hookgrad.hookspecs import (
    PROJECT_NAME,
    BackwardBeginEvent,
    BackwardEndEvent,
    BackwardPreEvent,
    Event,
    ForwardEvent,
    ForwardPreEvent,
    FullBackwardEvent,
    OptimizerStepPostEvent,
    OptimizerStepPreEvent,
    PluginRecord,
    specs,
)

MODULE = {"module_name": "layers.0", "module_type": "Linear", "call_index": 0, "step": 3}


def make_events() -> dict[type[Event], Event]:
    """One payload per model, each holding real hookgrad tensors (and a None where allowed)."""
    x = hookgrad.tensor([[1.0, -2.0]])
    g = hookgrad.tensor([[0.5, 0.0]])
    layer = hookgrad.nn.Linear(2, 1)
    layer.weight.grad = hookgrad.ones_like(layer.weight)
    parameters = tuple(layer.named_parameters())
    loss = hookgrad.tensor(0.25)
    events: list[Event] = [
        ForwardPreEvent(**MODULE, args=(x, 2), kwargs={"scale": 0.5}),
        ForwardEvent(**MODULE, args=(x,), kwargs={}, output=x),
        BackwardPreEvent(**MODULE, grad_output=(g,)),
        FullBackwardEvent(**MODULE, grad_input=(g, None), grad_output=(g,)),
        BackwardBeginEvent(step=3, loss=loss, gradient=None),
        BackwardEndEvent(step=3, loss=loss),
        OptimizerStepPreEvent(step=3, optimizer_type="SGD", parameters=parameters),
        OptimizerStepPostEvent(
            step=3, optimizer_type="SGD", parameters=parameters, skipped=True, vetoed_by="guard"
        ),
        PluginRecord(plugin="grad_clip", kind="clip", step=3, data={"pre_norm": 2.0}),
    ]
    return {type(e): e for e in events}


@pytest.fixture
def events() -> dict[type[Event], Event]:
    """One payload of each model, keyed by the model."""
    return make_events()


@pytest.fixture
def pm() -> pluggy.PluginManager:
    """An isolated plugin manager for project "hookgrad" with the specs added."""
    manager = pluggy.PluginManager(PROJECT_NAME)
    manager.add_hookspecs(specs)
    return manager
