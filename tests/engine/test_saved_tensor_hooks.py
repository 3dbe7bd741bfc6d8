"""Saved-tensor hooks (``autograd.graph.saved_tensors_hooks`` and friends), as torch 2.13.

Every test runs on hookgrad and on torch (the ``lib`` fixture) with the same literal
expectations; the hypothesis test compares gradients computed under hooks with torch's.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hookgrad


def _graph(lib: Any) -> Any:
    return lib.autograd.graph


def test_pack_runs_at_save_time_unpack_at_backward(lib):
    """pack gets each saved tensor when the op runs (the input tensor itself for a saved
    input); unpack runs during backward, and its result is what the formula reads."""
    log: list[str] = []

    def pack(t):
        log.append("pack")
        return t * 10

    def unpack(t):
        log.append("unpack")
        return t

    x = lib.tensor([1.0, 2.0], requires_grad=True)
    with _graph(lib).saved_tensors_hooks(pack, unpack):
        y = x.exp()
    assert log == ["pack"]
    y.sum().backward()
    assert log == ["pack", "unpack"]
    np.testing.assert_allclose(x.grad.tolist(), 10 * np.exp([1.0, 2.0]), rtol=1e-6)


def test_pack_receives_the_saved_input_itself(lib):
    """pack gets the very tensors saved: the input of mul, the output of exp."""
    seen: list[Any] = []
    x = lib.tensor([1.0, 2.0], requires_grad=True) * 1
    with _graph(lib).saved_tensors_hooks(lambda t: seen.append(t) or t, lambda t: t):
        y = x * x
        e = x.exp()
    assert any(t is x for t in seen) and any(t is e for t in seen)
    assert all(t.requires_grad for t in seen)
    (y.sum() + e.sum()).backward()


def test_innermost_hooks_apply(lib):
    """Nested contexts: ops use the innermost pair; leaving it restores the outer one."""
    log: list[str] = []
    graph = _graph(lib)
    x = lib.ones(2, requires_grad=True)
    with graph.saved_tensors_hooks(lambda t: log.append("outer") or t, lambda t: t):
        with graph.saved_tensors_hooks(lambda t: log.append("inner") or t, lambda t: t):
            x.exp()
        x.exp()
    x.exp()
    assert log == ["inner", "outer"]


def test_errors_in_pack_and_unpack_propagate(lib):
    """An exception raised by pack reaches the op's caller; one by unpack reaches backward."""
    graph = _graph(lib)
    x = lib.ones(2, requires_grad=True)

    def boom(t):
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"), graph.saved_tensors_hooks(boom, lambda t: t):
        x.exp()
    with graph.saved_tensors_hooks(lambda t: t, boom):
        y = x.exp()
    with pytest.raises(ValueError, match="boom"):
        y.sum().backward()


def test_unpack_must_return_a_tensor(lib):
    """An unpack hook returning something else raises torch's TypeError."""
    x = lib.ones(2, requires_grad=True)
    with _graph(lib).saved_tensors_hooks(lambda t: t, lambda t: 5):
        y = x.exp()
    with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor but got result of"):
        y.sum().backward()


@pytest.mark.parametrize(("copy", "expected"), [(False, 4.0), (True, 2.0)])
def test_in_place_after_saving_follows_what_pack_kept(lib, copy, expected):
    """Under hooks a saved tensor is not version-checked: a pack that keeps the tensor sees a
    later in-place write (no error), one that clones it keeps the old value."""
    a = lib.ones(3, requires_grad=True)
    with _graph(lib).saved_tensors_hooks(lambda t: t.clone() if copy else t, lambda t: t):
        b = a * 1
        y = b * b
    b.add_(1)
    y.sum().backward()
    assert a.grad.tolist() == [expected] * 3


def test_in_place_without_hooks_still_raises(lib):
    """The contrast: with no hooks, modifying a saved tensor makes backward refuse."""
    a = lib.ones(3, requires_grad=True)
    b = a * 1
    y = b * b
    b.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_disable_saved_tensors_hooks(lib):
    """Inside disable_saved_tensors_hooks(msg), pushing hooks raises RuntimeError(msg), and so
    does entering it while hooks are pushed; leaving it allows hooks again."""
    graph = _graph(lib)
    with (
        graph.disable_saved_tensors_hooks("no hooks here"),
        pytest.raises(RuntimeError, match=r"^no hooks here$"),
        graph.saved_tensors_hooks(lambda t: t, lambda t: t),
    ):
        pass
    with (
        graph.saved_tensors_hooks(lambda t: t, lambda t: t),
        pytest.raises(RuntimeError, match=r"^not now$"),
        graph.disable_saved_tensors_hooks("not now"),
    ):
        pass
    with graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        pass


