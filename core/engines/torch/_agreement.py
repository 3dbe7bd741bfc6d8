"""One verdict per optimizer step for every rank of a distributed run.

Under DistributedDataParallel every rank holds the same parameters and applies the same
averaged gradients; a rank that skipped a step the others took would drift from them for the
rest of the run. So a veto is agreed before it takes effect, as Lightning's
``Strategy.reduce_boolean_decision`` and torchtnt's synchronised early stopping agree on
stopping: each rank puts its verdict into one integer and one ``all_reduce`` (MAX) of it over
the default process group gives every rank the same answer. The integer orders verdicts by
weight, then by rank: a failed gate outweighs a veto, a veto outweighs a step, and among equal
verdicts the lowest rank wins, so every rank also learns *which* rank decided. The tensor lives
where the backend can reduce it: on the CPU for gloo and MPI, on the parameters' device for the
others (NCCL). Reading the answer is the step's one host sync.

A failed gate takes part too, carrying ``FAILED``: the rank that failed then raises its own
error, and the others raise instead of waiting for ever in a collective the failed rank would
never join. Only a vetoed step costs a second collective, to learn the vetoing plugin's name
from the rank that decided.
"""

from __future__ import annotations

from typing import Any, Final

import torch
import torch.distributed as dist

__all__ = ["agree_on_step"]

STEP: Final = 0
VETOED: Final = 1
FAILED: Final = 2


def agree_on_step(optimizer: Any, vetoed_by: str | None, failed: bool) -> str | None:
    """See :meth:`hookgrad.engines.Engine.agree_on_step`."""
    if not (dist.is_available() and dist.is_initialized()):
        return vetoed_by
    world = dist.get_world_size()
    if world == 1:
        return vetoed_by
    rank = dist.get_rank()
    mine = FAILED if failed else VETOED if vetoed_by is not None else STEP
    device = _device(optimizer)
    verdict = torch.tensor(_encode(mine, rank, world), dtype=torch.int64, device=device)
    dist.all_reduce(verdict, op=dist.ReduceOp.MAX)
    agreed, decider = _decode(int(verdict.item()), world)
    if agreed == FAILED:
        if failed:
            return None  # the caller raises its own error
        raise RuntimeError(f"optimizer step abandoned: a plugin failed on rank {decider}")
    if agreed == STEP:
        return None
    name = [vetoed_by if rank == decider else None]
    dist.broadcast_object_list(name, src=decider, device=None if device.type == "cpu" else device)
    return f"{name[0]}@rank{decider}"


def _encode(verdict: int, rank: int, world: int) -> int:
    """``verdict`` of ``rank`` as one integer: a greater one weighs more, a lower rank too."""
    return 0 if verdict == STEP else verdict * world + (world - 1 - rank)


def _decode(value: int, world: int) -> tuple[int, int]:
    """(verdict, rank) of the integer the all_reduce agreed on."""
    verdict, rest = divmod(value, world)
    return verdict, world - 1 - rest


def _device(optimizer: Any) -> torch.device:
    """Where the backend reduces: the CPU for gloo and MPI, else the parameters' device."""
    backend = str(dist.get_backend())
    if "gloo" in backend or backend == "mpi":
        return torch.device("cpu")
    for group in optimizer.param_groups:
        for p in group["params"]:
            return torch.device(p.device)
    return torch.device("cuda", torch.cuda.current_device())
