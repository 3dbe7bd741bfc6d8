"""The demo training runs behind ``hookgrad demo`` and ``examples/train_demo.py``.

Two small problems, each written exactly as for PyTorch, on data generated in code
(deterministic for a given seed), so a run needs no download:

* ``mlp``: a 2-64-64-1 ReLU MLP trained full-batch with MSE on two interleaved spirals;
* ``cnn``: a Conv2d-ReLU-Flatten-Linear network classifying noisy 8x8 glyphs of the digits 0-4
  with cross-entropy.

:func:`run` trains one step at a time and yields each step's record, so the command can drive a
progress bar; under a :class:`hookgrad.Runtime` it also emits a ``demo``/``train`` record per
step, stamped with the runtime's step like the plugins' records of that step. A
:class:`NanInjection` puts a NaN into one module's backward at one step, to show
``nan_guard`` naming it. The module lives in the package, not in ``examples/``, because an
installed ``hookgrad`` command cannot import a script from a source checkout.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from . import nn, optim
from ._creation import from_numpy, manual_seed
from ._grad_mode import no_grad
from ._tensor import Tensor
from .autograd import Function
from .autograd.function import FunctionCtx

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = [
    "MODELS",
    "NanInjection",
    "StepRecord",
    "Task",
    "accuracy",
    "build_cnn",
    "build_model",
    "class_accuracy",
    "glyph_digits",
    "make_task",
    "run",
    "train",
    "two_spirals",
]

POINTS_PER_CLASS = 200
HIDDEN = 64
IMAGES_PER_CLASS = 64

# 8x8 glyphs of the digits 0-4; "#" is ink. Samples shift them by up to a pixel and add noise.
GLYPHS: Final = (
    (
        "..####..",
        ".#....#.",
        ".#....#.",
        ".#....#.",
        ".#....#.",
        ".#....#.",
        "..####..",
        "........",
    ),
    (
        "...##...",
        "..###...",
        "...##...",
        "...##...",
        "...##...",
        "...##...",
        "..####..",
        "........",
    ),
    (
        "..####..",
        ".#....#.",
        "......#.",
        "....##..",
        "..##....",
        ".#......",
        ".######.",
        "........",
    ),
    (
        ".#####..",
        "......#.",
        "......#.",
        "..####..",
        "......#.",
        "......#.",
        ".#####..",
        "........",
    ),
    (
        "....##..",
        "...#.#..",
        "..#..#..",
        ".#...#..",
        ".######.",
        ".....#..",
        ".....#..",
        "........",
    ),
)


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One training step: the loss it minimised, and the accuracy after its update.

    ``step`` counts from 1. The accuracy costs one extra forward pass, so it is measured only
    on logged steps (every ``log_every``-th and the last) and is None on the others.
    """

    step: int
    loss: float
    accuracy: float | None

    def line(self, steps: int) -> str:
        """``step   20/200  loss 0.1234  accuracy 0.950`` (no accuracy part if not measured)."""
        measured = "" if self.accuracy is None else f"  accuracy {self.accuracy:.3f}"
        return f"step {self.step:4d}/{steps}  loss {self.loss:.4f}{measured}"


# --------------------------------------------------------------------------------------------
# Data and models
# --------------------------------------------------------------------------------------------


def two_spirals(
    points_per_class: int, seed: int, noise: float = 0.02
) -> tuple[np.ndarray, np.ndarray]:
    """Two spiral arms (one turn each, the second rotated by pi), labelled +1 and -1.

    Returns ``x`` of shape (2n, 2) and ``y`` of shape (2n, 1), float32, points inside the unit disc.
    """
    rng = np.random.default_rng(seed)
    angle = np.sqrt(rng.uniform(0.0, 1.0, points_per_class)) * 2 * math.pi
    radius = angle / (2 * math.pi)
    arm = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    x = np.concatenate([arm, -arm]) + rng.normal(0.0, noise, (2 * points_per_class, 2))
    y = np.concatenate([np.ones(points_per_class), -np.ones(points_per_class)])[:, None]
    return x.astype(np.float32), y.astype(np.float32)


