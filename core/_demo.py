"""The demo training runs behind ``hookgrad demo`` and ``examples/train_demo.py``.

Two small problems, each written exactly as for PyTorch, on data generated in code
(deterministic for a given seed), so a run needs no download, on either engine (``engine``):
the model is built with the engine's own torch-style API, and a torch model starts from the
weights the hookgrad model of the same seed gets, so both engines train the same run:

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
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from ._creation import manual_seed
from .engines import engine_named

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


def build_model(hidden: int = HIDDEN, *, api: ModuleType | None = None) -> Any:
    """2 -> hidden -> hidden -> 1 with ReLU: enough capacity for the spirals in ~100 steps.

    ``api`` is the engine's top-level module (``hookgrad``, the default, or ``torch``).
    """
    nn = (api or _hookgrad()).nn
    return nn.Sequential(
        nn.Linear(2, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, 1),
    )


def build_cnn(channels: int = 8, *, api: ModuleType | None = None) -> Any:
    """Conv2d(1, channels, 3) -> ReLU -> Flatten -> Linear to the 5 classes (``api``: as
    :func:`build_model`)."""
    nn = (api or _hookgrad()).nn
    return nn.Sequential(
        nn.Conv2d(1, channels, 3),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(channels * 6 * 6, len(GLYPHS)),
    )


def _hookgrad() -> ModuleType:
    return sys.modules[__package__]


def accuracy(model: Any, x: Any, y: Any) -> float:
    """Share of points whose predicted sign matches the label's (call under ``no_grad``)."""
    return float(((model(x) > 0) == (y > 0)).float().mean().item())


def class_accuracy(model: Any, x: Any, y: Any) -> float:
    """Share of images whose highest logit is their class (call under ``no_grad``)."""
    return float((model(x).argmax(1) == y).float().mean().item())


@dataclass(frozen=True)
class Task:
    """A demo problem: data, model, loss, learning rate, and how to score the model."""

    name: str
    data: str
    """What the data is, for the first line of the output."""
    api: ModuleType
    """The engine's top-level module: ``hookgrad`` or ``torch``."""
    x: Any
    y: Any
    model: Any
    loss_fn: Any
    lr: float
    score: Callable[[Any, Any, Any], float]

    def accuracy(self) -> float:
        with self.api.no_grad():
            return self.score(self.model, self.x, self.y)

    def describe(self) -> str:
        """``two spirals: 400 points; model: 4417 parameters``."""
        return f"{self.data}; model: {sum(p.numel() for p in self.model.parameters())} parameters"


def _spirals(seed: int, api: ModuleType) -> Task:
    x, y = two_spirals(POINTS_PER_CLASS, seed)
    data = f"two spirals: {len(x)} points"
    model, loss_fn = build_model(api=api), api.nn.MSELoss()
    x_, y_ = api.from_numpy(x), api.from_numpy(y)
    return Task("mlp", data, api, x_, y_, model, loss_fn, 0.03, accuracy)


def _digits(seed: int, api: ModuleType) -> Task:
    x, y = glyph_digits(IMAGES_PER_CLASS, seed)
    data = f"glyph digits 0-{len(GLYPHS) - 1}: {len(x)} noisy 8x8 images"
    model, loss_fn = build_cnn(api=api), api.nn.CrossEntropyLoss()
    x_, y_ = api.from_numpy(x), api.from_numpy(y)
    return Task("cnn", data, api, x_, y_, model, loss_fn, 0.05, class_accuracy)


MODELS: Final[dict[str, Callable[[int, ModuleType], Task]]] = {"mlp": _spirals, "cnn": _digits}
"""The demo problems by ``--model`` name: ``MODELS[name](seed, api)``."""