def test_save_on_cpu_gives_the_same_gradients(lib):
    """save_on_cpu() (with and without pin_memory) leaves the gradients as without hooks."""
    grads = []
    for hooks in (None, False, True):
        x = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
        if hooks is None:
            y = (x.exp() * x).sum()
        else:
            with _graph(lib).save_on_cpu(pin_memory=hooks and lib is hookgrad):
                y = (x.exp() * x).sum()
        y.backward()
        grads.append(x.grad.tolist())
    assert grads[0] == grads[1] == grads[2]


def test_saved_attributes_under_torch_names(lib):
    """grad_fn._saved_self/_saved_other (mul) and _saved_result (exp) give the saved values;
    a saved input is the tensor itself; after backward they raise torch's freed error."""
    x = lib.tensor([1.0, 2.0], requires_grad=True) * 1
    w = lib.tensor([3.0, 4.0], requires_grad=True)
    y = x * w
    e = x.exp()
    assert y.grad_fn._saved_self is x and y.grad_fn._saved_other is w
    np.testing.assert_allclose(e.grad_fn._saved_result.tolist(), np.exp([1.0, 2.0]), rtol=1e-6)
    assert {"_saved_self", "_raw_saved_other"} <= set(dir(y.grad_fn))
    y.sum().backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second"):
        y.grad_fn._saved_self  # noqa: B018 - the read is what raises


def test_saved_optional_value_is_none(lib):
    """clamp with a tensor lower bound only: _saved_min is the bound, _saved_max None,
    _saved_self the input itself (torch's names for ClampBackward0)."""
    x = lib.ones(3, requires_grad=True) * 1
    y = x.clamp(min=lib.zeros(3))
    fn = y.grad_fn
    assert fn._saved_max is None and fn._saved_self is x
    assert fn._saved_min.tolist() == [0.0, 0.0, 0.0]


def test_raw_saved_register_hooks(lib):
    """_raw_saved_<name>.register_hooks packs at once and unpacks at each read and at
    backward; a second registration raises torch's RuntimeError; non-callables a TypeError."""
    log: list[str] = []
    x = lib.tensor([1.0, 2.0], requires_grad=True) * 1
    y = x * x
    raw = y.grad_fn._raw_saved_self
    raw.register_hooks(lambda t: log.append("p") or t * 10, lambda t: log.append("u") or t)
    assert log == ["p"]
    assert y.grad_fn._saved_self.tolist() == [10.0, 20.0] and log == ["p", "u"]
    with pytest.raises(RuntimeError, match="whose hooks have already been set"):
        raw.register_hooks(lambda t: t, lambda t: t)
    with pytest.raises(TypeError):
        y.grad_fn._raw_saved_other.register_hooks(1, 2)
    y.sum().backward()
    assert log == ["p", "u", "u"]


def test_hooks_are_per_thread(lib):
    """Hooks pushed in one thread do not apply to ops run in another (torch's are
    thread-local)."""
    log: list[str] = []
    x = lib.ones(2, requires_grad=True)
    started, done = threading.Event(), threading.Event()

    def other_thread():
        started.wait()
        x.exp()
        done.set()

    worker = threading.Thread(target=other_thread)
    worker.start()
    with _graph(lib).saved_tensors_hooks(lambda t: log.append("pack") or t, lambda t: t):
        started.set()
        done.wait(10)
    worker.join()
    assert log == []


@settings(max_examples=20, deadline=None)
@given(
    values=st.lists(st.floats(-2, 2, width=32), min_size=4, max_size=4),
    scale=st.floats(0.5, 3, width=32),
)
def test_gradients_under_scaling_hooks_as_torch(values, scale):
    """Differential: a pack that scales what it saves changes the gradients exactly as in
    torch, through mul, exp, relu, sigmoid, tanh, matmul, an in-place op on a view."""
    torch = pytest.importorskip("torch")
    grads = []
    for lib in (hookgrad, torch):
        x = lib.tensor(np.array(values, np.float32).reshape(2, 2), requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t * scale, lambda t: t):
            h = (x * x).exp() + (x @ x).relu() + x.sigmoid() * x.tanh()
            h[0].mul_(x[1])
        h.sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-4, atol=1e-5)
