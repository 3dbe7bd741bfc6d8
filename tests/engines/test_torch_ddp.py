"""The torch engine's loop points under DistributedDataParallel: two real gloo processes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

WORKER = Path(__file__).with_name("_ddp_worker.py")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run_ranks(world: int = 2, *extra: str) -> list[dict[str, Any]]:
    """Start ``world`` ranks on loopback; each one's JSON line (all must end, in time). A port
    taken by another process between choosing and binding it is retried with another."""
    for _ in range(3):
        outputs = _attempt(world, free_port(), extra)
        if outputs is not None:
            return outputs
    raise AssertionError("no free loopback port for the ranks after 3 tries")


def _attempt(world: int, port: int, extra: tuple[str, ...]) -> list[dict[str, Any]] | None:
    ranks = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(rank), str(world), str(port), *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(world)
    ]
    outputs = []
    try:
        for process in ranks:
            out, err = process.communicate(timeout=120)
            if process.returncode != 0 and "Address already in use" in err:
                return None
            assert process.returncode == 0, err
            outputs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for process in ranks:
            process.kill()
    return outputs


def test_backward_end_sees_averaged_gradients_and_a_veto_holds_on_every_rank() -> None:
    """Rank r feeds inputs r + 1: the observer sees the average (6 = (4 + 8) / 2) on both ranks;
    a vetoed step leaves both ranks' weights as they were, an allowed one moves them alike."""
    first, second = run_ranks()
    averaged = [[6.0, 6.0, 6.0], [6.0, 6.0, 6.0]]
    assert first["seen"] == second["seen"] == [averaged]
    for rank in (first, second):
        assert rank["vetoed"] == rank["before"]
        assert rank["taken"] != rank["before"]
    assert first["taken"] == second["taken"]


def test_each_rank_writes_its_own_event_log(tmp_path: Path) -> None:
    """One events.jsonl in the config, two gloo ranks: events.rank0.jsonl and events.rank1.jsonl,
    each holding its own rank's records only."""
    run_ranks(2, str(tmp_path))
    for rank in (0, 1):
        lines = (tmp_path / f"events.rank{rank}.jsonl").read_text().splitlines()
        assert [json.loads(line)["data"] for line in lines] == [{"rank": rank}]
    assert not (tmp_path / "events.jsonl").exists()
