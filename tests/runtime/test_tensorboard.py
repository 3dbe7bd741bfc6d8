"""``[events] tensorboard``: TensorBoard files hold the JSON-lines log's values, read back with
TensorBoard's own event reader; killed runs keep every flushed step; ``hookgrad report
--tensorboard`` writes the same files after the fact; a missing extra is a named ConfigError.
"""

from __future__ import annotations

import importlib.util
import math
import signal
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytest.importorskip("tensorboardX")
event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")

from hookgrad.cli import main  # noqa: E402
from hookgrad.runtime import ConfigError, Runtime, read_events  # noqa: E402

# Training under the given events config: grad_stats (with histograms), grad_clip, dynamic
# loss scaling, spike_guard (skip), and the loss of step 12 times 1000. Prints "done N" after
# optimizer step N; argv: events table as JSON, steps, then "kill" to SIGKILL itself after.
TRAIN = textwrap.dedent(
    """
    import json, os, signal, sys
    import hookgrad as torch
    from hookgrad import nn
    from hookgrad.runtime import Runtime

    events, steps, death = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(32, 4), torch.randn(32, 1)
    config = {
        "events": events,
        "plugins": {
            "grad_scale": {"mode": "dynamic", "init_scale": 2.0**20, "growth_interval": 4},
            "grad_stats": {"every_n_steps": 1, "histogram_bins": 6, "summary": False},
            "grad_clip": {"max_norm": 0.5},
            "spike_guard": {"warmup_steps": 5},
        },
    }
    with Runtime(config, environ={}):
        for step in range(steps):
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            (loss * 1000 if step == 12 else loss).backward()
            opt.step()
            print("done", step, flush=True)
            if death == "kill" and step == steps - 1:
                os.kill(os.getpid(), signal.SIGKILL)
    """
)


def _train(tmp_path: Path, events: dict[str, Any], steps: int, death: str = "none") -> str:
    import json

    script = tmp_path / "train.py"
    script.write_text(TRAIN, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), json.dumps(events), str(steps), death],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
        timeout=120,
    )
    expected = -signal.SIGKILL if death == "kill" else 0
    assert done.returncode == expected, done.stderr
    return done.stdout


def _accumulator(logdir: Path) -> Any:
    """TensorBoard's own reader over ``logdir``, keeping every value (no sampling)."""
    assert list(logdir.glob("events.out.tfevents.*")), f"no event file in {logdir}"
    everything = {kind: 0 for kind in (event_accumulator.SCALARS, event_accumulator.HISTOGRAMS)}
    reader = event_accumulator.EventAccumulator(str(logdir), size_guidance=everything)
    reader.Reload()
    return reader


def _scalars(logdir: Path) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value)] of every scalar in the event files in ``logdir``."""
    reader = _accumulator(logdir)
    return {
        tag: [(e.step, e.value) for e in reader.Scalars(tag)]
        for tag in reader.Tags()[event_accumulator.SCALARS]
    }


def _histograms(logdir: Path) -> dict[str, list[tuple[int, list[float]]]]:
    """tag -> [(step, bucket counts)] of every histogram in the event files in ``logdir``."""
    reader = _accumulator(logdir)
    return {
        tag: [(e.step, list(e.histogram_value.bucket)) for e in reader.Histograms(tag)]
        for tag in reader.Tags()[event_accumulator.HISTOGRAMS]
    }


def _expected(log: Path) -> dict[str, list[tuple[int, float]]]:
    """The tags the docs promise, computed from the JSON-lines log record by record."""
    want: dict[str, list[tuple[int, float]]] = defaultdict(list)
    skips = 0
    for _, r in read_events(log):
        plugin, kind, step, data = r.get("plugin"), r.get("kind"), r.get("step"), r.get("data")
        if kind == "skip_step":
            skips += 1
            want["skipped_steps"].append((step, skips))
        if (plugin, kind) == ("grad_stats", "module_grad") and data["stage"] == "pre_clip":
            want[f"grad_norm/{r['module_name']}"].append((step, data["norm"]))
        if (plugin, kind) == ("grad_clip", "clip") and r["module_name"] is None:
            want["grad_norm/total/pre_clip"].append((step, data["pre_norm"]))
            want["grad_norm/total/post_clip"].append((step, data["post_norm"]))
        if (plugin, kind) == ("grad_scale", "scale"):
            want["loss_scale"].append((step, data["scale"]))
        if plugin == "spike_guard" and data.get("z") is not None:
            want[f"spike/{data['signal']}/z"].append((step, data["z"]))
    return dict(want)


def _same(got: dict[str, list[tuple[int, float]]], want: dict[str, list[tuple[int, float]]]):
    assert sorted(got) == sorted(want)
    for tag, points in want.items():
        assert [s for s, _ in got[tag]] == [s for s, _ in points], tag
        for (_, a), (_, b) in zip(got[tag], points, strict=True):
            assert a == pytest.approx(b, rel=1e-6) or (math.isnan(a) and math.isnan(b)), tag


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20 steps with a JSON-lines log and TensorBoard files (histograms every 5 steps)."""
    tmp = tmp_path_factory.mktemp("tb")
    events = {"jsonl": "events.jsonl", "tensorboard": "runs/a", "histogram_every": 5}
    _train(tmp, events, 20)
    return tmp


