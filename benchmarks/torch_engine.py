"""What hookgrad's plugins cost on a PyTorch model, against hand-written torch doing the same work.

Columns per workload (S and D by default), torch only, each training its own copy of the model
from the same weights:

* ``torch``: the bare step (forward, MSE, backward, SGD);
* ``hand``: the step plus what the three plugins below do, written by hand the way a careful
  torch user would: per-parameter gradient norms in one ``torch._foreach_norm`` and one host
  transfer, per-module norms and a NaN/Inf check of every gradient from them (a NaN or Inf
  entry makes its tensor's norm non-finite), skipping the step on one, and
  ``clip_grad_norm_``;
* ``runtime``: the bare step under a runtime on the torch engine with ``nan_guard`` (parameter
  gradients at the step), ``grad_stats`` (per-module norm records every step, nothing else) and
  ``grad_clip`` (global norm);
* ``clip``: the bare step plus ``clip_grad_norm_``; ``grad_clip``: under a runtime with
  ``grad_clip`` alone.

Targets (torch-engine issue): ``runtime`` / ``hand`` <= 1.0 on S and D, ``grad_clip`` /
``clip`` <= 1.05.

    python benchmarks/torch_engine.py --workloads S,D --seconds 10
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
from _harness import Column, describe_environment, markdown_table, measure, one_thread
from _overhead import optional_torch
from _workloads import WORKLOADS, Workload, build_model, framework_trainer, make_problem

import hookgrad

MAX_NORM = 1.0
PLUGINS = {
    "nan_guard": {"action": "skip_step", "check_backward": False},
    "grad_stats": {
        "every_n_steps": 1,
        "stats": ["norm"],  # what the hand-written column computes: per-module norms
        "per_parameter": False,
        "update_ratio": False,
        "summary": False,
    },
    "grad_clip": {"mode": "norm", "max_norm": MAX_NORM},
}
RUNTIME = {"engine": "torch", "plugins": PLUGINS}
GRAD_CLIP = {"engine": "torch", "plugins": {"grad_clip": PLUGINS["grad_clip"]}}
# (column, reference column) -> {workload: the ratio it must stay below}
TARGETS = {
    ("runtime", "hand"): {"S": 1.0, "D": 1.0},
    ("grad_clip", "clip"): {"S": 1.05, "D": 1.05},
}


def _hand_written(torch: ModuleType, model: Any) -> Callable[[], bool]:
    """The plugins' work by hand: returns whether the optimizer may step."""
    params = [p for p in model.parameters() if p.requires_grad]
    owners = [name.rpartition(".")[0] for name, _ in model.named_parameters()]
    clip = torch.nn.utils.clip_grad_norm_

    def before_step() -> bool:
        norms = torch.stack(torch._foreach_norm([p.grad for p in params])).tolist()
        per_module: dict[str, float] = {}
        for owner, norm in zip(owners, norms):
            per_module[owner] = per_module.get(owner, 0.0) + norm * norm
        if not all(math.isfinite(norm) for norm in norms):
            for p in params:
                p.grad = None
            return False
        clip(params, MAX_NORM)
        return True

    return before_step


def _clip_only(torch: ModuleType, model: Any) -> Callable[[], bool]:
    params = list(model.parameters())
    clip = torch.nn.utils.clip_grad_norm_

    def before_step() -> bool:
        clip(params, MAX_NORM)
        return True

    return before_step


def columns_for(torch: ModuleType, workload: Workload, seed: int) -> list[Column]:
    problem = make_problem(workload, seed)
    columns = []
    for name in ("torch", "hand", "runtime", "clip", "grad_clip"):
        model = build_model(torch, workload, problem)
        before_step = None
        if name == "hand":
            before_step = _hand_written(torch, model)
        elif name == "clip":
            before_step = _clip_only(torch, model)
        trainer = framework_trainer(torch, model, workload, problem, before_step=before_step)
        around = None
        if name in ("runtime", "grad_clip"):
            config = RUNTIME if name == "runtime" else GRAD_CLIP
            around = _runtime_of(config)
        columns.append(Column(name, trainer.step, around))
    return columns


def _runtime_of(config: dict[str, Any]) -> Callable[[], hookgrad.Runtime]:
    return lambda: hookgrad.Runtime(config, environ={})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="S,D")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch = optional_torch()
    if torch is None:
        print("torch is not installed: pip install 'hookgrad[torch]'", file=sys.stderr)
        return 1
    rng = np.random.default_rng(args.seed)
    rows, verdicts = [], []
    with one_thread():
        print("\n".join(describe_environment()))
        for name in args.workloads.split(","):
            print(f"timing {name} ...", file=sys.stderr, flush=True)
            timings = measure(columns_for(torch, WORKLOADS[name], args.seed), args.seconds, rng)
            bare = timings.median_ms("torch")
            for column in ("hand", "runtime", "clip", "grad_clip"):
                rows.append([name, column, f"{bare:.3f} ms", timings.ratio(column, "torch")])
            for (column, reference), limits in TARGETS.items():
                ratio = timings.ratio(column, reference)
                verdict = "PASS" if ratio.median <= limits[name] else "FAIL"
                limit = f"<= {limits[name]:.2f}"
                verdicts.append([name, f"{column} / {reference}", limit, ratio, verdict])
    print("\nStep time / bare torch step, paired per round (95% CI)\n")
    print(markdown_table(["workload", "column", "bare step", "ratio"], rows))
    print("\nTargets (torch-engine issue)\n")
    print(markdown_table(["workload", "ratio of", "target", "ratio", "verdict"], verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
