"""The python examples in the user docs run as written.

Every ```python block of a page runs in order in one namespace (a page's later blocks build on
its earlier ones), in a fresh interpreter whose working directory is a temporary folder, so an
example that writes an event log or picks up a hookgrad.toml touches nothing in the checkout.
docs/writing-a-plugin.md has its own, stricter test (tests/hookspecs/test_plugin_docs.py).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted(
    p
    for p in DOCS.rglob("*.md")
    if p.name != "writing-a-plugin.md" and "```python" in p.read_text()
)


def _program(page: Path) -> str:
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
    return "\n".join(blocks)


def test_the_docs_have_examples() -> None:
    """The collection below is not empty: a broken glob must not pass silently."""
    assert DOCS / "getting-started.md" in PAGES


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_page_examples_run(page: Path, tmp_path: Path) -> None:
    """The page's python blocks, run together, exit cleanly."""
    result = subprocess.run(
        [sys.executable, "-c", _program(page)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD": "1"},
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"{page.name} failed:\n{result.stderr[-3000:]}"
