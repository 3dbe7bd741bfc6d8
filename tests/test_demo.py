"""``hookgrad demo`` under the example config, ``hookgrad report``, and the gradient-flow picture."""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import pytest
from click.testing import CliRunner, Result

from hookgrad._demo import NanInjection, glyph_digits, make_task, run
from hookgrad._plot import DPI, Picture, draw, render
from hookgrad._report import findings, gradient_flow
from hookgrad._report_records import plugin_entries, read_entries
from hookgrad.cli import main
from hookgrad.runtime import read_events

EXAMPLE_CONFIG = Path(__file__).resolve().parents[1] / "examples" / "hookgrad.toml"
SVG = "{http://www.w3.org/2000/svg}"
PICTURE = "gradient_flow.svg"
BUILT_INS = ("grad_clip", "grad_scale", "grad_stats", "nan_guard")


def _invoke(args: list[str], cwd: Path) -> Result:
    """Run ``hookgrad ARGS`` in ``cwd`` with no HOOKGRAD_* variable from the shell."""
    env: dict[str, str | None] = {name: None for name in os.environ if name.startswith("HOOKGRAD_")}
    previous = Path.cwd()
    os.chdir(cwd)
    try:
        return CliRunner(env=env).invoke(main, args)
    finally:
        os.chdir(previous)


@dataclass(frozen=True)
class Run:
    """One finished ``hookgrad demo`` run: its output and the files it wrote."""

    result: Result
    out: Path

    @property
    def records(self) -> list[dict[str, Any]]:
        return [record for _, record in read_events(self.out / "events.jsonl", warn=pytest.fail)]

    def titles(self) -> dict[str, str]:
        """The tooltips of the run's picture (gradient_flow.svg), by the id of their group."""
        return _titles((self.out / "gradient_flow.svg").read_bytes())

    def picture(self) -> Picture:
        """The picture of the run's log, drawn again: its artists hold the plotted numbers."""
        return draw(gradient_flow(read_entries(self.out / "events.jsonl", pytest.fail).entries))

    def of(self, plugin: str, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("plugin") == plugin and r.get("kind") == kind]


def _demo(tmp: Path, *args: str) -> Run:
    out = tmp / "run"
    result = _invoke(["demo", "--config", str(EXAMPLE_CONFIG), "--out", str(out), *args], tmp)
    assert result.exit_code == 0, result.output + result.stderr
    return Run(result, out)


@pytest.fixture(scope="module")
def mlp_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The MLP demo, 30 steps under examples/hookgrad.toml, a NaN put into module 2 at step 20."""
    return _demo(
        tmp_path_factory.mktemp("mlp"), "--steps", "30", "--log-every", "10", "--inject-nan", "20:2"
    )


def _titles(svg: bytes) -> dict[str, str]:
    """gid -> tooltip of every group of an SVG that has a ``<title>``."""
    groups = ET.fromstring(svg).iter(f"{SVG}g")
    return {
        g.get("id", ""): g.findtext(f"{SVG}title", "")
        for g in groups
        if g.find(f"{SVG}title") is not None
    }


def _of(titles: dict[str, str], kind: str) -> list[str]:
    """The tooltips of the numbered artists of ``kind`` (``skip_step-0``, ...), in order."""
    return [title for gid, title in titles.items() if gid.rpartition("-")[0] == kind]


# --------------------------------------------------------------------------------------------
# hookgrad demo
# --------------------------------------------------------------------------------------------


def test_demo_writes_the_log_the_picture_and_loss_csv(mlp_run: Run) -> None:
    """--out DIR gets events.jsonl, gradient_flow.svg and loss.csv, and says so."""
    lines = mlp_run.result.output.splitlines()
    assert lines[-3:] == [
        f"wrote {mlp_run.out / name}" for name in ("events.jsonl", "gradient_flow.svg", "loss.csv")
    ]
    with (mlp_run.out / "loss.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(row["step"]) for row in rows] == list(range(1, 31))
    assert [row["step"] for row in rows if row["accuracy"]] == ["10", "20", "30"]


def test_demo_runs_the_six_built_ins_of_the_example_config(mlp_run: Run) -> None:
    """The output names the config's plugins; each wrote records but spike_guard, which saw
    no spike (test_inject_spike_* below give it one)."""
    plugins = "grad_scale, nan_guard, grad_stats, grad_clip, spike_guard, param_health"
    assert f"config: {EXAMPLE_CONFIG}; plugins: {plugins}\n" in mlp_run.result.output
    recorded = {r["plugin"] for r in mlp_run.records if "kind" in r}
    assert recorded == {*BUILT_INS, "param_health", "demo"}


def test_demo_prints_param_healths_report_from_its_record(mlp_run: Run) -> None:
    """The run's health_report record (at the runtime's end) is what the last lines say."""
    (report,) = mlp_run.of("param_health", "health_report")
    expected = [
        f"param_health: {d['fraction']:.1%} of the units of {d['param']} "
        f"(module '{d['module']}') are dead"
        for d in report["data"]["dead"]
    ] or ["param_health: every watched parameter is healthy"]
    lines = mlp_run.result.output.splitlines()
    assert [x for x in lines if x.startswith("param_health")] == expected


def test_demo_records_share_the_runtime_step(mlp_run: Run) -> None:
    """The demo's train record of each step carries the runtime's counter (0..29), as grad_clip's."""
    train = mlp_run.of("demo", "train")
    assert [r["step"] for r in train] == list(range(30))
    assert all(math.isfinite(r["data"]["loss"]) for r in train)
    assert [r["step"] for r in train if "accuracy" in r["data"]] == [9, 19, 29]
    clipped_steps = {r["step"] for r in mlp_run.of("grad_clip", "clip")}
    assert clipped_steps == set(range(30)) - {19}  # step 20 (counter 19) was vetoed


