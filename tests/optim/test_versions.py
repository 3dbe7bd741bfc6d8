"""Optimizer steps bump parameter versions, so stale graphs refuse to backward (like torch)."""

from __future__ import annotations

import numpy as np
import pytest

import hookgrad
import hookgrad.optim


def _stale_matmul_graph(lib):
    x = lib.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    w = lib.tensor(np.ones((3, 2), dtype=np.float32), requires_grad=True)
    loss = (x @ w).sum()  # saves w to compute x's gradient
    return x, w, loss


@pytest.mark.parametrize(
    "make",
    [
        lambda lib, w: lib.optim.SGD([w], lr=0.1),
        lambda lib, w: lib.optim.SGD([w], lr=0.1, momentum=0.9, weight_decay=0.1),
        lambda lib, w: lib.optim.Adam([w]),
        lambda lib, w: lib.optim.AdamW([w]),
    ],
    ids=["sgd", "sgd_momentum", "adam", "adamw"],
)
def test_backward_after_step_on_saved_param_raises(lib, make):
    """loss.backward() after opt.step() modified a saved parameter raises RuntimeError."""
    _, w, loss = _stale_matmul_graph(lib)
    opt = make(lib, w)
    w.grad = lib.ones(3, 2)
    opt.step()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


@pytest.mark.parametrize(
    "make, bumps",
    [
        (lambda lib, w: lib.optim.SGD([w], lr=0.1), 1),
        (lambda lib, w: lib.optim.SGD([w], lr=0.1, momentum=0.9, nesterov=True), 1),
        (lambda lib, w: lib.optim.Adam([w], weight_decay=0.1), 1),
        (lambda lib, w: lib.optim.AdamW([w], weight_decay=0.1), 2),
        (lambda lib, w: lib.optim.AdamW([w], weight_decay=0.0), 1),
    ],
    ids=["sgd", "nesterov", "adam_l2", "adamw_decay", "adamw_no_decay"],
)
def test_version_bumps_per_in_place_write(lib, make, bumps):
    """Each in-place write to a parameter bumps its version once: AdamW's decay is a second write."""
    w = lib.tensor([1.0, 2.0], requires_grad=True)
    opt = make(lib, w)
    w.grad = lib.tensor([0.5, -0.5])
    opt.step()
    opt.step()
    assert w._version == 2 * bumps


def test_backward_before_step_then_step_works(lib):
    """The usual order (backward, then step) is fine and moves the parameter."""
    _, w, loss = _stale_matmul_graph(lib)
    loss.backward()
    lib.optim.SGD([w], lr=0.5).step()
    assert w.tolist() == [[-0.5, -0.5], [-1.5, -1.5], [-2.5, -2.5]]


def test_step_on_param_not_needed_by_backward_is_allowed():
    """x @ w with only w requiring grad needs x, not w: torch's backward after a step succeeds."""
    x = hookgrad.ones(2, 3)
    w = hookgrad.ones(3, 2, requires_grad=True)
    loss = (x @ w).sum()
    w.grad = hookgrad.ones(3, 2)
    hookgrad.optim.SGD([w], lr=0.1).step()
    loss.backward()
    assert w.grad.tolist() == [[3.0, 3.0]] * 3
