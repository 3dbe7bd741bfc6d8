"""Interleaved, paired timing of training-step columns: the method of ``../shared/bench/baseline.md``.

A *column* is a named callable doing one step. Each column warms up, then is calibrated to blocks
of about 10 ms. A *round* times one block of every column in a fresh random order, each block
after one untimed step (the first step after switching models is slow, and a fixed order biases
whichever column follows another). Cells are medians of per-step time over rounds; a ratio is the
median of the per-round ratios, because the host's speed drifts by up to 1.5x over minutes and
only blocks timed in the same round see the same machine. Threads are pinned to one, so no
thread pool is left spinning between columns and no quiesce sleep is needed.
"""

from __future__ import annotations

import gc
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

WARMUP_S = 0.3
BLOCK_S = 0.010
MIN_ROUNDS, MAX_ROUNDS = 21, 301
CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}
CLOCK_NAME = os.environ.get("HOOKGRAD_BENCH_CLOCK", "wall")
"""``HOOKGRAD_BENCH_CLOCK=cpu`` times blocks by the thread's CPU time: on a machine other
processes keep busy, wall time counts their time slices too, CPU time only the step's own work
(the BLAS pool is pinned to this one thread). Wall time stays the default: it is what a user
waits for."""
if CLOCK_NAME not in CLOCKS:
    raise SystemExit(f"HOOKGRAD_BENCH_CLOCK={CLOCK_NAME!r}: choose one of {sorted(CLOCKS)}")
_clock = CLOCKS[CLOCK_NAME]


@dataclass(frozen=True, slots=True)
class Column:
    """One contender: ``step`` runs one training step.

    ``around``, when given, is entered (untimed) around each warm-up and block: the place for
    process-wide state such as a global module hook, which must not leak into other columns.
    """

    name: str
    step: Callable[[], object]
    around: Callable[[], AbstractContextManager[object]] | None = None

    def session(self) -> AbstractContextManager[object]:
        return self.around() if self.around is not None else nullcontext()


@dataclass(frozen=True, slots=True)
class Ratio:
    """Median of per-round ratios a/b with a distribution-free 95% CI of that median."""

    median: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.median:.2f}x ({self.low:.2f}-{self.high:.2f})"


@dataclass(frozen=True, slots=True)
class Timings:
    """Seconds per step of every column, one entry per round."""

    per_step: dict[str, list[float]]
    other_load: float | None

    @property
    def rounds(self) -> int:
        return len(next(iter(self.per_step.values())))

    def median_ms(self, name: str) -> float:
        return statistics.median(self.per_step[name]) * 1e3

    def ratio(self, a: str, b: str) -> Ratio:
        """Paired ratio a/b: the median over rounds of (a's block / b's block in that round)."""
        ratios = sorted(x / y for x, y in zip(self.per_step[a], self.per_step[b]))
        low, high = _median_ci(ratios)
        return Ratio(statistics.median(ratios), low, high)


def measure(columns: Sequence[Column], seconds: float, rng: np.random.Generator) -> Timings:
    """Time ``columns`` interleaved for about ``seconds`` (rounds clamped to [21, 301])."""
    estimates = {}
    for c in columns:
        with c.session():
            estimates[c.name] = _warm_up(c.step)
    blocks = {name: max(1, round(BLOCK_S / t)) for name, t in estimates.items()}
    round_s = sum((blocks[name] + 1) * t for name, t in estimates.items())
    rounds = min(MAX_ROUNDS, max(MIN_ROUNDS, round(seconds / round_s)))
    per_step: dict[str, list[float]] = {c.name: [] for c in columns}
    load = _LoadMeter()
    for _ in range(rounds):
        for index in rng.permutation(len(columns)):
            column = columns[index]
            n = blocks[column.name]
            with column.session():
                per_step[column.name].append(_time_block(column.step, n) / n)
            # Untimed: a column whose session starts a runtime (to keep the others free of
            # its hooks) leaves that runtime behind as garbage, whose collection would fall
            # into the next block's timed steps, of whichever column; a real run builds its
            # runtime once. Garbage made by the steps themselves is still collected in them.
            gc.collect()
    return Timings(per_step, load.other_share())


def _warm_up(step: Callable[[], object]) -> float:
    """Run ``step`` for WARMUP_S and return its mean time per step."""
    n, start = 0, _clock()
    while (elapsed := _clock() - start) < WARMUP_S:
        step()
        n += 1
    return elapsed / n


def _time_block(step: Callable[[], object], n: int) -> float:
    """One untimed step (steady state, not the model switch), then ``n`` timed steps."""
    step()
    start = _clock()
    for _ in range(n):
        step()
    return _clock() - start


def _median_ci(sorted_values: Sequence[float]) -> tuple[float, float]:
    """Order-statistic 95% CI of the median: largest r with P(Binomial(n, 1/2) < r) <= 0.025."""
    n = len(sorted_values)
    r, below = 0, 0.0
    while (p := math.comb(n, r) / 2**n) + below <= 0.025:
        below += p
        r += 1
    r = max(r, 1)
    return sorted_values[r - 1], sorted_values[n - r]


class _LoadMeter:
    """Share of the machine's CPU that other processes used since construction (Linux only)."""

    def __init__(self) -> None:
        self._start = _cpu_jiffies()
        self._own_start = time.process_time()

    def other_share(self) -> float | None:
        end = _cpu_jiffies()
        if self._start is None or end is None:
            return None
        busy = end[0] - self._start[0]
        total = end[1] - self._start[1]
        own = (time.process_time() - self._own_start) * os.sysconf("SC_CLK_TCK")
        return max(0.0, busy - own) / total if total else None


def _cpu_jiffies() -> tuple[int, int] | None:
    """(busy, total) jiffies over all CPUs from /proc/stat; busy excludes idle, iowait, steal."""
    try:
        with open("/proc/stat") as f:
            user, nice, system, idle, iowait, irq, softirq, steal = map(
                int, f.readline().split()[1:9]
            )
    except OSError:
        return None
    busy = user + nice + system + irq + softirq
    return busy, busy + idle + iowait + steal


@contextmanager
def one_thread() -> Iterator[None]:
    """Pin numpy's BLAS, OpenMP pools and (if imported) torch's intra-op pool to one thread."""
    torch = sys.modules.get("torch")
    previous = torch.get_num_threads() if torch else 0
    with threadpool_limits(1):
        if torch:
            torch.set_num_threads(1)
        try:
            yield
        finally:
            if torch:
                torch.set_num_threads(previous)


def describe_environment() -> list[str]:
    """Lines saying what the numbers ran under: versions, BLAS kernel, threads, OPENBLAS_*."""
    openblas = {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS_")}
    lines = [
        f"python {sys.version.split()[0]}, numpy {np.__version__}",
        "OPENBLAS env: " + (", ".join(f"{k}={v}" for k, v in sorted(openblas.items())) or "unset"),
        f"clock: {CLOCK_NAME} (HOOKGRAD_BENCH_CLOCK)",
    ]
    for pool in threadpool_info():
        name = " ".join(filter(None, [pool["internal_api"], pool.get("version")]))
        arch = f", kernel {pool['architecture']}" if "architecture" in pool else ""
        lines.append(f"{name}{arch}: {pool['num_threads']} thread(s)")
    torch = sys.modules.get("torch")
    if torch:
        lines.append(f"torch {torch.__version__}: {torch.get_num_threads()} thread(s)")
    return lines


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured markdown table, so results paste into notes as they are."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
