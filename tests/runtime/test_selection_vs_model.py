"""A ``modules`` glob or ``module_types`` name that selects nothing in the model is an error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import hookgrad
from hookgrad import nn
from hookgrad.runtime import ConfigError, Runtime


def make_model() -> nn.Module:
    hookgrad.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))


def first_step(tmp_path: Path, table: str) -> tuple[nn.Module, list[np.ndarray]]:
    """Train one step under ``[plugins.grad_clip]`` + ``table``; the weights before it."""
    (tmp_path / "hookgrad.toml").write_text(f"[plugins.grad_clip]\nmax_norm = 0.1\n{table}")
    model = make_model()
    before = [p.detach().numpy().copy() for p in model.parameters()]
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    with Runtime(cwd=tmp_path, environ={}):
        model(hookgrad.ones(2, 3)).sum().backward()
        optimizer.step()
    return model, before


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            'modules = ["layer.*"]\n',
            "hookgrad.toml: plugins.grad_clip.modules = ['layer.*'] matches no module name of "
            "the models trained (module names: '', '0', '1', '2')",
        ),
        (
            'module_types = ["Linaer"]\n',
            "hookgrad.toml: plugins.grad_clip.module_types = ['Linaer'] matches no module "
            "class of the models trained; did you mean 'Linear'? (module classes: 'Linear', "
            "'ReLU', 'Sequential')",
        ),
    ],
)
def test_a_selection_matching_no_module_fails_the_first_step_untouched(
    tmp_path: Path, table: str, message: str
) -> None:
    """The first optimizer step raises ConfigError naming key, value and the choices; no
    parameter has moved."""
    model = make_model()
    before = [p.detach().numpy().copy() for p in model.parameters()]
    (tmp_path / "hookgrad.toml").write_text(f"[plugins.grad_clip]\nmax_norm = 0.1\n{table}")
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    with Runtime(cwd=tmp_path, environ={}):
        model(hookgrad.ones(2, 3)).sum().backward()
        with pytest.raises(ConfigError) as caught:
            optimizer.step()
    assert str(caught.value) == message
    assert caught.value.key in table
    for p, old in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.detach().numpy(), old)


def test_a_watched_model_is_checked_at_once(tmp_path: Path) -> None:
    """runtime.watch(model) checks the selections before any training."""
    (tmp_path / "hookgrad.toml").write_text('[plugins.grad_clip]\nmodules = ["fc*"]\n')
    with Runtime(cwd=tmp_path, environ={}) as runtime, pytest.raises(ConfigError, match="fc"):
        runtime.watch(make_model())


def test_selections_that_match_train_as_usual(tmp_path: Path) -> None:
    """Globs and classes that match some module: the step is taken (and clipped)."""
    model, before = first_step(tmp_path, 'modules = ["0", "2"]\nmodule_types = ["Linear"]\n')
    assert not np.array_equal(model[0].weight.detach().numpy(), before[0])