def test_demo_prints_the_per_layer_table_and_summary(mlp_run: Run) -> None:
    """grad_stats prints one table row per parameterised layer; the summary counts clips."""
    rows = {
        line.split()[0]
        for line in mlp_run.result.output.splitlines()
        if line[:2] in {"0 ", "2 ", "4 "}
    }
    assert rows == {"0", "2", "4"}
    assert "module  steps" in mlp_run.result.output
    assert "grad_clip: clipped " in mlp_run.result.output
    assert "grad_scale: loss scale 256 -> " in mlp_run.result.output


def test_picture_has_one_line_per_parameterised_layer(mlp_run: Run) -> None:
    """Panel 1 has one line per Linear layer, named by its qualified name, through the log's
    pre-clip norms at the steps as shown (from 1)."""
    assert _of(mlp_run.titles(), "module-norm") == [
        f"the gradient norm of module '{name}'" for name in ("0", "2", "4")
    ]
    picture = mlp_run.picture()
    for index, name in enumerate(("0", "2", "4")):
        norms = [
            (r["step"] + 1, r["data"]["norm"])
            for r in mlp_run.of("grad_stats", "module_grad")
            if r["module_name"] == name and r["data"]["stage"] == "pre_clip"
        ]
        assert len(norms) == 29  # one step vetoed
        line = picture.artist(f"module-norm-{index}")
        assert list(zip(line.get_xdata(), line.get_ydata(), strict=True)) == norms


def test_picture_marks_each_skipped_step(mlp_run: Run) -> None:
    """One red marker per skip_step record, and the clipping and scale lines are drawn."""
    skips = [r for r in mlp_run.records if r.get("kind") == "skip_step"]
    assert len(skips) == 1
    titles = mlp_run.titles()
    assert _of(titles, "skip_step") == ["step 20: skip: overflow, from '2'"]
    assert _of(titles, "backoff") == ["step 20: backoff"]
    assert {"clip-pre", "clip-post", "clipped", "loss-scale"} <= titles.keys()


def test_inject_nan_is_named_by_the_guard(mlp_run: Run) -> None:
    """A NaN put into module 2's backward: nan_guard names 2 the producer; the step is skipped."""
    producers = [r for r in mlp_run.of("nan_guard", "nonfinite") if r["data"]["role"] == "producer"]
    assert [(r["step"], r["module_name"], r["data"]["tensor"]) for r in producers] == [
        (19, "2", "grad_input[0]")
    ]
    assert [r["step"] for r in mlp_run.records if r.get("kind") == "skip_step"] == [19]
    assert (
        "nan_guard: step 20: non-finite grad_input[0] produced by module '2' (backward); "
        "step skipped by grad_scale (overflow)"
    ) in mlp_run.result.output.splitlines()


def test_inject_nan_without_loss_scaling_is_skipped_by_the_guard(tmp_path: Path) -> None:
    """With nan_guard alone, the guard itself skips the step and the output says so."""
    config = tmp_path / "guard.toml"
    config.write_text('[plugins.nan_guard]\naction = "skip_step"\n[plugins.grad_stats]\n')
    result = _invoke(
        ["demo", "--config", str(config), "--steps", "6", "--inject-nan", "4:2"], tmp_path
    )
    assert result.exit_code == 0, result.output + result.stderr
    assert (
        "nan_guard: step 4 skipped: non-finite grad_input[0] produced by module '2' (backward)"
    ) in result.output.splitlines()
    assert "final accuracy" in result.output  # training went on


