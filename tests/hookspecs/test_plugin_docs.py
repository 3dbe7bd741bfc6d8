"""docs/writing-a-plugin.md: its example runs and prints what it says; its tables match the code."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from hookgrad.hookspecs import HOOK_EVENTS, PluginConfig, specs

DOC = Path(__file__).resolve().parents[2] / "docs" / "writing-a-plugin.md"


def _section() -> str:
    text = DOC.read_text()
    return text[text.index("## 1. The contract") :]


def _first_column(table_header: str) -> list[str]:
    """The backquoted first cells of the markdown table that starts with ``table_header``."""
    text = _section()
    rows = text[text.index(table_header) :].split("\n\n")[0].splitlines()[2:]
    return [re.match(r"\| `([^`(]+)", row).group(1) for row in rows]  # type: ignore[union-attr]


def test_example_runs_and_prints_what_it_says() -> None:
    """The python blocks run in order; the contract example prints what its comments promise."""
    blocks = re.findall(r"```python\n(.*?)```", _section(), re.S)
    assert len(blocks) == 5
    out = io.StringIO()
    namespace: dict[str, object] = {}
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, str(DOC), "exec"), namespace)
    promised = re.findall(r"print\(.*\)\s+# (.*)", blocks[1])
    assert out.getvalue().splitlines() == promised


def test_hook_table_lists_every_spec_with_its_payload() -> None:
    """The hooks table names each spec once, with the payload model HOOK_EVENTS gives it."""
    assert sorted(_first_column("| hook | payload |")) == sorted(specs.__all__)
    text = _section()
    for name, model in HOOK_EVENTS.items():
        assert re.search(rf"\| `{name}\(event\)` \| `{model.__name__}` \|", text), name


def test_config_table_lists_the_common_fields() -> None:
    """The PluginConfig table lists exactly the model's fields, in order."""
    assert _first_column("| field | default |") == list(PluginConfig.model_fields)
