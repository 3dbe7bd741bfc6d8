"""``LRScheduler``, the base of every learning-rate scheduler, as torch 2.13's.

A scheduler writes ``group["lr"]`` of each of its optimizer's parameter groups. Constructing one
records ``group["initial_lr"]`` (the ``base_lrs``) and takes a first step at ``last_epoch = 0``;
every ``step()`` then advances ``last_epoch`` by one and writes the next learning rates.

Torch computes a schedule two ways, and the numbers differ in the last bits, so both are kept
as torch writes them: ``get_lr`` is the *chainable* form (the next lr from the current
``group["lr"]``, which lets schedulers be stacked), used by ``step()``; ``_get_closed_form_lr``
is the *closed* form (the lr as a function of ``last_epoch`` and ``base_lrs``), used by the
deprecated ``step(epoch)``. Every expression keeps torch's operation order, so the Python floats
are torch's bit for bit.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeAlias
from weakref import ref

from .._tensor import Tensor
from .optimizer import Optimizer

__all__ = ["EPOCH_DEPRECATION_WARNING", "LRScheduler"]

LR: TypeAlias = float | Tensor

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being "
    "deprecated where possible. Please use `scheduler.step()` to step the "
    "scheduler. During the deprecation, if epoch is different from None, the "
    "closed form is used instead of the new chainable form, where available. "
    "Please open an issue if you are unable to replicate your use case: "
    "https://github.com/pytorch/pytorch/issues/new/choose."
)
_DOCS = "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate"


def format_param(name: str, optimizer: Optimizer, param: Any) -> list[Any]:
    """One value per parameter group: a scalar is repeated, a sequence must fit the groups."""
    if isinstance(param, (list, tuple)):
        if len(param) != len(optimizer.param_groups):
            raise ValueError(
                f"{name} must have the same length as optimizer.param_groups. "
                f"{name} has {len(param)} values, param_groups has "
                f"{len(optimizer.param_groups)}."
            )
    else:
        param = [param] * len(optimizer.param_groups)
    return [p.clone() if isinstance(p, Tensor) else p for p in param]


def group_values(optimizer: Optimizer, key: str) -> list[Any]:
    """``group[key]`` of every group; tensors are cloned so the caller cannot alias them."""
    return [
        group[key].clone() if isinstance(group[key], Tensor) else group[key]
        for group in optimizer.param_groups
    ]


def set_group_value(group: dict[str, Any], key: str, value: LR) -> None:
    """Write ``group[key]``; a tensor entry is filled in place rather than replaced."""
    current = group[key]
    if isinstance(current, Tensor):
        current.fill_(value.item() if isinstance(value, Tensor) else value)
    else:
        group[key] = value


def warn_unless_in_step(scheduler: LRScheduler) -> None:
    """Torch's hint when ``get_lr()`` is called by user code instead of by ``step()``."""
    if not scheduler._get_lr_called_within_step:
        warnings.warn(
            "To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
            UserWarning,
            stacklevel=3,
        )


class LRScheduler:
    """Base class for all learning rate schedulers.

    Subclasses implement :meth:`get_lr` (and optionally ``_get_closed_form_lr``).

    Args:
        optimizer: the optimizer whose ``param_groups[i]["lr"]`` this scheduler sets.
        last_epoch: index of the last epoch seen; ``-1`` (default) starts a new schedule, any
            other value resumes one and needs ``initial_lr`` in every group.
    """

    _get_lr_called_within_step: bool = False
    _is_initial: bool = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                initial_lr = group["lr"]
                if isinstance(initial_lr, Tensor):
                    initial_lr = initial_lr.clone()
                group.setdefault("initial_lr", initial_lr)
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when resuming "
                        "scheduler with last_epoch >= 0.\n"
                        "This typically happens when:\n"
                        "1. You're trying to resume training from a checkpoint but haven't "
                        "properly loaded the optimizer state\n"
                        "2. You're using last_epoch >= 0 for a fresh training run (not "
                        "recommended)"
                    )
        self.base_lrs: list[LR] = group_values(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        _track_optimizer_steps(optimizer)
        self._initial_step()

    def _initial_step(self) -> None:
        """Reset the step count and take the construction step (``last_epoch`` -1 -> 0)."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def state_dict(self) -> dict[str, Any]:
        """Every attribute of the scheduler except the optimizer (torch's format)."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the attributes saved by :meth:`state_dict`."""
        self.__dict__.update(state_dict)

    def get_last_lr(self) -> list[LR]:
        """The learning rates of the last step, one per parameter group (copies)."""
        return self._last_lr

    def get_lr(self) -> list[LR]:
        """The next learning rates (chainable form); what each scheduler implements."""
        raise NotImplementedError

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (``epoch``, deprecated, jumps there with the closed form)."""
        if self._step_count == 1:
            _warn_on_step_order(self.optimizer)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        if epoch is None:
            self.last_epoch += 1
            self._apply_lrs(self.get_lr)
        else:
            self.last_epoch = epoch
            self._apply_lrs(getattr(self, "_get_closed_form_lr", self.get_lr))

    def _apply_lrs(self, compute: Callable[[], list[LR]]) -> None:
        """Write the learning rates ``compute()`` returns (called as from ``step``)."""
        self._get_lr_called_within_step = True
        try:
            values = compute()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            set_group_value(group, "lr", lr)
        self._last_lr: list[LR] = group_values(self.optimizer, "lr")


class _LRScheduler(LRScheduler):
    """The old name, kept (as a subclass, like torch) for code that still subclasses it."""


def _track_optimizer_steps(optimizer: Optimizer) -> None:
    """Wrap ``optimizer.step`` once so a scheduler can tell whether it ran (pytorch#20124)."""
    step = optimizer.step
    if hasattr(step, "_wrapped_by_lr_sched"):
        return
    opt_ref = ref(optimizer)
    func = step.__func__  # type: ignore[attr-defined]

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        opt = opt_ref()
        opt._opt_called = True  # type: ignore[union-attr]
        return func.__get__(opt, opt.__class__)(*args, **kwargs)

    wrapper._wrapped_by_lr_sched = True  # type: ignore[attr-defined]
    optimizer.step = wrapper  # type: ignore[method-assign]


def _warn_on_step_order(optimizer: Optimizer) -> None:
    """Torch's warnings when the first ``scheduler.step()`` comes before ``optimizer.step()``."""
    if not hasattr(optimizer.step, "_wrapped_by_lr_sched"):
        warnings.warn(
            "Seems like `optimizer.step()` has been overridden after learning rate scheduler "
            "initialization. Please, make sure to call `optimizer.step()` before "
            f"`lr_scheduler.step()`. See more details at {_DOCS}",
            UserWarning,
            stacklevel=3,
        )
    elif not getattr(optimizer, "_opt_called", False):
        warnings.warn(
            "Detected call of `lr_scheduler.step()` before `optimizer.step()`. "
            "In PyTorch 1.1.0 and later, you should call them in the opposite order: "
            "`optimizer.step()` before `lr_scheduler.step()`.  Failure to do this "
            "will result in PyTorch skipping the first value of the learning rate schedule. "
            f"See more details at {_DOCS}",
            UserWarning,
            stacklevel=3,
        )
