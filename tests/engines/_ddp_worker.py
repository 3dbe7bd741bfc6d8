"""One rank of tests/engines/test_torch_ddp.py: ``python _ddp_worker.py RANK WORLD PORT SCENARIO
[ARG...]`` (the scenario's arguments).

Each scenario runs in a gloo process group on loopback and returns what the test checks, which
is printed as one JSON line; then every rank meets at a barrier, so no rank tears gloo down
while another still talks to it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from hookgrad._demo import NanInjection, make_task, run
from hookgrad.engines import engine_named
from hookgrad.hookspecs import (
    OptimizerStepPostEvent,
    OptimizerStepPreEvent,
    PluginAbort,
    PluginConfig,
    hookimpl,
)
from hookgrad.runtime import PluginCatalog, Runtime
from hookgrad.runtime._loop import LoopHooks

STEPS = 4
"""Training steps of the scenarios that train."""

GROUP_TIMEOUT = timedelta(seconds=60)
"""gloo gives up on a collective after this: a rank left waiting fails instead of hanging."""


def observe(rank: int) -> dict[str, Any]:
    """The weight gradient the engine's backward-end observer saw, and the weights before and
    after a step every rank's gate vetoed, then after one it allowed."""
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
    return {"seen": seen, "before": before, "vetoed": vetoed, "taken": taken}


def write_logs(rank: int, folder: str) -> dict[str, Any]:
    """Each rank runs a runtime whose config names one events.jsonl (rank-suffixed on disk)."""
    config = {"events": {"jsonl": f"{folder}/events.jsonl"}}
    with Runtime(config, environ={}) as runtime:
        runtime.emit({"plugin": "worker", "kind": "hello", "data": {"rank": rank}})
    return {"rank": rank}


class VetoOnRankOne:
    """Vetoes step 2 on rank 1 only; writes a ``post`` record of every step_post event."""

    def __init__(self) -> None:
        self.runtime: Runtime | None = None

    @hookimpl
    def hookgrad_configure(self, runtime: Runtime) -> None:
        self.runtime = runtime

    @hookimpl
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> bool | None:
        return False if (dist.get_rank(), event.step) == (1, 2) else None

    @hookimpl
    def hookgrad_optimizer_step_post(self, event: OptimizerStepPostEvent) -> None:
        assert self.runtime is not None
        data = {"skipped": event.skipped, "vetoed_by": event.vetoed_by}
        self.runtime.emit({"plugin": "veto", "kind": "post", "step": event.step, "data": data})


class StopTraining(RuntimeError, PluginAbort):
    """A plugin's verdict to stop the run (as nan_guard's NonFiniteGradientError), no failure."""


class RaiseOnRankOne:
    """Raises ``error`` in step_pre of step 1 on rank 1 only."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    @hookimpl
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> None:
        if (dist.get_rank(), event.step) == (1, 1):
            raise self.error


def veto_on_rank_one(rank: int, folder: str) -> dict[str, Any]:
    """Train STEPS steps with VetoOnRankOne; the weights after each step, as lists."""
    with _runtime_on_torch(VetoOnRankOne(), "veto", folder) as train:
        return {"weights": [train() for _ in range(STEPS)]}


def raise_on_rank_one(rank: int, folder: str, on_error: str, raised: str) -> dict[str, Any]:
    """Train STEPS steps with RaiseOnRankOne (raising a ValueError if ``raised`` is "failure",
    a StopTraining if "abort") under ``on_error``, stopping at an error; the weights after
    each step taken and the error's class and text."""
    error = StopTraining("rank 1 stops") if raised == "abort" else ValueError("rank 1 cannot go on")
    config = PluginConfig.model_validate({"on_error": on_error})
    with _runtime_on_torch(RaiseOnRankOne(error), "raising", folder, config) as train:
        weights = []
        try:
            for _ in range(STEPS):
                weights.append(train())
        except Exception as error:  # what each rank raises is what the test checks
            return {"weights": weights, "error": type(error).__name__, "message": str(error)}
    return {"weights": weights, "error": None}


