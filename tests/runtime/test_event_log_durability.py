"""The event log under faults: killed runs keep every completed step, writers never mix lines.

Crash cases run real training in a subprocess and kill it (SIGKILL, SIGTERM, ``os._exit``);
concurrency cases use real threads and a real ``fork``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from hookgrad.runtime import JsonLinesSink, Runtime

# A training script: the demo's model and plugins, printing "done N" once step N has ended.
# argv: log path, durability, steps, then how to die after the last step ("kill", "term",
# "exit", "hang" waits to be killed by the test, "none" ends normally).
TRAIN = textwrap.dedent(
    """
    import os, signal, sys, time
    import hookgrad as torch
    from hookgrad import nn
    from hookgrad.runtime import Runtime

    path, durability, steps, death = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(32, 4), torch.randn(32, 1)
    config = {
        "events": {"jsonl": path, "durability": durability},
        "plugins": {"grad_stats": {"every_n_steps": 1}, "grad_clip": {"max_norm": 0.5}},
    }
    with Runtime(config, environ={}):
        for step in range(steps):
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            print("done", step, flush=True)
        if death == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif death == "term":
            os.kill(os.getpid(), signal.SIGTERM)
        elif death == "exit":
            os._exit(3)
        elif death == "hang":
            time.sleep(60)
    """
)


def train(tmp_path: Path, log: Path, death: str, steps: int = 5, durability: str = "step"):
    script = tmp_path / "train.py"
    script.write_text(TRAIN, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script), str(log), durability, str(steps), death],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
        timeout=120,
    )


def strict_lines(path: Path) -> list[dict[str, Any]]:
    """Every line parsed by an RFC 8259 parser (no NaN/Infinity tokens), cut lines failing."""

    def refuse(token: str) -> None:
        raise ValueError(f"not RFC 8259 JSON: {token}")

    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n")
    return [json.loads(line, parse_constant=refuse) for line in text.splitlines()]


def steps_in(records: list[dict[str, Any]]) -> Counter[int]:
    return Counter(record["step"] for record in records if "step" in record)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Counter[int]:
    """Records per step of the same run ended normally."""
    folder = tmp_path_factory.mktemp("reference")
    result = train(folder, folder / "events.jsonl", "none")
    assert result.returncode == 0, result.stderr
    return steps_in(strict_lines(folder / "events.jsonl"))


@pytest.mark.parametrize(
    ("death", "code"), [("kill", -signal.SIGKILL), ("term", -signal.SIGTERM), ("exit", 3)]
)
def test_a_killed_run_keeps_every_completed_step(
    tmp_path: Path, reference: Counter[int], death: str, code: int
) -> None:
    """SIGKILL, SIGTERM or os._exit right after step 4: steps 0-4 are all in the log, whole."""
    log = tmp_path / "events.jsonl"
    result = train(tmp_path, log, death)
    assert result.returncode == code
    assert result.stdout.split("\n")[-2] == "done 4"
    assert steps_in(strict_lines(log)) == reference
    assert len(reference) == 5 and min(reference.values()) >= 8


def test_a_run_killed_mid_training_loses_at_most_the_step_in_flight(
    tmp_path: Path, reference: Counter[int]
) -> None:
    """SIGKILL from outside while training: each step reported done is complete in the log."""
    log = tmp_path / "events.jsonl"
    script = tmp_path / "train.py"
    script.write_text(TRAIN, encoding="utf-8")
    run = subprocess.Popen(
        [sys.executable, str(script), str(log), "step", "100000", "hang"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    assert run.stdout is not None
    done = [run.stdout.readline() for _ in range(40)]
    run.send_signal(signal.SIGKILL)
    run.wait(timeout=60)
    counts = steps_in(strict_lines(log))
    for step in range(len(done)):
        assert counts[step] == reference[min(step, 4)], step  # same records in every step


def test_fsync_durability_syncs_the_file_once_per_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """durability = "fsync": one os.fsync of the log per completed step, after its records."""
    import hookgrad as torch
    from hookgrad import nn

    synced: list[int] = []
    log = tmp_path / "events.jsonl"
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        real_fsync(fd)
        synced.append(len(strict_lines(log)))

    monkeypatch.setattr(os, "fsync", fsync)
    model = nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    config = {"events": {"jsonl": str(log), "durability": "fsync"}, "plugins": {"grad_stats": {}}}
    with Runtime(config, environ={}):
        for _ in range(3):
            model(torch.randn(4, 3)).sum().backward()
            opt.step()
        assert len(synced) == 3
        assert synced[0] > 0 and synced == sorted(synced)
        assert synced[-1] == len(strict_lines(log))


def test_buffered_durability_writes_in_large_pieces_of_whole_lines(tmp_path: Path) -> None:
    """durability = "buffered": nothing written until 64 KiB wait; then whole lines only."""
    log = tmp_path / "events.jsonl"
    with JsonLinesSink(log, durability="buffered") as sink:
        sink.write({"step": 0, "data": "x" * 100})
        sink.flush()  # an explicit flush still writes
        assert len(strict_lines(log)) == 1
        for step in range(1, 1000):
            sink.write({"step": step, "data": "x" * 100})
        written = log.read_bytes()
        assert 1 << 16 <= len(written) < 1000 * 120
        assert written.endswith(b"\n")
    assert [r["step"] for r in strict_lines(log)] == list(range(1000))


def test_non_finite_floats_are_written_as_strings(tmp_path: Path) -> None:
    """NaN, inf and -inf (Python or numpy, alone or in arrays) become "NaN", "Infinity", "-Infinity"."""
    import numpy as np

    log = tmp_path / "events.jsonl"
    with JsonLinesSink(log) as sink:
        sink.write(
            {
                "step": 0,
                "norm": float("nan"),
                "data": {"max": np.float32("inf"), "values": np.array([1.0, -np.inf, np.nan])},
                "finite": 2.5,
            }
        )
    (record,) = strict_lines(log)
    assert record == {
        "step": 0,
        "norm": "NaN",
        "data": {"max": "Infinity", "values": [1.0, "-Infinity", "NaN"]},
        "finite": 2.5,
    }


def test_threads_sharing_one_sink_write_only_whole_lines(tmp_path: Path) -> None:
    """8 threads x 500 records into one sink, flushing as they go: 4000 whole, valid lines."""
    log = tmp_path / "events.jsonl"
    barrier = threading.Barrier(8)
    with JsonLinesSink(log) as sink:

        def writer(thread: int) -> None:
            barrier.wait()
            for step in range(500):
                sink.write({"step": step, "thread": thread, "pad": "y" * (step % 300)})
                if step % 7 == 0:
                    sink.flush()

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    records = strict_lines(log)
    assert Counter(r["thread"] for r in records) == dict.fromkeys(range(8), 500)
    for thread in range(8):  # each thread's own records stay in order
        assert [r["step"] for r in records if r["thread"] == thread] == list(range(500))


def test_two_sinks_on_one_path_append_whole_lines(tmp_path: Path) -> None:
    """Two sinks (two runtimes) writing one file from two threads never cut a line."""
    log = tmp_path / "events.jsonl"
    sinks = [JsonLinesSink(log), JsonLinesSink(log)]
    barrier = threading.Barrier(2)

    def writer(index: int) -> None:
        barrier.wait()
        for step in range(2000):
            sinks[index].write({"step": step, "sink": index, "pad": "z" * (step % 500)})
            if step % 3 == 0:
                sinks[index].flush()
        sinks[index].close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert Counter(r["sink"] for r in strict_lines(log)) == {0: 2000, 1: 2000}


def test_a_forked_child_does_not_write_its_parents_records_again(tmp_path: Path) -> None:
    """Records waiting at fork are written once (by the parent); the child's own are kept."""
    log = tmp_path / "events.jsonl"
    code = f"""
        import os
        from hookgrad.runtime import JsonLinesSink
        sink = JsonLinesSink({str(log)!r})
        sink.write({{"step": 0, "who": "parent, before fork"}})
        pid = os.fork()
        if pid == 0:
            sink.write({{"step": 0, "who": "child"}})
            raise SystemExit(0)  # a normal exit: the sink is flushed at interpreter exit
        os.waitpid(pid, 0)
        sink.close()
    """
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert sorted(r["who"] for r in strict_lines(log)) == ["child", "parent, before fork"]


