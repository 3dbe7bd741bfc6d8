"""``warn_unless_ignored``: the same warnings as ``warnings.warn``, minus the ignored ones."""

from __future__ import annotations

import sys
import warnings

import pytest

from hookgrad.utils._warnings import user_stacklevel, warn_unless_ignored


def _caller() -> None:
    warn_unless_ignored("every call warns", UserWarning, stacklevel=2)


def test_shown_with_the_callers_location_when_no_filter_ignores_it():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _caller()
    assert [str(w.message) for w in caught] == ["every call warns"]
    assert caught[0].category is UserWarning
    assert caught[0].filename == __file__


def test_dropped_by_a_global_ignore_filter_for_its_category():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", UserWarning)
        _caller()
        warnings.warn("other category", RuntimeWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["other category"]


def test_a_message_filter_for_another_message_does_not_drop_it():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", message="something else")
        _caller()
    assert [str(w.message) for w in caught] == ["every call warns"]


def test_module_filters_are_left_to_warnings_warn():
    """A filter naming a module needs the caller, so warnings.warn decides: this module's
    warning is ignored, another module's is not."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", module="some_other_module")
        _caller()
        warnings.filterwarnings("ignore", module=__name__)
        _caller()
    assert len(caught) == 1 and caught[0].filename == __file__


def test_error_filters_raise():
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        with pytest.raises(UserWarning, match="every call warns"):
            _caller()


def test_an_earlier_filter_wins_over_a_later_ignore():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("ignore", UserWarning)
        warnings.filterwarnings("always", message="every call")
        _caller()
    assert len(caught) == 1


def test_default_points_at_the_first_frame_outside_hookgrad():
    """stacklevel=None: this test is outside hookgrad, so the warning points at the line that
    calls warn_unless_ignored; user_stacklevel counts no frame of this file."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        expected = sys._getframe().f_lineno + 1
        warn_unless_ignored("from the user's line", UserWarning)
    assert (caught[0].filename, caught[0].lineno) == (__file__, expected)
    assert user_stacklevel() == 1