def glyph_digits(
    images_per_class: int, seed: int, noise: float = 0.35
) -> tuple[np.ndarray, np.ndarray]:
    """Noisy 8x8 images of the GLYPHS, each shifted by -1, 0 or 1 pixel in both directions.

    Returns ``x`` of shape (n, 1, 8, 8) float32 and class labels ``y`` of shape (n,) int64,
    classes interleaved (0, 1, 2, 3, 4, 0, ...).
    """
    rng = np.random.default_rng(seed)
    templates = np.array([[[c == "#" for c in row] for row in g] for g in GLYPHS], np.float32)
    n = images_per_class * len(GLYPHS)
    y = np.arange(n) % len(GLYPHS)
    shifts = rng.integers(-1, 2, size=(n, 2))
    images = np.stack([np.roll(templates[c], tuple(s), axis=(0, 1)) for c, s in zip(y, shifts)])
    images += rng.normal(0.0, noise, images.shape).astype(np.float32)
    return images[:, None].astype(np.float32), y.astype(np.int64)


def build_model(hidden: int = HIDDEN) -> nn.Sequential:
    """2 -> hidden -> hidden -> 1 with ReLU: enough capacity for the spirals in ~100 steps."""
    return nn.Sequential(
        nn.Linear(2, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, 1),
    )


def build_cnn(channels: int = 8) -> nn.Sequential:
    """Conv2d(1, channels, 3) -> ReLU -> Flatten -> Linear to the 5 classes."""
    return nn.Sequential(
        nn.Conv2d(1, channels, 3),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(channels * 6 * 6, len(GLYPHS)),
    )


def accuracy(model: nn.Module, x: Tensor, y: Tensor) -> float:
    """Share of points whose predicted sign matches the label's."""
    with no_grad():
        return float(((model(x) > 0) == (y > 0)).float().mean().item())


def class_accuracy(model: nn.Module, x: Tensor, y: Tensor) -> float:
    """Share of images whose highest logit is their class."""
    with no_grad():
        return float((model(x).argmax(1) == y).float().mean().item())


@dataclass(frozen=True)
class Task:
    """A demo problem: data, model, loss, learning rate, and how to score the model."""

    name: str
    data: str
    """What the data is, for the first line of the output."""
    x: Tensor
    y: Tensor
    model: nn.Module
    loss_fn: nn.Module
    lr: float
    score: Callable[[nn.Module, Tensor, Tensor], float]

    def accuracy(self) -> float:
        return self.score(self.model, self.x, self.y)

    def describe(self) -> str:
        """``two spirals: 400 points; model: 4417 parameters``."""
        return f"{self.data}; model: {sum(p.numel() for p in self.model.parameters())} parameters"


def _spirals(seed: int) -> Task:
    x, y = two_spirals(POINTS_PER_CLASS, seed)
    data = f"two spirals: {len(x)} points"
    return Task(
        "mlp", data, from_numpy(x), from_numpy(y), build_model(), nn.MSELoss(), 0.03, accuracy
    )


def _digits(seed: int) -> Task:
    x, y = glyph_digits(IMAGES_PER_CLASS, seed)
    data = f"glyph digits 0-{len(GLYPHS) - 1}: {len(x)} noisy 8x8 images"
    model, loss_fn = build_cnn(), nn.CrossEntropyLoss()
    return Task("cnn", data, from_numpy(x), from_numpy(y), model, loss_fn, 0.05, class_accuracy)


MODELS: Final[dict[str, Callable[[int], Task]]] = {"mlp": _spirals, "cnn": _digits}
"""The demo problems by ``--model`` name."""


def make_task(model: str, seed: int) -> Task:
    """The problem ``model`` (a MODELS key) with data and initial weights from ``seed``."""
    manual_seed(seed)
    return MODELS[model](seed)


# --------------------------------------------------------------------------------------------
# NaN injection
# --------------------------------------------------------------------------------------------


class _NanInBackward(Function):
    """The identity in forward; in backward, the incoming gradient with a NaN in entry 0.

    Applied to a module's output by the module's own forward hook, it sits inside the span of
    the module's full backward hooks (those wrap the output after the forward hooks ran), so
    the module sees a finite grad_output and returns a non-finite grad_input: it produced it.
    """

    @staticmethod
    def forward(ctx: FunctionCtx, output: Tensor) -> Tensor:
        return output.clone()

    @staticmethod
    def backward(ctx: FunctionCtx, grad: Tensor) -> Tensor:
        poisoned = grad.numpy().copy()
        poisoned.flat[0] = np.nan
        return from_numpy(poisoned)


