"""The torch engine's loop points under DistributedDataParallel: two real gloo processes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from types import SimpleNamespace
from typing import IO, Any

import pytest

from hookgrad.engines import engine_named

pytest.importorskip("torch")

WORKER = Path(__file__).with_name("_ddp_worker.py")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run_ranks(world: int, scenario: str, *extra: str) -> list[dict[str, Any]]:
    """Start ``world`` ranks of a worker ``scenario`` on loopback; each one's JSON line (all
    must end, in time). A port taken by another process between choosing and binding it is
    retried with another."""
    for _ in range(3):
        outputs = _attempt(world, free_port(), (scenario, *extra))
        if outputs is not None:
            return outputs
    raise AssertionError("no free loopback port for the ranks after 3 tries")


def _attempt(world: int, port: int, extra: tuple[str, ...]) -> list[dict[str, Any]] | None:
    """Run the ranks once; None if the port was taken. Each rank writes to files, not pipes:
    a rank blocked on a full pipe that the test reads only later would hang the others."""
    with ExitStack() as files:
        streams = [
            (files.enter_context(tempfile.TemporaryFile("w+")),
             files.enter_context(tempfile.TemporaryFile("w+")))
            for _ in range(world)
        ]  # fmt: skip
        ranks = [
            subprocess.Popen(
                [sys.executable, str(WORKER), str(rank), str(world), str(port), *extra],
                stdout=out,
                stderr=err,
                text=True,
            )
            for rank, (out, err) in enumerate(streams)
        ]
        try:
            return [_output(process, *files) for process, files in zip(ranks, streams)]
        except _PortTaken:
            return None
        finally:
            for process in ranks:
                process.kill()


class _PortTaken(Exception):
    """A rank could not bind the loopback port: another process took it meanwhile."""


def _output(process: subprocess.Popen[str], out: IO[str], err: IO[str]) -> dict[str, Any]:
    """The last JSON line a rank printed, once it ended (in time, with success)."""
    process.wait(timeout=120)
    out.seek(0)
    err.seek(0)
    error = err.read()
    if process.returncode != 0 and "Address already in use" in error:
        raise _PortTaken
    assert process.returncode == 0, error
    return dict(json.loads(out.read().strip().splitlines()[-1]))


def test_ranks_printing_more_than_a_pipe_holds_all_end() -> None:
    """Every rank prints 200 kB before its final barrier: none blocks on its output while the
    launcher waits for another, so all end and their outputs arrive whole."""
    outputs = run_ranks(2, "loud")
    assert [(o["rank"], len(o["filler"])) for o in outputs] == [(0, 200_000), (1, 200_000)]


def test_backward_end_sees_averaged_gradients_and_a_veto_holds_on_every_rank() -> None:
    """Rank r feeds inputs r + 1: the observer sees the average (6 = (4 + 8) / 2) on both ranks;
    a vetoed step leaves both ranks' weights as they were, an allowed one moves them alike."""
    first, second = run_ranks(2, "observe")
    averaged = [[6.0, 6.0, 6.0], [6.0, 6.0, 6.0]]
    assert first["seen"] == second["seen"] == [averaged]
    for rank in (first, second):
        assert rank["vetoed"] == rank["before"]
        assert rank["taken"] != rank["before"]
    assert first["taken"] == second["taken"]


def test_each_rank_writes_its_own_event_log(tmp_path: Path) -> None:
    """One events.jsonl in the config, two gloo ranks: events.rank0.jsonl and events.rank1.jsonl,
    each holding its own rank's records only, each record stamped with that rank."""
    run_ranks(2, "logs", str(tmp_path))
    for rank in (0, 1):
        lines = (tmp_path / f"events.rank{rank}.jsonl").read_text().splitlines()
        records = [json.loads(line) for line in lines]
        assert [(r["data"], r["rank"]) for r in records] == [({"rank": rank}, rank)]
    assert not (tmp_path / "events.jsonl").exists()


@pytest.mark.parametrize("name", ["hookgrad", "torch"])
def test_outside_a_distributed_run_the_verdict_is_the_processes_own(name: str) -> None:
    """No process group: agree_on_step hands back this process's verdict and would raise on
    any collective (none is initialised), on both engines."""
    engine = engine_named(name)
    optimizer = SimpleNamespace(param_groups=[])
    assert engine.agree_on_step(optimizer, "guard", failed=False) == "guard"
    assert engine.agree_on_step(optimizer, None, failed=False) is None