def test_inject_nan_with_the_guard_raising_stops_with_its_message(tmp_path: Path) -> None:
    """nan_guard action "raise": exit 1 with the guard's error; the log and picture are written."""
    config = tmp_path / "raise.toml"
    config.write_text('[plugins.nan_guard]\naction = "raise"\n')
    args = ["demo", "--config", str(config), "--steps", "6", "--inject-nan", "4:2", "--out", "run"]
    result = _invoke(args, tmp_path)
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "Error: nan_guard stopped training: non-finite grad_input[0] in module '2'"
    )
    assert "final accuracy" not in result.output
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [
        "events.jsonl",
        "gradient_flow.svg",
        "loss.csv",
    ]


@pytest.fixture(scope="module")
def spike_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The MLP demo, 40 steps under examples/hookgrad.toml, the loss of step 35 times 50."""
    tmp = tmp_path_factory.mktemp("spike")
    return _demo(tmp, "--steps", "40", "--log-every", "10", "--inject-spike", "35:50")


def _spike_line(step: int, action: str, data: dict[str, Any]) -> str:
    """The demo's sentence for a spike_guard record's numbers (the record is the truth)."""
    why = (
        f"{data['signal']} {data['value']:.4g} is a spike (z {data['z']:.3g}; "
        f"mean {data['mean']:.4g}, std {data['std']:.4g})"
    )
    return f"spike_guard: step {step} {action} {why}"


def test_inject_spike_is_rolled_back_under_the_example_config(spike_run: Run) -> None:
    """Step 35's loss times 50: spike_guard rolls it back to the snapshot of step 25 (its 25th
    good step),
    the record holds the loss the run printed, the output says so and the picture marks it."""
    rolled = spike_run.of("spike_guard", "rolled_back")
    assert [(r["step"], r["data"]["signal"], r["data"]["snapshot_step"]) for r in rolled] == [
        (34, "loss", 24)
    ]
    data = rolled[0]["data"]
    with (spike_run.out / "loss.csv").open(newline="") as f:
        losses = {int(row["step"]): float(row["loss"]) for row in csv.DictReader(f)}
    assert data["value"] == pytest.approx(losses[35], rel=1e-6)
    assert data["value"] > 20 * losses[34]  # the spike, not a trend
    assert data["z"] > 6.0
    line = _spike_line(35, "rolled back to the snapshot of step 25:", data)
    assert line in spike_run.result.output.splitlines()
    assert _of(spike_run.titles(), "skip_step") == ["step 35: rollback: spike"]


def test_report_prints_the_spike_sentence_again(spike_run: Run, tmp_path: Path) -> None:
    """hookgrad report of the spiked run's log repeats the demo's spike_guard sentence."""
    result = _invoke(["report", str(spike_run.out / "events.jsonl"), "--out", "r.svg"], tmp_path)
    assert result.exit_code == 0, result.output + result.stderr
    demo_lines = [x for x in spike_run.result.output.splitlines() if x.startswith("spike_guard")]
    assert len(demo_lines) == 1
    assert demo_lines[0] in result.output.splitlines()


@pytest.mark.parametrize(("action", "exit_code"), [("skip", 0), ("stop", 1)])
def test_inject_spike_with_skip_or_stop(tmp_path: Path, action: str, exit_code: int) -> None:
    """action "skip" skips the spiked step and trains on; "stop" exits 1 with the guard's error
    naming the step, the run's files written."""
    config = tmp_path / "spike.toml"
    config.write_text(f'[plugins.spike_guard]\naction = "{action}"\n')
    args = ["demo", "--config", str(config), "--steps", "30", "--inject-spike", "25:50"]
    result = _invoke([*args, "--out", "run"], tmp_path)
    assert result.exit_code == exit_code, result.output + result.stderr
    skips = [r for _, r in read_events(tmp_path / "run" / "events.jsonl", warn=pytest.fail)]
    skips = [r for r in skips if r.get("kind") == "skip_step"]
    assert [(r["plugin"], r["step"], r["data"]["reason"]) for r in skips] == [
        ("spike_guard", 24, "spike")
    ]
    if action == "skip":
        assert _spike_line(25, "skipped:", skips[0]["data"]) in result.output.splitlines()
        assert "final accuracy" in result.output
    else:
        assert result.stderr.startswith(
            "Error: spike_guard: training stopped on a spike at step 24: loss = "
        )
        assert "final accuracy" not in result.output


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("35-50", "expected STEP:FACTOR with FACTOR > 0, e.g. 120:50, got '35-50'"),
        ("5:0", "expected STEP:FACTOR with FACTOR > 0, e.g. 120:50, got '5:0'"),
        ("5:nan", "expected STEP:FACTOR with FACTOR > 0, e.g. 120:50, got '5:nan'"),
        ("5:x", "expected STEP:FACTOR with FACTOR > 0, e.g. 120:50, got '5:x'"),
        ("11:50", "step 11 is outside this run's steps 1..10"),
    ],
)
def test_inject_spike_bad_values_are_usage_errors(tmp_path: Path, value: str, message: str) -> None:
    """A bad --inject-spike exits 2 before training, with the reason."""
    result = _invoke(["demo", "--steps", "10", "--inject-spike", value], tmp_path)
    assert result.exit_code == 2
    assert "Invalid value for '--inject-spike'" in result.stderr
    assert message in " ".join(result.stderr.split())
    assert "two spirals" not in result.output


