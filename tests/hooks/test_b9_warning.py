"""B-9's warning ("Full backward hook is firing ...") as torch raises it, whatever its cost.

hookgrad raises it through a shortcut (the user's frame found once per backward call, the
warning issued at that frame); these tests pin that the result is ``warnings.warn``'s under
every kind of filter, with torch's text, category and location.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import pytest

import hookgrad


def _model(lib: Any) -> tuple[Any, Any]:
    """Sequential(Linear) under a global full backward hook, and an input needing no grad:
    both modules' inputs need no grad, so one backward warns twice."""
    model = lib.nn.Sequential(lib.nn.Linear(2, 1))
    return model, lib.ones(1, 2)


def _steps(lib: Any, n: int) -> None:
    """``n`` backward calls from one line of this file (``_steps.line``), both modules'
    inputs needing no grad under a global full backward hook."""
    model, x = _model(lib)
    handle = lib.nn.modules.module.register_module_full_backward_hook(lambda *a: None)
    try:
        for _ in range(n):
            _steps.line = sys._getframe().f_lineno + 1  # type: ignore[attr-defined]
            model(x).sum().backward()
    finally:
        handle.remove()


def _recorded(lib: Any, n: int, action: str) -> list[warnings.WarningMessage]:
    """The warnings of ``_steps(lib, n)`` under one filter ``action`` for everything."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(action)
        _steps(lib, n)
    return caught


def test_text_and_category_are_torchs() -> None:
    """The message text and the category equal torch 2.13's, word for word."""
    torch = pytest.importorskip("torch")
    expected = [(str(w.message), w.category) for w in _recorded(torch, 1, "always")]
    got = [(str(w.message), w.category) for w in _recorded(hookgrad, 1, "always")]
    assert got == expected
    assert len(got) == 2 and got[0][1] is UserWarning


def test_always_shows_each_warning_at_the_users_backward_line(lib: Any) -> None:
    """ "always": two warnings per backward, each at the line that called backward()."""
    caught = _recorded(lib, 3, "always")
    line = _steps.line  # type: ignore[attr-defined]
    assert [(w.filename, w.lineno) for w in caught] == [(__file__, line)] * 6


def test_the_default_action_shows_it_once_until_the_filters_change(lib: Any) -> None:
    """No filter matches (the "default" action): one warning for many steps, as
    warnings.warn gives; one more after any change of the filters (the registry resets)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        _steps(lib, 3)
        first = len(caught)
        warnings.filterwarnings("ignore", message="unrelated")
        _steps(lib, 3)
    assert (first, len(caught)) == (1, 2)


def test_once_shows_it_once_even_from_another_line(lib: Any) -> None:
    """ "once": a single warning for the text, whichever line calls backward()."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("once")
        _steps(lib, 2)
        model, x = _model(lib)
        with lib.nn.modules.module.register_module_full_backward_hook(lambda *a: None):
            model(x).sum().backward()
    assert len(caught) == 1


def test_ignore_and_error_filters_act(lib: Any) -> None:
    """ "ignore" silences it; "error" raises it as a UserWarning out of backward()."""
    assert _recorded(lib, 2, "ignore") == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match=r"^Full backward hook is firing"):
            _steps(lib, 1)
