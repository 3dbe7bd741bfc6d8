"""examples/third_party_plugin installs with pip and works as a real third-party plugin.

SLOW (a pip build and two subprocesses): marked ``slow``; deselect with ``-m "not slow"``.

The package is built and installed with the interpreter running the tests into a temporary
``--target`` folder, which goes on ``PYTHONPATH`` of fresh interpreters: ``importlib.metadata``
then finds the example's ``.dist-info`` entry point next to the hookgrad installed in this
environment, as it would after ``pip install`` into it. Nothing in this environment changes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "third_party_plugin"

_TRAIN = textwrap.dedent(
    """
    from pathlib import Path

    import hookgrad
    from hookgrad import nn

    Path("hookgrad.toml").write_text(
        '[plugins.gradnorm]\\nevery_n_steps = 1\\n\\n[events]\\njsonl = "events.jsonl"\\n'
    )
    hookgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.MSELoss()
    x, y = hookgrad.randn(16, 4), hookgrad.randn(16, 1)
    with hookgrad.configure():
        for _ in range(3):
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
    """
)


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    result = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, f"{args}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


@pytest.mark.slow
def test_example_plugin_installs_lists_and_records(tmp_path: Path) -> None:
    # Build from a copy, so the build leaves no build/ or .egg-info in the repository.
    source = tmp_path / "src"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    site = tmp_path / "site"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("HOOKGRAD_") and key != "PYTHONPATH"
    }
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    _run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--target", str(site), str(source)],
        cwd=tmp_path,
        env=env,
    )  # fmt: skip
    env["PYTHONPATH"] = str(site)
    work = tmp_path / "work"
    work.mkdir()

    # (a) the CLI finds it through the entry point and imports it to list its hooks.
    listing = _run([sys.executable, "-m", "hookgrad", "plugins"], cwd=work, env=env)
    rows = [line.split() for line in listing.splitlines() if line.startswith("gradnorm ")]
    assert len(rows) == 1, listing
    row = " ".join(rows[0])
    assert "hookgrad-gradnorm-example 0.1.0 third-party" in row, listing
    assert "hookgrad_full_backward" in row and "import failed" not in row, listing

    # (b) a [plugins.gradnorm] table activates it; its records reach the JSONL sink.
    _run([sys.executable, "-c", _TRAIN], cwd=work, env=env)
    lines = (work / "events.jsonl").read_text().splitlines()
    records = [r for r in map(json.loads, lines) if r.get("plugin") == "gradnorm"]
    assert {r["step"] for r in records} == {0, 1, 2}
    called = {(r["module_name"], r["data"]["module_type"]) for r in records}
    assert called == {("", "Sequential"), ("0", "Linear"), ("1", "Tanh"), ("2", "Linear"),
                      ("", "MSELoss")}  # fmt: skip
    assert all(r["kind"] == "grad_norm" for r in records)
    assert all(r["data"]["grad_output_norm"] > 0 for r in records)