def test_demo_cnn_draws_its_conv_and_linear_layers(tmp_path: Path) -> None:
    """--model cnn trains the small CNN; the picture has lines for Conv2d 0 and Linear 3."""
    run = _demo(tmp_path, "--model", "cnn", "--steps", "5")
    assert "glyph digits 0-4: 320 noisy 8x8 images" in run.result.output
    assert _of(run.titles(), "module-norm") == [
        "the gradient norm of module '0'",
        "the gradient norm of module '3'",
    ]


def test_demo_without_plugins_trains_plainly_with_a_hint(tmp_path: Path) -> None:
    """No config found: one hint line naming examples/hookgrad.toml, loss.csv, no event log."""
    result = _invoke(["demo", "--steps", "3", "--out", "run"], tmp_path)
    assert result.exit_code == 0, result.output + result.stderr
    assert result.output.count("--config examples/hookgrad.toml") == 1
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["loss.csv"]


def test_demo_replaces_the_log_of_an_earlier_run(tmp_path: Path) -> None:
    """A second run into the same --out holds only its own records (the sink appends)."""
    _demo(tmp_path, "--steps", "2")
    run = _demo(tmp_path, "--steps", "3")
    assert [r["step"] for r in run.of("demo", "train")] == [0, 1, 2]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "9:7",
            "no module '7' in the mlp model; modules: 0 (Linear), 1 (ReLU), 2 (Linear), "
            "3 (ReLU), 4 (Linear)",
        ),
        ("30-2", "expected STEP:MODULE, e.g. 30:2, got '30-2'"),
        (":2", "expected STEP:MODULE, e.g. 30:2, got ':2'"),
        ("11:2", "step 11 is outside this run's steps 1..10"),
        ("0:2", "step 0 is outside this run's steps 1..10"),
    ],
)
def test_inject_nan_bad_values_are_usage_errors(tmp_path: Path, value: str, message: str) -> None:
    """A bad --inject-nan exits 2 before training, with the reason and the valid choices."""
    result = _invoke(["demo", "--steps", "10", "--inject-nan", value], tmp_path)
    assert result.exit_code == 2
    assert "Invalid value for '--inject-nan'" in result.stderr
    assert message in " ".join(result.stderr.split())
    assert "two spirals" not in result.output


def test_installed_entry_point_runs_the_readme_demo(tmp_path: Path) -> None:
    """The console script runs the README's first command (shortened) in a fresh process."""
    script = shutil.which("hookgrad", path=str(Path(sys.executable).parent))
    assert script is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKGRAD_")}
    command = [script, "demo", "--config", str(EXAMPLE_CONFIG), "--out", "demo-out", "--steps", "5"]
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "demo-out").iterdir()) == [
        "events.jsonl",
        "gradient_flow.svg",
        "loss.csv",
    ]
    assert "Full backward hook is firing" not in done.stderr  # the demo hides torch's warning


# --------------------------------------------------------------------------------------------
# hookgrad report
# --------------------------------------------------------------------------------------------


def test_report_redraws_the_same_picture_byte_for_byte(mlp_run: Run, tmp_path: Path) -> None:
    """report EVENTS --out FILE writes the demo's SVG again, identical, and prints the table."""
    result = _invoke(["report", str(mlp_run.out / "events.jsonl"), "--out", "again.svg"], tmp_path)
    assert result.exit_code == 0, result.output + result.stderr
    assert (tmp_path / "again.svg").read_bytes() == (mlp_run.out / "gradient_flow.svg").read_bytes()
    assert "module  steps" in result.output
    assert "produced by module '2' (backward)" in result.output
    assert result.output.splitlines()[-1] == "wrote again.svg"