def make_task(model: str, seed: int, engine: str = "hookgrad") -> Task:
    """The problem ``model`` (a MODELS key) with data and initial weights from ``seed``, built
    on ``engine`` (``"hookgrad"`` or ``"torch"``: same data, same initial weights)."""
    manual_seed(seed)
    task = MODELS[model](seed, _hookgrad())
    if engine == "hookgrad":
        return task
    api = engine_named(engine).api
    twin = MODELS[model](seed, api)
    weights = {k: api.from_numpy(v.numpy().copy()) for k, v in task.model.state_dict().items()}
    twin.model.load_state_dict(weights)
    return twin


# --------------------------------------------------------------------------------------------
# NaN injection
# --------------------------------------------------------------------------------------------


def _poison(module: Any, args: Any, output: Any) -> None:
    """A forward hook: the output's gradient gets a NaN in entry 0 on its way into the module.

    The tensor hook is registered after the module's full backward hooks took hold of the
    output (global and own hooks wrap it before or as this forward hook runs), so the module
    sees a finite ``grad_output`` and returns a non-finite ``grad_input``: it produced it.
    """
    output.register_hook(_with_nan)


def _with_nan(grad: Any) -> Any:
    poisoned = grad.clone()
    poisoned.view(-1)[0] = float("nan")
    return poisoned


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
        _check_step(self.step, steps)
        modules = [(name, type(m).__name__) for name, m in task.model.named_modules() if name]
        if self.module not in dict(modules):
            listing = ", ".join(f"{name} ({kind})" for name, kind in modules)
            raise ValueError(
                f"no module {self.module!r} in the {task.name} model; modules: {listing}"
            )

    def at(self, model: Any, step: int) -> AbstractContextManager[Any]:
        """Within the block, forward calls poison the module's backward if ``step`` is ours."""
        if step != self.step:
            return nullcontext()
        return model.get_submodule(self.module).register_forward_hook(_poison)


@dataclass(frozen=True)
class SpikeInjection:
    """``--inject-spike STEP:FACTOR``: the loss of training step STEP (from 1) times FACTOR.

    The loss and every gradient of that step grow by FACTOR, as in a bad batch; spike_guard
    sees both signals jump.
    """

    step: int
    factor: float

    @classmethod
    def parse(cls, text: str) -> SpikeInjection:
        """``"120:50"`` -> step 120, factor 50.0; ValueError for anything else."""
        step, sep, factor = text.partition(":")
        try:
            value = float(factor)
        except ValueError:
            value = math.nan
        if not (sep and step.strip().isdigit() and math.isfinite(value) and value > 0):
            raise ValueError(f"expected STEP:FACTOR with FACTOR > 0, e.g. 120:50, got {text!r}")
        return cls(int(step), value)

    def check(self, task: Task, steps: int) -> None:
        """ValueError if the step is not in this run."""
        _check_step(self.step, steps)

    def applied(self, loss: Any, step: int) -> Any:
        """``loss`` times the factor at our step, else ``loss`` itself."""
        return loss * self.factor if step == self.step else loss


def _check_step(step: int, steps: int) -> None:
    if not 1 <= step <= steps:
        raise ValueError(f"step {step} is outside this run's steps 1..{steps}")


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
    inject_spike: SpikeInjection | None = None,
) -> Iterator[StepRecord]:
    """Train ``task`` full-batch with SGD (momentum 0.9) for ``steps`` steps, yielding each.

    Under ``runtime`` (started), each step also emits ``{"plugin": "demo", "kind": "train",
    "data": {"loss", "accuracy" (logged steps only)}}`` with the runtime's step of that
    optimizer step, so it lines up with the plugins' records.
    """
    optimizer = task.api.optim.SGD(task.model.parameters(), lr=task.lr, momentum=0.9)
    if runtime is not None:
        runtime.watch(task.model)  # parameter names for the plugins even without module hooks
    for step in range(1, steps + 1):
        optimizer.zero_grad()
        with inject_nan.at(task.model, step) if inject_nan else nullcontext():
            loss = task.loss_fn(task.model(task.x), task.y)
        if inject_spike is not None:
            loss = inject_spike.applied(loss, step)
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