@contextmanager
def _runtime_on_torch(
    plugin: object, name: str, folder: str, config: PluginConfig | None = None
) -> Iterator[Callable[[], list[list[float]]]]:
    """A started runtime with ``plugin`` whose training-loop points are the torch engine's,
    logging to DIR/events.jsonl; yields ``train()``: one step of a DDP model, the weights after.

    A runtime without engine selection (``Runtime.engines``) dispatches its loop points on
    hookgrad's engine only; for it, a LoopHooks on torch shares its plugins, settings and step
    counter. Once engine selection is in, the runtime's own loop points are on torch.
    """
    runtime = Runtime(
        {"events": {"jsonl": f"{folder}/events.jsonl"}}, environ={}, catalog=PluginCatalog(tuple)
    )
    runtime.register(plugin, name=name, config=config)
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(3, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    inputs = torch.full((4, 3), float(dist.get_rank() + 1))

    def train() -> list[list[float]]:
        optimizer.zero_grad()
        model(inputs).pow(2).sum().backward()
        optimizer.step()
        return model.module.weight.tolist()

    with runtime:
        loop: LoopHooks | None = None
        if "torch" not in {engine.name for engine in getattr(runtime, "engines", ())}:
            loop = LoopHooks(
                runtime.pm, runtime.plugin_configs, runtime.bridge, engines=(engine_named("torch"),)
            )
            loop.attach()
        (loop or runtime).watch(model)
        try:
            yield train
        finally:
            if loop is not None:
                loop.detach()


def train_under_config(
    rank: int, config: str, folder: str, steps: str, nan_step: str
) -> dict[str, Any]:
    """Train the demo MLP wrapped in DDP for ``steps`` steps under ``config`` on torch, each
    rank on its own shard of the data (every world-th point from its rank on), rank 1's module
    "2" producing a NaN in the backward of training step ``nan_step`` (from 1); logs to
    DIR/events.jsonl. Digests of the parameters' bytes
    by name, at the start and at the end (digests: a rank's output must fit a pipe's buffer).
    """
    world = dist.get_world_size()
    task = make_task("mlp", seed=1, engine="torch")
    net = task.model
    shard = dataclasses.replace(
        task, model=DistributedDataParallel(net), x=task.x[rank::world], y=task.y[rank::world]
    )
    injection = NanInjection(int(nan_step), "module.2") if rank == 1 else None
    initial = _digests(net)
    overrides = {"engine": "torch", "events": {"jsonl": f"{folder}/events.jsonl"}}
    with Runtime(config, overrides=overrides, environ={}) as runtime:
        for _ in run(shard, int(steps), int(steps), runtime=runtime, inject_nan=injection):
            pass
    return {"initial": initial, "final": _digests(net)}


def _digests(model: torch.nn.Module) -> dict[str, str]:
    """The SHA-256 of each parameter's bytes, by name: equal digests, equal bits."""
    return {
        name: hashlib.sha256(value.numpy().tobytes()).hexdigest()
        for name, value in model.state_dict().items()
    }


def print_much(rank: int) -> dict[str, Any]:
    """An output larger than a pipe's buffer (64 KiB on Linux), from every rank."""
    return {"rank": rank, "filler": "x" * 200_000}


SCENARIOS: dict[str, Callable[..., dict[str, Any]]] = {
    "observe": observe,
    "logs": write_logs,
    "veto": veto_on_rank_one,
    "raise": raise_on_rank_one,
    "example": train_under_config,
    "loud": print_much,
}


def main(rank: int, world: int, port: int, scenario: str, *args: str) -> None:
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=GROUP_TIMEOUT,
    )
    try:
        print(json.dumps(SCENARIOS[scenario](rank, *args)), flush=True)
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    rank, world, port = (int(arg) for arg in sys.argv[1:4])
    main(rank, world, port, *sys.argv[4:])
