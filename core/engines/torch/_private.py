"""Every use of PyTorch's private or unstable state by hookgrad, in one place.

torch offers no public way to observe every ``backward`` or to veto an optimizer step, so the
adapter leans on a few implementation details of torch 2.13. Each is named here, and
``tests/engines/test_torch_private.py`` checks each one, so a torch release that changes it
fails there, loudly, before it can make the runtime silently wrong.
"""

from __future__ import annotations

import sys
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch
import torch.autograd
from torch.amp import GradScaler
from torch.optim import optimizer as _optimizer

__all__ = [
    "amp_unscale_",
    "at_backward_end",
    "autograd_backward",
    "compiled_original",
    "foreach_clamp_max_",
    "foreach_clamp_min_",
    "foreach_mul_",
    "foreach_norm",
    "foreach_sub",
    "grad_scaler_stepping",
    "graph_task_id",
    "move_to_front",
    "set_autograd_backward",
    "step_stand_in",
]

# The batched kernels torch's own gradient utilities are built on (clip_grad_norm_,
# clip_grad_value_, GradScaler.unscale_): one launch for a list of tensors. Private names, so
# they are looked up once, here; the canaries check what each computes.
foreach_norm: Callable[..., tuple[torch.Tensor, ...]] = torch._foreach_norm
"""``foreach_norm(tensors, ord, dtype=)``: the ``ord``-norm of each tensor (as
``torch.linalg.vector_norm``), accumulated and returned in ``dtype``."""
foreach_mul_: Callable[..., None] = torch._foreach_mul_
"""``foreach_mul_(tensors, scalar_or_tensor)``: each tensor multiplied in place."""
foreach_clamp_min_: Callable[..., None] = torch._foreach_clamp_min_
foreach_clamp_max_: Callable[..., None] = torch._foreach_clamp_max_
foreach_sub: Callable[..., tuple[torch.Tensor, ...]] = torch._foreach_sub
"""``foreach_sub(a, b)``: ``a[i] - b[i]`` for each pair."""
amp_unscale_: Callable[..., None] = torch._amp_foreach_non_finite_check_and_unscale_
"""``amp_unscale_(tensors, found_inf, inv_scale)``: each tensor times ``inv_scale`` in place,
``found_inf`` set to 1.0 if any entry was inf or NaN (GradScaler.unscale_'s kernel)."""


def autograd_backward() -> Callable[..., Any]:
    """The function ``torch.autograd.backward`` is now.

    Relies on ``Tensor.backward`` looking ``torch.autograd.backward`` up at each call
    (torch/_tensor.py), so that replacing the module attribute covers ``loss.backward()`` too.
    """
    return torch.autograd.backward


def set_autograd_backward(function: Callable[..., Any]) -> None:
    """Make ``function`` the ``torch.autograd.backward`` every caller reaches."""
    torch.autograd.backward = function


def graph_task_id() -> int:
    """-1 outside a backward pass; the running graph task's id inside one (a nested
    ``backward`` call made by reentrant checkpointing sees a value other than -1)."""
    return int(torch._C._current_graph_task_id())


def at_backward_end(callback: Callable[[], None]) -> None:
    """Run ``callback`` when the running backward pass ends (call it from inside one).

    torch's autograd engine runs "final callbacks" queued during a backward after its last
    node, through ``Variable._execution_engine.queue_callback``.
    """
    torch.autograd.Variable._execution_engine.queue_callback(callback)


def move_to_front(handle: Any) -> None:
    """Make the global optimizer step pre-hook of ``handle`` run before every other one.

    torch keeps global step pre-hooks in ``torch.optim.optimizer._global_optimizer_pre_hooks``,
    an OrderedDict keyed by handle id, run in order before each optimizer's own pre-hooks.
    """
    hooks = _optimizer._global_optimizer_pre_hooks
    if not isinstance(hooks, OrderedDict):
        raise RuntimeError(
            "torch.optim.optimizer._global_optimizer_pre_hooks is no longer an OrderedDict: "
            f"this torch ({torch.__version__}) is not supported by hookgrad's step gate"
        )
    hooks.move_to_end(handle.id, last=False)


def step_stand_in(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """A shallow copy of ``optimizer`` that owns no parameter and no state.

    Passed as ``self`` to the optimizer's step function, it makes that step a no-op for every
    optimizer that reads its parameters from ``self.param_groups`` (all of ``torch.optim``
    does): the groups keep their options but hold no parameter, and ``state`` is a new empty
    one, so the real optimizer's parameters and state are untouched.
    """
    stand_in = object.__new__(type(optimizer))
    stand_in.__dict__.update(optimizer.__dict__)  # not copy.copy: __setstate__ resets hooks
    stand_in.param_groups = [{**group, "params": []} for group in optimizer.param_groups]
    stand_in.state = defaultdict(dict)
    return stand_in


# ---------------------------------------------------- loss scaling (grad_scale)
def grad_scaler_stepping() -> bool:
    """Whether a ``torch.amp.GradScaler`` (or a subclass) is running ``step`` further up the
    call stack: call it from inside an optimizer step.

    torch has no record of who called ``optimizer.step``; ``GradScaler.step`` calls it from its
    own frame, directly (an optimizer with ``_step_supports_amp_scaling``) or through
    ``_maybe_opt_step``, so the frame of a function named ``step`` whose ``self`` is a
    GradScaler is on the stack of every step it makes (and of none it does not make).
    """
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "step" and isinstance(frame.f_locals.get("self"), GradScaler):
            return True
        frame = frame.f_back
    return False


# ---------------------------------------------------- torch.compile
def compiled_original(module: object) -> torch.nn.Module | None:
    """The module ``torch.compile(module)`` wrapped, if ``module`` is what it returned, else None.

    ``torch.compile`` on a module returns a ``torch._dynamo.eval_frame.OptimizedModule`` that
    holds the original as ``_orig_mod`` (also its only submodule, hence ``_orig_mod.`` before
    every name seen through it). Until something compiles, dynamo is not even imported (it
    costs over a second), so it is looked up, not imported.

    Nothing else of hookgrad needs to know about compilation: dynamo cannot trace
    ``threading.get_ident``, the first call of each runtime hook (its owner check), so a
    compiled model breaks its graph there and runs every hookgrad hook eagerly, at every call.
    """
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    if eval_frame is None or not isinstance(module, eval_frame.OptimizedModule):
        return None
    original: torch.nn.Module = module._orig_mod
    return original