def post_records(folder: Path, rank: int) -> list[dict[str, Any]]:
    """The ``veto`` plugin's ``post`` records in rank ``rank``'s event log, in order."""
    lines = (folder / f"events.rank{rank}.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    return [r for r in records if (r.get("plugin"), r.get("kind")) == ("veto", "post")]


def test_a_veto_on_one_rank_skips_the_step_on_every_rank(tmp_path: Path) -> None:
    """Rank 1's plugin vetoes step 2: both ranks skip it (weights unchanged there, identical on
    both ranks after every step) and both post events say skipped, vetoed_by "veto@rank1"; each
    rank's records carry its rank."""
    first, second = run_ranks(2, "veto", str(tmp_path))
    assert first["weights"] == second["weights"]
    weights = first["weights"]
    assert weights[2] == weights[1]
    assert weights[1] != weights[0] and weights[3] != weights[2]
    for rank in (0, 1):
        assert {r["rank"] for r in post_records(tmp_path, rank)} == {rank}
        posts = [(r["step"], r["data"]) for r in post_records(tmp_path, rank)]
        assert posts == [
            (0, {"skipped": False, "vetoed_by": None}),
            (1, {"skipped": False, "vetoed_by": None}),
            (2, {"skipped": True, "vetoed_by": "veto@rank1"}),
            (3, {"skipped": False, "vetoed_by": None}),
        ]


def test_a_plugin_raising_on_one_rank_stops_every_rank_without_a_hang(tmp_path: Path) -> None:
    """Rank 1's plugin raises in step_pre of step 1: rank 1 raises its PluginError, rank 0 a
    RuntimeError naming rank 1, both within the run's timeout; neither took step 1."""
    first, second = run_ranks(2, "raise", str(tmp_path), "raise", "failure")
    assert (first["error"], first["message"]) == (
        "RuntimeError",
        "optimizer step abandoned: a plugin failed on rank 1",
    )
    assert second["error"] == "PluginError[ValueError]"  # also a ValueError, as raised
    assert "rank 1 cannot go on" in second["message"]
    assert len(first["weights"]) == len(second["weights"]) == 1
    assert first["weights"] == second["weights"]


def test_a_plugin_disabled_on_one_rank_leaves_no_rank_waiting(tmp_path: Path) -> None:
    """on_error "disable": rank 1's plugin fails in step_pre of step 1 and is disabled there
    only, its last step_pre listener gone; both ranks still agree on every step and take all
    of them, with the same weights."""
    first, second = run_ranks(2, "raise", str(tmp_path), "disable", "failure")
    assert first["error"] is None and second["error"] is None
    assert len(first["weights"]) == 4
    assert first["weights"] == second["weights"]


def test_a_plugin_abort_on_one_rank_stops_every_rank_whatever_on_error(tmp_path: Path) -> None:
    """A PluginAbort (a verdict, not a failure) under on_error "warn" on rank 1: rank 1 raises
    it as raised, rank 0 the RuntimeError naming rank 1; neither took step 1."""
    first, second = run_ranks(2, "raise", str(tmp_path), "warn", "abort")
    assert (first["error"], first["message"]) == (
        "RuntimeError",
        "optimizer step abandoned: a plugin failed on rank 1",
    )
    assert (second["error"], second["message"]) == ("StopTraining", "rank 1 stops")
    assert first["weights"] == second["weights"] and len(first["weights"]) == 1


def test_the_agreed_verdict_is_the_weightiest_then_the_lowest_rank() -> None:
    """Encoded per rank and reduced by MAX: a failure beats a veto beats a step, and among
    equal verdicts the lowest rank decides (ranks 1 and 3 veto, 2 fails: rank 2's failure)."""
    from hookgrad.engines.torch._agreement import FAILED, STEP, VETOED, _decode, _encode

    world = 4
    for verdicts, agreed in [
        ([VETOED, STEP, STEP, STEP], (VETOED, 0)),
        ([STEP, VETOED, STEP, VETOED], (VETOED, 1)),
        ([STEP, VETOED, FAILED, VETOED], (FAILED, 2)),
        ([FAILED, STEP, STEP, FAILED], (FAILED, 0)),
    ]:
        best = max(_encode(v, rank, world) for rank, v in enumerate(verdicts))
        assert _decode(best, world) == agreed
    assert _decode(max(_encode(STEP, rank, world) for rank in range(world)), world)[0] == STEP


EXAMPLE_CONFIG = Path(__file__).resolve().parents[2] / "examples" / "hookgrad.toml"
AVERAGED = {("grad_scale", "skip_step"), ("grad_scale", "backoff"), ("grad_scale", "scale"),
            ("grad_clip", "clip"), ("grad_stats", "param_grad")}  # fmt: skip
"""Records made from the averaged gradients (or the agreed steps): the same on every rank."""


def rank_records(folder: Path, rank: int) -> list[dict[str, Any]]:
    """The plugin records of rank ``rank``'s event log, in order."""
    lines = (folder / f"events.rank{rank}.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if "plugin" in r]


def test_ddp_under_the_example_config_keeps_the_ranks_identical(tmp_path: Path) -> None:
    """The demo MLP in DDP under examples/hookgrad.toml, a data shard per rank, a NaN in rank
    1's module "2" at one step: both ranks skip that step and back the loss scale off alike,
    clip alike, and end with the same parameters bit for bit; each log holds its own rank's
    records, module names without "module."; only rank 1's nan_guard names module "2"."""
    steps, nan_step = 12, 5
    first, second = run_ranks(
        2, "example", str(EXAMPLE_CONFIG), str(tmp_path), str(steps), str(nan_step)
    )
    assert first["initial"] == second["initial"]
    assert first["final"] == second["final"]
    assert all(first["final"][name] != first["initial"][name] for name in first["final"])
    logs = [rank_records(tmp_path, rank) for rank in (0, 1)]
    for rank, records in enumerate(logs):
        assert {r["rank"] for r in records} == {rank}
        assert not [r for r in records if (r["module_name"] or "").startswith("module")]
    averaged = [
        [(r["step"], r["plugin"], r["kind"], r["module_name"], r["data"]) for r in records
         if (r["plugin"], r["kind"]) in AVERAGED]
        for records in logs
    ]  # fmt: skip
    assert averaged[0] == averaged[1]
    decisions = [(step, kind) for step, plugin, kind, *_ in averaged[0] if kind != "scale"]
    skipped = nan_step - 1  # runtime steps count from 0
    assert [(s, k) for s, k in decisions if k != "param_grad"] == [
        *((step, "clip") for step in range(skipped)),
        (skipped, "skip_step"),
        (skipped, "backoff"),
        *((step, "clip") for step in range(skipped + 1, steps)),
    ]
    guards = [[(r["step"], r["module_name"], r["data"]["role"]) for r in records
               if r["plugin"] == "nan_guard"] for records in logs]  # fmt: skip
    assert guards[0] == []
    assert (skipped, "2", "producer") in guards[1]