def _poison(module: nn.Module, args: Any, output: Tensor) -> Tensor:
    return _NanInBackward.apply(output)


@dataclass(frozen=True)
class NanInjection:
    """``--inject-nan STEP:MODULE``: a NaN in MODULE's backward at training step STEP (from 1)."""

    step: int
    module: str

    @classmethod
    def parse(cls, text: str) -> NanInjection:
        """``"30:2"`` -> step 30, module ``"2"``; ValueError for anything else."""
        step, sep, module = text.partition(":")
        if not (sep and step.strip().isdigit() and module.strip()):
            raise ValueError(f"expected STEP:MODULE, e.g. 30:2, got {text!r}")
        return cls(int(step), module.strip())

    def check(self, task: Task, steps: int) -> None:
        """ValueError naming the valid choices if the step or the module is not in this run."""
        if not 1 <= self.step <= steps:
            raise ValueError(f"step {self.step} is outside this run's steps 1..{steps}")
        modules = [(name, type(m).__name__) for name, m in task.model.named_modules() if name]
        if self.module not in dict(modules):
            listing = ", ".join(f"{name} ({kind})" for name, kind in modules)
            raise ValueError(
                f"no module {self.module!r} in the {task.name} model; modules: {listing}"
            )

    def at(self, model: nn.Module, step: int) -> AbstractContextManager[Any]:
        """Within the block, forward calls poison the module's backward if ``step`` is ours."""
        if step != self.step:
            return nullcontext()
        return model.get_submodule(self.module).register_forward_hook(_poison)


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------


def run(
    task: Task,
    steps: int,
    log_every: int,
    *,
    runtime: Runtime | None = None,
    inject_nan: NanInjection | None = None,
) -> Iterator[StepRecord]:
    """Train ``task`` full-batch with SGD (momentum 0.9) for ``steps`` steps, yielding each.

    Under ``runtime`` (started), each step also emits ``{"plugin": "demo", "kind": "train",
    "data": {"loss", "accuracy" (logged steps only)}}`` with the runtime's step of that
    optimizer step, so it lines up with the plugins' records.
    """
    optimizer = optim.SGD(task.model.parameters(), lr=task.lr, momentum=0.9)
    if runtime is not None:
        runtime.watch(task.model)  # parameter names for the plugins even without module hooks
    for step in range(1, steps + 1):
        optimizer.zero_grad()
        with inject_nan.at(task.model, step) if inject_nan else nullcontext():
            loss = task.loss_fn(task.model(task.x), task.y)
        loss.backward()
        counter = runtime.step if runtime is not None else 0
        optimizer.step()
        logged = step % log_every == 0 or step == steps
        record = StepRecord(step, loss.item(), task.accuracy() if logged else None)
        if runtime is not None:
            runtime.emit(
                {"plugin": "demo", "kind": "train", "step": counter, "data": _data(record)}
            )
        yield record


def _data(record: StepRecord) -> dict[str, Any]:
    """The demo record's data: JSON-safe, so a non-finite loss is None."""
    data: dict[str, Any] = {"loss": record.loss if math.isfinite(record.loss) else None}
    if record.accuracy is not None:
        data["accuracy"] = record.accuracy
    return data


def train(
    steps: int,
    log_every: int,
    seed: int,
    *,
    model: str = "mlp",
    on_step: Callable[[StepRecord], None] | None = None,
    echo: Callable[[str], None] = print,
) -> float:
    """Train the ``model`` demo without plugins, printing progress; returns the final accuracy.

    Prints (through ``echo``) a header, a progress line every ``log_every`` steps and on the
    last, and the final accuracy. ``on_step`` receives every step's record.
    """
    task = make_task(model, seed)
    echo(task.describe())
    start = time.perf_counter()
    for record in run(task, steps, log_every):
        if on_step is not None:
            on_step(record)
        if record.accuracy is not None:
            echo(record.line(steps))
    final = task.accuracy()
    echo(final_line(final, steps, time.perf_counter() - start))
    return final


def final_line(final: float, steps: int, seconds: float) -> str:
    return f"final accuracy {final:.3f} after {steps} steps ({seconds:.2f} s)"
