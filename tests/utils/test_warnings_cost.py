"""warn_unless_ignored decides once per filter set, and still follows every filter change."""

from __future__ import annotations

import warnings

import pytest

from hookgrad.utils._warnings import warn_unless_ignored


def raise_it() -> None:
    warn_unless_ignored("the message", UserWarning)


def test_a_filter_change_after_a_cached_decision_is_followed() -> None:
    """ignore, then error, then ignore again, then a module-specific filter: each one holds."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raise_it()  # decided: ignored
        raise_it()
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="the message"):
            raise_it()
        warnings.simplefilter("ignore")
        raise_it()
        warnings.filterwarnings("error", module=__name__)  # needs the caller: not decided early
        with pytest.raises(UserWarning):
            raise_it()


def test_the_warning_points_at_the_first_frame_outside_hookgrad() -> None:
    """Under default filters the warning is shown once per place, at the caller's line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        raise_it()
    assert len(caught) == 1 and caught[0].filename == __file__
