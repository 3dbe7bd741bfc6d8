"""``python -m hookgrad``: the ``hookgrad`` command."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    main(prog_name="hookgrad")
