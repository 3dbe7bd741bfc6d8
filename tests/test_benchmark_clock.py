"""The benchmarks' clock choice (docs/performance.md): wall time by default, the thread's CPU
time under ``HOOKGRAD_BENCH_CLOCK=cpu``, checked in a real run of the timing harness."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

# Two columns: 1 ms of work, and the same work followed by 5 ms asleep. The wall clock sees the
# sleep, the thread's CPU time does not.
SCRIPT = """
import time
import numpy as np
from _harness import CLOCK_NAME, Column, describe_environment, measure

def work():
    end = time.thread_time() + 0.001
    while time.thread_time() < end:
        pass

def work_then_sleep():
    work()
    time.sleep(0.005)

t = measure([Column("work", work), Column("slept", work_then_sleep)], 0.2, np.random.default_rng(0))
print([line for line in describe_environment() if line.startswith("clock:")][0])
print(t.ratio("slept", "work").median)
"""


def _run(clock: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HOOKGRAD_BENCH_CLOCK"}
    if clock is not None:
        env["HOOKGRAD_BENCH_CLOCK"] = clock
    return subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=BENCHMARKS,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(("clock", "low", "high"), [(None, 1.5, 20.0), ("cpu", 0.8, 1.25)])
def test_clock_counts_sleep_only_on_the_wall(clock: str | None, low: float, high: float) -> None:
    """A step that sleeps 5 ms after 1 ms of work takes several times the work on the wall clock and
    ~1x of it on the CPU clock; the header names the clock."""
    result = _run(clock)
    assert result.returncode == 0, result.stderr
    header, ratio = result.stdout.splitlines()[-2:]
    assert header == f"clock: {clock or 'wall'} (HOOKGRAD_BENCH_CLOCK)"
    assert low <= float(ratio) <= high


def test_unknown_clock_is_refused() -> None:
    """A clock name the harness does not know stops it with the choices named."""
    result = _run("gpu")
    assert result.returncode != 0
    assert "HOOKGRAD_BENCH_CLOCK='gpu': choose one of ['cpu', 'wall']" in result.stderr