def test_tensorboard_scalars_equal_the_json_lines_log(run: Path) -> None:
    """Every promised tag holds the log's values at the log's steps: module and total norms,
    the loss scale (it grows), the spike's z and the running count of skipped steps."""
    got, want = _scalars(run / "runs" / "a"), _expected(run / "events.jsonl")
    assert {"grad_norm/0", "grad_norm/2", "loss_scale", "spike/loss/z"} <= set(want)
    assert len({v for _, v in want["loss_scale"]}) > 1  # the scale moved
    assert want["skipped_steps"][-1][1] >= 1  # the spike at step 12 was skipped
    _same(got, want)


def test_tensorboard_histograms_every_n_steps_hold_grad_stats_counts(run: Path) -> None:
    """grad/<parameter> histograms on steps 0, 5, 10, 15 with grad_stats' bin counts."""
    histograms = _histograms(run / "runs" / "a")
    counts = {
        (r["data"]["param"], r["step"]): r["data"]["histogram"]["counts"]
        for _, r in read_events(run / "events.jsonl")
        if r.get("kind") == "param_grad" and r["data"]["stage"] == "pre_clip"
    }
    assert sorted(histograms) == ["grad/0.bias", "grad/0.weight", "grad/2.bias", "grad/2.weight"]
    for tag, points in histograms.items():
        assert [step for step, _ in points] == [0, 5, 10, 15]
        for step, buckets in points:
            assert buckets == counts[(tag.removeprefix("grad/"), step)]


def test_report_writes_the_same_tensorboard_files_after_the_fact(run: Path, tmp_path: Path) -> None:
    """hookgrad report LOG --tensorboard DIR: the same tags, steps and values as the live run."""
    out = tmp_path / "again"
    args = ["report", str(run / "events.jsonl"), "--out", str(tmp_path / "p.svg")]
    result = CliRunner().invoke(main, [*args, "--tensorboard", str(out), "--histogram-every", "5"])
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.output
    assert _scalars(out) == _scalars(run / "runs" / "a")
    assert _histograms(out) == _histograms(run / "runs" / "a")


def test_a_killed_run_keeps_every_step_it_finished_in_tensorboard(tmp_path: Path) -> None:
    """SIGKILL right after step 7: TensorBoard has steps 0-7 of every per-step tag."""
    out = _train(tmp_path, {"tensorboard": "runs/k"}, 8, death="kill")
    assert out.split() == [w for i in range(8) for w in ("done", str(i))]
    scalars = _scalars(tmp_path / "runs" / "k")
    for tag in ("grad_norm/0", "grad_norm/total/pre_clip", "loss_scale"):
        assert [step for step, _ in scalars[tag]] == list(range(8)), tag


def test_tensorboard_without_tensorboardx_is_a_config_error_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No tensorboardX: ConfigError naming [events] tensorboard and the pip command; no files."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "tensorboardX" else real(name, *a),
    )
    with pytest.raises(ConfigError) as raised:
        Runtime({"events": {"tensorboard": "runs/x"}}, environ={}, cwd=tmp_path)
    assert raised.value.table == "events" and raised.value.key == "tensorboard"
    assert "events.tensorboard = 'runs/x'" in str(raised.value)
    assert "pip install 'hookgrad[tensorboard]'" in str(raised.value)
    assert not (tmp_path / "runs").exists()


def test_tensorboard_path_that_is_a_file_is_a_config_error(tmp_path: Path) -> None:
    """[events] tensorboard naming a file: ConfigError naming the key and the file."""
    (tmp_path / "runs").write_text("not a directory")
    with pytest.raises(ConfigError, match=r"events\.tensorboard = 'runs'.* is a file"):
        Runtime({"events": {"tensorboard": "runs"}}, environ={}, cwd=tmp_path)