def test_a_cut_last_line_is_dropped_before_appending(tmp_path: Path) -> None:
    """A log whose last line a crash cut keeps its whole lines; new records start a fresh line."""
    log = tmp_path / "events.jsonl"
    log.write_text('{"step":0,"a":1}\n{"step":1,"a":', encoding="utf-8")
    with JsonLinesSink(log) as sink:
        sink.write({"step": 2, "a": 3})
    assert strict_lines(log) == [{"step": 0, "a": 1}, {"step": 2, "a": 3}]


def test_a_stream_such_as_dev_null_or_a_pipe_takes_the_log(tmp_path: Path) -> None:
    """A path that is no regular file (/dev/null, a FIFO) is written to, never read first."""
    with JsonLinesSink("/dev/null") as sink:
        sink.write({"step": 0})
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    opened, received = threading.Event(), []

    def read() -> None:
        with fifo.open(encoding="utf-8") as stream:
            opened.set()
            received.append(stream.read())

    reader = threading.Thread(target=read)
    with JsonLinesSink(fifo) as sink:  # a writer exists now: the reader's open returns
        reader.start()
        assert opened.wait(timeout=30)
        sink.write({"step": 1, "via": "pipe"})
    reader.join(timeout=30)
    assert [json.loads(text) for text in received] == [{"step": 1, "via": "pipe"}]
