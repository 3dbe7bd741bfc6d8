"""Text from outside (a log, a module name) made safe to print and to put into XML.

A string read from an event log can hold anything: terminal escape sequences (``\\x1b[31m``),
carriage returns that overwrite a line, bidirectional overrides, NUL, lone surrogates. Shown
as they are, they recolour or rewrite the user's terminal and make an SVG invalid (XML 1.0
has no way to write most control characters). :func:`visible` writes each such character as
its Python escape, so the text reads as what it is.
"""

from __future__ import annotations

__all__ = ["visible"]


def visible(text: str) -> str:
    """``text`` with each non-printable character as its escape: ``"a\\x1bb"`` -> ``a\\x1bb``.

    "Printable" is ``str.isprintable``: no control, format, surrogate, private-use or
    unassigned code point, and no separator but the space. Printable text is also valid
    XML 1.0 character data. The result is printable, so applying it twice changes nothing.
    """
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text
    )