def test_report_writes_next_to_the_log_by_default(mlp_run: Run, tmp_path: Path) -> None:
    """Without --out the picture is gradient_flow.svg beside EVENTS."""
    log = tmp_path / "saved" / "events.jsonl"
    log.parent.mkdir()
    shutil.copy(mlp_run.out / "events.jsonl", log)
    result = _invoke(["report", str(log)], tmp_path)
    assert result.exit_code == 0, result.output + result.stderr
    assert (log.parent / "gradient_flow.svg").read_bytes() == (
        mlp_run.out / "gradient_flow.svg"
    ).read_bytes()


def test_report_draws_a_png_when_out_ends_in_png(mlp_run: Run, tmp_path: Path) -> None:
    """report EVENTS --out FILE.png writes the same picture as a PNG, 1000 pixels wide."""
    result = _invoke(["report", str(mlp_run.out / "events.jsonl"), "--out", "flow.png"], tmp_path)
    assert result.exit_code == 0, result.output + result.stderr
    png = (tmp_path / "flow.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", png[16:24]) == (1000, 665)
    assert result.output.splitlines()[-1] == "wrote flow.png"


@pytest.mark.parametrize("name", ["flow.pdf", "flow"])
def test_report_out_of_another_format_is_a_usage_error(tmp_path: Path, name: str) -> None:
    """--out with a suffix other than .svg or .png exits 2 naming it, before reading the log."""
    (tmp_path / "events.jsonl").write_text("")
    result = _invoke(["report", "events.jsonl", "--out", name], tmp_path)
    assert result.exit_code == 2
    shown = "'.pdf'" if name.endswith(".pdf") else "no suffix"
    assert f"Invalid value for '--out': {name}: the picture is .svg or .png, not {shown}" in (
        result.stderr
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.jsonl"]


_NO_MATPLOTLIB = (
    "warning: no {path}: the gradient-flow picture needs matplotlib: pip install 'hookgrad[plot]'"
)


def test_demo_without_matplotlib_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """matplotlib missing: the demo trains and writes its log and loss.csv, and a warning
    names the plot extra instead of the picture."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    run = _demo(tmp_path, "--steps", "3")
    assert run.result.stderr.splitlines() == [_NO_MATPLOTLIB.format(path=run.out / PICTURE)]
    assert sorted(p.name for p in run.out.iterdir()) == ["events.jsonl", "loss.csv"]
    assert run.result.output.splitlines()[-2:] == [
        f"wrote {run.out / 'events.jsonl'}",
        f"wrote {run.out / 'loss.csv'}",
    ]


def test_report_without_matplotlib_says_how_to_install_it(mlp_run: Run, tmp_path: Path) -> None:
    """A hookgrad process where matplotlib cannot be imported: report prints the table and
    the findings, exit 0, and a warning naming the plot extra instead of the picture."""
    block = "import sys; sys.modules['matplotlib'] = None; from hookgrad.cli import main; main()"
    shutil.copy(mlp_run.out / "events.jsonl", tmp_path / "events.jsonl")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKGRAD_")}
    done = subprocess.run(
        [sys.executable, "-c", block, "report", "events.jsonl"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [_NO_MATPLOTLIB.format(path=PICTURE)]
    assert "module  steps" in done.stdout and "grad_clip: clipped " in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.jsonl"]


def test_report_skips_a_cut_last_line_naming_it(tmp_path: Path) -> None:
    """A last line cut by a kill warns with FILE:LINE; the lines before it are drawn."""
    good = {
        "plugin": "grad_stats",
        "kind": "module_grad",
        "step": 0,
        "module_name": "fc",
        "data": {
            "stage": "pre_clip",
            "norm": 0.5,
            "max_abs": 0.1,
            "nonfinite": 0,
            "zero_fraction": 0.0,
            "numel": 4,
        },
    }
    log = tmp_path / "events.jsonl"
    log.write_text(f"{json.dumps(good)}\n\n{json.dumps(good)}\n{json.dumps(good)[:40]}")
    result = _invoke(["report", "events.jsonl"], tmp_path)
    assert result.exit_code == 0, result.output + result.stderr
    assert result.stderr.splitlines() == [
        "warning: events.jsonl:4: not JSON (Unterminated string starting at: column 34); "
        "last line skipped (cut by a kill?)",
    ]
    titles = _titles((tmp_path / "gradient_flow.svg").read_bytes())
    assert _of(titles, "module-norm") == ["the gradient norm of module 'fc'"]


def test_report_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    """A missing EVENTS file exits 2 with click's message naming it."""
    result = _invoke(["report", "nope.jsonl"], tmp_path)
    assert result.exit_code == 2
    assert "File 'nope.jsonl' does not exist." in result.stderr


def test_report_of_a_log_without_records_fails(tmp_path: Path) -> None:
    """A log with no JSON object at all exits 1 saying so, after the line warnings."""
    (tmp_path / "events.jsonl").write_text("\n  \ngarbage\n")
    result = _invoke(["report", "events.jsonl"], tmp_path)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == "Error: events.jsonl: no event records"


# --------------------------------------------------------------------------------------------
# The picture's pieces, on synthetic records
# --------------------------------------------------------------------------------------------


def _record(
    plugin: str, kind: str, step: int, module: str | None = None, **data: Any
) -> dict[str, Any]:
    return {"plugin": plugin, "kind": kind, "step": step, "module_name": module, "data": data}


def _synthetic() -> list[dict[str, Any]]:
    """Three steps: grad_stats norms, a clip, a loss scale; a NaN at the second step."""
    records = []
    for step, scale in enumerate([256.0, 256.0, 128.0]):
        records.append(_record("grad_scale", "scale", step, scale=scale, found_inf=step == 1))
        if step == 1:
            records.append(
                _record(
                    "nan_guard",
                    "nonfinite",
                    1,
                    "enc.fc",
                    phase="backward",
                    tensor="grad_input[0]",
                    role="producer",
                    nan=1,
                    inf=0,
                    numel=8,
                )
            )
            records.append(_record("grad_scale", "skip_step", 1, reason="overflow", scale=256.0))
            records.append(_record("grad_scale", "backoff", 1, scale_from=256.0, scale_to=128.0))
            continue
        for name, norm in (("enc.fc", 2.0 / (step + 1)), ("head", 0.5)):
            records.append(
                _record("grad_stats", "module_grad", step, name, stage="pre_clip", norm=norm)
            )
        records.append(
            _record(
                "grad_clip",
                "clip",
                step,
                mode="norm",
                pre_norm=2.0,
                post_norm=1.0,
                threshold=1.0,
                clipped=True,
            )
        )
    records.append({"event": "plugin_error", "level": "error", "plugin": "nan_guard", "step": 2})
    return records


def test_gradient_flow_pulls_series_from_records() -> None:
    """Steps shown from 1; module norms, clip norms, log2 scale and the markers."""
    flow = gradient_flow(plugin_entries(_synthetic()))
    assert flow.modules == {"enc.fc": [(1, 2.0), (3, 2.0 / 3)], "head": [(1, 0.5), (3, 0.5)]}
    assert (flow.pre_clip, flow.post_clip, flow.clipped) == (
        [(1, 2.0), (3, 2.0)],
        [(1, 1.0), (3, 1.0)],
        [(1, 2.0), (3, 2.0)],
    )
    assert flow.log2_scale == [(1, 8.0), (2, 8.0), (3, 7.0)]
    assert [(m.step, m.kind, m.label) for m in flow.markers] == [
        (2, "skip_step", "skip: overflow, from 'enc.fc'"),
        (2, "backoff", "backoff"),
    ]


def test_svg_is_deterministic_and_survives_a_json_round_trip() -> None:
    """Same records, same bytes (no date, fixed ids); records read back from JSON lines draw
    the same picture, with a tooltip for each line and marker."""
    records = _synthetic()
    svg = render(gradient_flow(plugin_entries(records)), "svg")
    assert render(gradient_flow(plugin_entries(json.loads(json.dumps(records)))), "svg") == svg
    assert b"<dc:date>" not in svg
    titles = _titles(svg)
    assert _of(titles, "skip_step") == ["step 2: skip: overflow, from 'enc.fc'"]
    assert _of(titles, "backoff") == ["step 2: backoff"]
    assert _of(titles, "module-norm") == [
        "the gradient norm of module 'enc.fc'",
        "the gradient norm of module 'head'",
    ]


def test_pictures_drawn_in_threads_are_the_same_bytes() -> None:
    """Four threads render at once: each SVG equals the one drawn alone, and matplotlib's
    global settings are as they were after."""
    flow = gradient_flow(plugin_entries(_synthetic()))
    alone = render(flow, "svg")
    before = dict(matplotlib.rcParams)
    with ThreadPoolExecutor(4) as pool:
        drawn = list(pool.map(lambda fmt: render(flow, fmt), ["svg", "png"] * 4))
    assert drawn[::2] == [alone] * 4 and len(set(drawn[1::2])) == 1
    assert dict(matplotlib.rcParams) == before


def test_picture_plots_the_records_numbers() -> None:
    """The lines hold the records' norms at the shown steps; clipped steps are dots on the
    pre-clip line; the loss scale is a staircase of its log2 on the right axis."""
    picture = draw(gradient_flow(plugin_entries(_synthetic())))

    def points(gid: str) -> list[tuple[float, float]]:
        line = picture.artist(gid)
        return list(zip(line.get_xdata(), line.get_ydata(), strict=True))

    assert points("module-norm-0") == [(1, 2.0), (3, 2.0 / 3)]
    assert points("module-norm-1") == [(1, 0.5), (3, 0.5)]
    assert points("clip-pre") == [(1, 2.0), (3, 2.0)]
    assert points("clip-post") == [(1, 1.0), (3, 1.0)]
    assert picture.artist("clipped").get_offsets().tolist() == [[1, 2.0], [3, 2.0]]
    scale = picture.artist("loss-scale")
    assert (points("loss-scale"), scale.get_drawstyle()) == ([(1, 8), (2, 8), (3, 7)], "steps-post")
    layers, steps, right = picture.figure.axes
    assert scale.axes is right and right.get_ylim() == (6.5, 8.5)
    assert (layers.get_ylim(), steps.get_ylim()) == ((0.1, 10.0), (1.0, 10.0))


def test_nonfinite_tooltip_lists_twenty_steps_and_counts_the_rest() -> None:
    """25 NaN norms of one layer: one row of triangles, a tooltip naming the first 20 steps."""
    records = [
        _record("grad_stats", "module_grad", step, "fc", stage="pre_clip", norm=math.nan)
        for step in range(25)
    ]
    picture = draw(gradient_flow(plugin_entries(records)))
    steps = ", ".join(f"nan at step {step}" for step in range(1, 21))
    assert picture.titles["nonfinite-0"] == f"the gradient norm of module 'fc': {steps} and 5 more"
    assert list(picture.artist("nonfinite-0").get_xdata()) == list(range(1, 26))


@pytest.mark.parametrize(("modules", "height"), [(2, 665), (20, 835)])
def test_png_is_a_png_of_the_figures_size(modules: int, height: int) -> None:
    """A PNG 1000 pixels wide; a long legend (20 layers) makes the layers panel taller."""
    records = [
        _record("grad_stats", "module_grad", 0, f"layer{i}", stage="pre_clip", norm=1.0)
        for i in range(modules)
    ]
    picture = draw(gradient_flow(plugin_entries(records)))
    assert tuple(picture.figure.get_size_inches() * DPI) == pytest.approx((1000, height))
    png = render(gradient_flow(plugin_entries(records)), "png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    assert struct.unpack(">II", png[16:24]) == (1000, height)


def test_svg_of_records_without_plugin_data_says_so() -> None:
    """A log with nothing to draw still gives a valid SVG, with a note in each panel."""
    entries = plugin_entries([_record("demo", "train", 0, loss=1.0)])
    titles = _titles(render(gradient_flow(entries), "svg"))
    assert titles == {
        "note-layers": "no grad_stats module_grad records in this log",
        "note-steps": "no grad_clip or grad_scale records in this log",
    }


def test_findings_say_who_skipped_the_step() -> None:
    """The guard's producer, and which plugin skipped the step (or that it was taken)."""
    records = _synthetic()
    assert findings(plugin_entries(records)) == [
        "nan_guard: step 2: non-finite grad_input[0] produced by module 'enc.fc' (backward); "
        "step skipped by grad_scale (overflow)",
        "grad_clip: clipped 2 of 2 steps",
        "grad_scale: loss scale 256 -> 128 (0 growths, 1 backoff, 1 skip)",
    ]
    guard_skip = _record(
        "nan_guard",
        "skip_step",
        1,
        reason="nonfinite",
        module="enc.fc",
        phase="backward",
        tensor="grad_input[0]",
    )
    no_scaler = [r for r in records if r.get("plugin") == "nan_guard"]
    assert findings(plugin_entries([*no_scaler, guard_skip]))[0] == (
        "nan_guard: step 2 skipped: non-finite grad_input[0] produced by module 'enc.fc' (backward)"
    )
    assert findings(plugin_entries(no_scaler))[0].endswith("; the step was taken")


# --------------------------------------------------------------------------------------------
# The demo's data and NaN injection
# --------------------------------------------------------------------------------------------


def test_glyph_digits_are_deterministic_and_balanced() -> None:
    """Same seed, same images; five classes interleaved; shapes for Conv2d."""
    x, y = glyph_digits(4, seed=3)
    again, _ = glyph_digits(4, seed=3)
    assert x.shape == (20, 1, 8, 8) and x.dtype.name == "float32"
    assert y.tolist() == [0, 1, 2, 3, 4] * 4
    assert (x == again).all()


def test_nan_injection_parses_and_checks() -> None:
    """'30:2' parses; check accepts a module of the model and a step in range."""
    injection = NanInjection.parse(" 30 : 2 ")
    assert injection == NanInjection(30, "2")
    injection.check(make_task("mlp", 0), steps=30)
    with pytest.raises(ValueError, match="no module '4' in the cnn model; modules: 0 \\(Conv2d\\)"):
        NanInjection(3, "4").check(make_task("cnn", 0), steps=30)


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_demo_trains_the_same_run_on_torch(model: str) -> None:
    """make_task(engine="torch") starts from the hookgrad model's weights and data, so both
    engines train the same losses (float32 tolerance), a NaN injection included."""
    pytest.importorskip("torch")
    losses = {}
    for engine in ("hookgrad", "torch"):
        task = make_task(model, seed=3, engine=engine)
        assert type(task.model).__module__.split(".")[0] == engine
        injection = NanInjection(4, "0")
        losses[engine] = [r.loss for r in run(task, 8, 4, inject_nan=injection)]
    assert math.isnan(losses["torch"][4]) and math.isnan(losses["hookgrad"][4])
    assert losses["torch"] == pytest.approx(losses["hookgrad"], rel=1e-5, nan_ok=True)


def test_demo_on_torch_writes_the_records_of_the_hookgrad_run(mlp_run: Run, tmp_path: Path) -> None:
    """``--engine torch``: the same data, weights and config give the same records (plugin,
    kind, step, module) and the same verdict on the injected NaN as the hookgrad run."""
    pytest.importorskip("torch")
    args = ("--steps", "30", "--log-every", "10", "--inject-nan", "20:2", "--engine", "torch")
    torch_run = _demo(tmp_path, *args)

    def keys(run: Run) -> list[tuple[Any, ...]]:
        return [
            (r["plugin"], r["kind"], r["step"], r["module_name"])
            for r in run.records
            if "plugin" in r
        ]

    assert keys(torch_run) == keys(mlp_run)
    assert (
        "nan_guard: step 20: non-finite grad_input[0] produced by module '2' (backward); "
        "step skipped by grad_scale (overflow)"
    ) in torch_run.result.output.splitlines()


def test_demo_engine_torch_without_torch_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--engine torch`` where torch cannot be imported fails with the install command."""
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    monkeypatch.setattr("hookgrad.engines._BUILT", {})
    result = _invoke(["demo", "--engine", "torch", "--steps", "2"], tmp_path)
    assert result.exit_code in (1, 2), result.output  # 2: found by the config check
    assert "torch" in result.output and "pip install 'hookgrad[torch]'" in result.output


def test_findings_of_spike_guard_records_one_line_each() -> None:
    """A clipped spike, a non-finite one skipped and a constant-signal spike: one sentence each,
    steps counted from 1, the clip's factor and 'off the scale' for a z of a zero spread."""
    stats = {"reason": "spike", "mean": 1.5, "std": 0.25}
    records = [
        {"plugin": "spike_guard", "kind": "spike_clipped", "step": 9,
         "data": {**stats, "signal": "grad_norm", "value": 7.0, "z": 22.0, "scale": 0.3125}},
        {"plugin": "spike_guard", "kind": "skip_step", "step": 11,
         "data": {**stats, "signal": "loss", "value": math.inf, "z": None}},
        {"plugin": "spike_guard", "kind": "skip_step", "step": 12,
         "data": {**stats, "std": 0.0, "signal": "loss", "value": 2.0, "z": None}},
    ]  # fmt: skip
    assert findings(plugin_entries(records)) == [
        "spike_guard: step 10: grad_norm 7 is a spike (z 22; mean 1.5, std 0.25); "
        "gradients scaled by 0.3125",
        "spike_guard: step 12 skipped: loss inf is not finite",
        "spike_guard: step 13 skipped: loss 2 is a spike (z off the scale; mean 1.5, std 0)",
    ]


def test_findings_of_a_health_report_name_each_parameter() -> None:
    """A health_report with every kind: a line per dead weight and per kind, in that order."""
    data = {
        "unused": ["b.weight", "b.bias"],
        "dead": [{"module": "0", "param": "0.weight", "fraction": 0.375}],
        "frozen": [],
        "exploding": ["2.weight"],
    }
    records = [{"plugin": "param_health", "kind": "health_report", "step": 5, "data": data}]
    assert findings(plugin_entries(records)) == [
        "param_health: 37.5% of the units of 0.weight (module '0') are dead",
        "param_health: unused: b.weight, b.bias",
        "param_health: exploding: 2.weight",
    ]
