"""``torch.get_num_threads`` / ``torch.set_num_threads``: torch's intra-op thread count.

hookgrad computes on one thread, so the number changes no speed. It is kept because torch's
CPU kernels split some reductions into one partial sum per thread, rounded in the tensor's
dtype, and for float16/bfloat16 those roundings show in the result (layer norm's parameter
gradients). hookgrad's kernels that reproduce such sums split theirs by this count, so they
give torch's bits when both use the same count. The default is torch's: ``OMP_NUM_THREADS``,
else ``MKL_NUM_THREADS``, else the number of physical cores this process may run on.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["get_num_threads", "set_num_threads"]

_count: list[int] = []  # the count once read or set


def _physical_cores() -> int:
    """Distinct (package, core) pairs among the CPUs this process may use (Linux), else the
    CPU count."""
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    cores = set()
    for cpu in cpus:
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            package = (topology / "physical_package_id").read_text().strip()
            cores.add((package, (topology / "core_id").read_text().strip()))
        except OSError:
            return len(cpus)
    return len(cores) or os.cpu_count() or 1


def _default() -> int:
    for name in ("MKL_NUM_THREADS", "OMP_NUM_THREADS"):  # torch lets MKL's win
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return _physical_cores()


def get_num_threads() -> int:
    """The number of threads torch would use for intra-op parallelism."""
    if not _count:
        _count.append(_default())
    return _count[0]


def set_num_threads(num: int) -> None:
    """Set the intra-op thread count (a positive int), as torch's."""
    if not isinstance(num, int) or isinstance(num, bool):
        raise RuntimeError(f"set_num_threads expects an int, but got {type(num).__name__}")
    if num <= 0:
        raise RuntimeError("set_num_threads expects a positive integer")
    _count[:] = [num]
