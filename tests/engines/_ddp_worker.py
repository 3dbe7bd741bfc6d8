"""One rank of tests/engines/test_torch_ddp.py: ``python _ddp_worker.py RANK WORLD PORT [DIR]``.

Prints one JSON line: the weight gradient the engine's backward-end observer saw, and the
weights before and after a step every rank's gate vetoed, then after one it allowed.
"""

from __future__ import annotations

import json
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from hookgrad.engines import engine_named


def main(rank: int, world: int, port: int) -> None:
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        torch.manual_seed(0)
        model = DistributedDataParallel(torch.nn.Linear(3, 2))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        engine = engine_named("torch")
        seen: list[list[list[float]]] = []
        observer = engine.observe_backward(
            None, lambda root: seen.append(model.module.weight.grad.tolist())
        )
        allow = [False]
        gate = engine.gate_optimizer_steps(lambda opt: allow[0])
        try:
            model(torch.full((4, 3), float(rank + 1))).sum().backward()
            before = model.module.weight.tolist()
            optimizer.step()
            vetoed = model.module.weight.tolist()
            allow[0] = True
            optimizer.step()
            taken = model.module.weight.tolist()
        finally:
            gate.remove()
            observer.remove()
        print(json.dumps({"seen": seen, "before": before, "vetoed": vetoed, "taken": taken}))
        dist.barrier()  # no rank tears gloo down while the other still talks to it
    finally:
        dist.destroy_process_group()


def write_logs(rank: int, world: int, port: int, folder: str) -> None:
    """Each rank runs a runtime whose config names one events.jsonl (rank-suffixed on disk)."""
    from hookgrad.runtime import Runtime

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        config = {"events": {"jsonl": f"{folder}/events.jsonl"}}
        with Runtime(config, environ={}) as runtime:
            runtime.emit({"plugin": "worker", "kind": "hello", "data": {"rank": rank}})
        print(json.dumps({"rank": rank}))
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    rank, world, port = (int(arg) for arg in sys.argv[1:4])
    if len(sys.argv) > 4:
        write_logs(rank, world, port, sys.argv[4])
    else:
        main(rank, world, port)
