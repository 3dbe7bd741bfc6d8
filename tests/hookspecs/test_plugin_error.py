"""PluginError.wrapping: the culprit named, the original's class and attributes kept."""

from __future__ import annotations

import pickle

from hookgrad.hookspecs import PluginError


class Verdict(RuntimeError):
    """A plugin's own exception with attributes, one of which is also a culprit field."""

    def __init__(self, finding: str) -> None:
        super().__init__(f"found {finding}")
        self.finding = finding
        self.phase = "backward"


def test_wrapping_is_also_an_instance_of_the_original_class_with_its_attributes():
    """The error is a PluginError and a Verdict; Verdict's attributes win over the culprit's."""
    error = PluginError.wrapping(
        Verdict("nan"), "plugin 'guard' failed", plugin="guard", hook="h", phase="step", step=2
    )
    assert isinstance(error, PluginError) and isinstance(error, Verdict)
    assert str(error) == "plugin 'guard' failed"
    assert (error.finding, error.phase, error.plugin, error.hook, error.step) == (
        "nan",
        "backward",
        "guard",
        "h",
        2,
    )
    assert type(error) is type(PluginError.wrapping(Verdict("inf"), "again"))  # made once


def test_a_class_that_cannot_be_combined_gives_a_plain_plugin_error():
    """OSError's C layout cannot be mixed with RuntimeError's: a plain PluginError then."""
    error = PluginError.wrapping(OSError("disk"), "plugin 'log' failed", plugin="log")
    assert type(error) is PluginError
    assert (str(error), error.plugin) == ("plugin 'log' failed", "log")


def test_a_wrapped_error_survives_pickling():
    """PluginError[ValueError] pickles by its parts (its class is made at run time)."""
    error = PluginError.wrapping(ValueError("bad"), "plugin 'p' failed", plugin="p", hook="h")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and isinstance(copy, ValueError)
    assert (str(copy), copy.plugin, copy.hook) == ("plugin 'p' failed", "p", "h")
