"""register_multi_grad_hook: SEMANTICS.md rules MG-1..MG-6 and H-7."""

from __future__ import annotations

import importlib

import pytest


def _register(lib):
    return importlib.import_module(f"{lib.__name__}.autograd.graph").register_multi_grad_hook


def _values(grads):
    return [None if g is None else g.tolist() for g in grads]


def test_all_mode_gets_aligned_list_once_per_backward(lib):
    """MG-1/N-2: one call per backward with a list aligned to the tensors, None for absent ones."""
    a, b, c = (lib.tensor([v], requires_grad=True) for v in (1.0, 2.0, 3.0))
    calls = []
    _register(lib)((a, b, c), lambda grads: calls.append(_values(grads)))
    out = (a * 2 + b * 3).sum()
    out.backward(retain_graph=True)
    out.backward()
    assert calls == [[[2.0], [3.0], None], [[2.0], [3.0], None]]


def test_all_mode_not_called_when_nothing_participates(lib):
    """MG-2: no participating tensor means no call."""
    a, b = (lib.tensor([1.0], requires_grad=True) for _ in range(2))
    other = lib.tensor([1.0], requires_grad=True)
    calls = []
    _register(lib)((a, b), calls.append)
    (other * 2).sum().backward()
    assert calls == []


def test_return_value_is_ignored_and_exceptions_propagate(lib):
    """MG-2/E-1: fn cannot change gradients, and what it raises leaves backward unchanged."""
    a = lib.tensor([1.0], requires_grad=True)
    _register(lib)((a,), lambda grads: [g * 100 for g in grads])
    (a * 2).sum().backward()
    assert a.grad.tolist() == [2.0]

    def boom(grads):
        raise KeyError("from hook")

    _register(lib)((a,), boom)
    with pytest.raises(KeyError):
        (a * 5).sum().backward()
    assert a.grad.tolist() == [2.0]


def test_fires_inside_last_tensor_hook_chain(lib):
    """MG-3: sees earlier hooks' replacements and runs before later-registered hooks."""
    a = lib.tensor([1.0], requires_grad=True)
    b = lib.tensor([2.0], requires_grad=True)
    log = []
    a.register_hook(lambda g: log.append("a-before") or g * 10)
    _register(lib)((a, b), lambda grads: log.append(("multi", _values(grads))))
    a.register_hook(lambda g: log.append("a-after"))
    b.register_hook(lambda g: log.append("b-after"))
    (a * 2 + b * 3).sum().backward()
    assert log == ["b-after", "a-before", ("multi", [[20.0], [3.0]]), "a-after"]


def test_handle_removes_and_has_no_id(lib):
    """MG-4/H-7: remove() stops the hook; the handle is a context manager without .id."""
    a = lib.tensor([1.0], requires_grad=True)
    calls = []
    with _register(lib)((a,), calls.append) as handle:
        (a * 2).sum().backward()
    (a * 2).sum().backward()
    assert len(calls) == 1
    assert not hasattr(handle, "id")


def test_any_mode_gets_first_gradient_and_skips_no_grad_tensors(lib):
    """MG-5: fn(grad) once per backward with the first gradient computed."""
    a = lib.tensor([1.0], requires_grad=True)
    b = lib.tensor([2.0], requires_grad=True)
    seen = []
    _register(lib)((a, b, lib.tensor([1.0])), lambda g: seen.append(g.tolist()), mode="any")
    (a * 2 + b * 3).sum().backward()
    (a * 7).sum().backward()
    assert seen == [[3.0], [7.0]]


def test_errors(lib):
    """MG-6: a bad mode is a ValueError; a no-grad tensor in mode='all' an AssertionError."""
    a = lib.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError):
        _register(lib)((a,), print, mode="some")
    with pytest.raises(AssertionError):
        _register(lib)((a, lib.tensor([1.0])), print)
