"""An example third-party hookgrad plugin: record the gradient norm at each module's output.

Installed with ``pip install``, it is found through the ``hookgrad.plugins`` entry point that its
``pyproject.toml`` declares, and activated by a ``[plugins.gradnorm]`` table in ``hookgrad.toml``.
"""

from __future__ import annotations

import math

import hookgrad
from hookgrad.hookspecs import FullBackwardEvent, PluginConfig, hookimpl

__all__ = ["GradNormLogger"]
__version__ = "0.1.0"


class GradNormLogger:
    """Emit a ``grad_norm`` record with the L2 norm of each selected module's ``grad_output``."""

    class Config(PluginConfig):
        every_n_steps: int = 1
        """Record on steps 0, N, 2N, ... only."""

    def __init__(self, config: Config) -> None:
        if config.every_n_steps < 1:
            raise ValueError(f"every_n_steps must be at least 1, got {config.every_n_steps}")
        self.config = config
        self.runtime: hookgrad.Runtime | None = None

    @hookimpl
    def hookgrad_configure(self, runtime: hookgrad.Runtime) -> None:
        self.runtime = runtime

    @hookimpl
    def hookgrad_full_backward(self, event: FullBackwardEvent) -> None:
        if self.runtime is None or event.step % self.config.every_n_steps:
            return None
        squares = sum(float(g.norm()) ** 2 for g in event.grad_output if g is not None)
        self.runtime.emit(
            {
                "plugin": "gradnorm",
                "kind": "grad_norm",
                "step": event.step,
                "module_name": event.module_name,
                "data": {
                    "module_type": event.module_type,
                    "call_index": event.call_index,
                    "grad_output_norm": math.sqrt(squares),
                },
            }
        )
        return None  # observe only: the gradients are left as they are
