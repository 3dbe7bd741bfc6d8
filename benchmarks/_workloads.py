"""The training-step workloads of ``../shared/bench/baseline.md`` and one trainer per engine.

Every trainer starts from the same :class:`Problem` (weights drawn once with numpy, the way
``torch.nn.Linear`` initialises them), so the columns differ only in the engine that runs the
step. One step = forward, ``MSELoss`` (mean), backward, SGD update (no momentum), float32.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

_F32 = np.float32


@dataclass(frozen=True, slots=True)
class Workload:
    """An MLP shape: ``widths[0]`` inputs, then one ``Linear`` per following width."""

    name: str
    batch: int
    widths: tuple[int, ...]
    activation: str
    lr: float = 0.01

    def describe(self) -> str:
        """One line naming the shape, as in baseline.md's workload table."""
        layers = len(self.widths) - 1
        if len(set(self.widths)) == 1:
            shape = f"{layers} x Linear({self.widths[0]}, {self.widths[0]})"
        else:
            shape = "-".join(map(str, self.widths))
        return f"batch {self.batch}, {shape}, {self.activation}"


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("S", 32, (64, 64, 64, 64, 10), "tanh"),
        Workload("M", 128, (256, 256, 256, 10), "relu"),
        Workload("L", 512, (1024, 1024, 1024, 10), "relu"),
        Workload("D", 16, (32,) * 33, "tanh"),
    )
}


@dataclass(frozen=True, slots=True)
class Problem:
    """Initial weights (torch layout: ``(out, in)``) and one fixed batch."""

    weights: tuple[np.ndarray, ...]
    biases: tuple[np.ndarray, ...]
    x: np.ndarray
    y: np.ndarray


def make_problem(workload: Workload, seed: int = 0) -> Problem:
    """Draw torch.nn.Linear's default init (U(+-1/sqrt(fan_in)) for weight and bias) with numpy."""
    rng = np.random.default_rng(seed)
    weights, biases = [], []
    for fan_in, fan_out in zip(workload.widths, workload.widths[1:]):
        bound = 1.0 / math.sqrt(fan_in)
        weights.append(rng.uniform(-bound, bound, (fan_out, fan_in)).astype(_F32))
        biases.append(rng.uniform(-bound, bound, fan_out).astype(_F32))
    x = rng.standard_normal((workload.batch, workload.widths[0])).astype(_F32)
    y = rng.standard_normal((workload.batch, workload.widths[-1])).astype(_F32)
    return Problem(tuple(weights), tuple(biases), x, y)


@dataclass(frozen=True, slots=True)
class Trainer:
    """One engine's training step on a problem, and its parameters in (w0, b0, w1, b1, ...) order."""

    step: Callable[[], None]
    parameters: Callable[[], list[np.ndarray]]


def build_model(lib: ModuleType, workload: Workload, problem: Problem) -> Any:
    """``nn.Sequential`` of ``Linear`` layers holding the problem's weights, activations between.

    Kept apart from :func:`framework_trainer` so a benchmark can hook the model before training.
    """
    nn = lib.nn
    activation = {"tanh": nn.Tanh, "relu": nn.ReLU}[workload.activation]
    layers: list[Any] = []
    for w, b in zip(problem.weights, problem.biases):
        if layers:
            layers.append(activation())
        linear = nn.Linear(w.shape[1], w.shape[0])
        with lib.no_grad():
            linear.weight.copy_(lib.from_numpy(w.copy()))
            linear.bias.copy_(lib.from_numpy(b.copy()))
        layers.append(linear)
    return nn.Sequential(*layers)


def framework_trainer(
    lib: ModuleType,
    model: Any,
    workload: Workload,
    problem: Problem,
    *,
    before_step: Callable[[], bool] | None = None,
) -> Trainer:
    """SGD steps of ``model`` on the problem's batch; ``lib`` is ``torch`` or ``hookgrad``.

    The step is written once against torch's API: that both engines run this very code is the
    point of hookgrad (``import hookgrad as torch``). ``before_step``, when given, runs between
    backward and the optimizer step (hand-written gradient work); False skips the step.
    """
    loss_fn = lib.nn.MSELoss()
    optimizer = lib.optim.SGD(model.parameters(), lr=workload.lr)
    x, y = lib.from_numpy(problem.x.copy()), lib.from_numpy(problem.y.copy())

    def step() -> None:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        if before_step is None or before_step():
            optimizer.step()

    def parameters() -> list[np.ndarray]:
        return [p.detach().numpy().copy() for p in model.parameters()]

    return Trainer(step, parameters)


class _NumpyMLP:
    """Hand-written forward/backward/SGD on preallocated buffers: the floor for a numpy engine.

    Activations are applied in place (their backward needs only the output: ``1 - a**2`` for
    tanh, ``a > 0`` for relu), and SGD scales the gradient buffer in place, so a step allocates
    nothing but the loss scalar.
    """

    def __init__(self, workload: Workload, problem: Problem) -> None:
        self.w = [w.copy() for w in problem.weights]
        self.b = [b.copy() for b in problem.biases]
        self.x, self.y = problem.x, problem.y
        self.lr = workload.lr
        self.tanh = workload.activation == "tanh"
        shapes = [(workload.batch, w.shape[0]) for w in self.w]
        self.h = [np.empty(s, _F32) for s in shapes]  # layer outputs, activated in place
        self.g = [np.empty(s, _F32) for s in shapes]  # grad w.r.t. each layer's pre-activation
        self.tmp = [np.empty(s, _F32) for s in shapes]
        self.mask = [np.empty(s, np.bool_) for s in shapes]
        self.dw = [np.empty_like(w) for w in self.w]
        self.db = [np.empty_like(b) for b in self.b]
        self.loss = 0.0

    def step(self) -> None:
        self._forward()
        self._backward()
        for p, g in zip(self.w + self.b, self.dw + self.db):
            np.multiply(g, self.lr, out=g)
            np.subtract(p, g, out=p)

    def _forward(self) -> None:
        last = len(self.w) - 1
        inp = self.x
        for i, (w, b, out) in enumerate(zip(self.w, self.b, self.h)):
            np.dot(inp, w.T, out=out)
            np.add(out, b, out=out)
            if i < last:
                if self.tanh:
                    np.tanh(out, out=out)
                else:
                    np.maximum(out, 0, out=out)
            inp = out
        d = self.g[last]
        np.subtract(inp, self.y, out=d)
        self.loss = float(np.vdot(d, d)) / d.size
        np.multiply(d, 2.0 / d.size, out=d)

    def _backward(self) -> None:
        for i in reversed(range(len(self.w))):
            g = self.g[i]
            inp = self.x if i == 0 else self.h[i - 1]
            np.dot(g.T, inp, out=self.dw[i])
            np.sum(g, axis=0, out=self.db[i])
            if i > 0:
                self._activation_backward(i - 1, g, self.w[i])

    def _activation_backward(self, j: int, g_out: np.ndarray, w: np.ndarray) -> None:
        """Fill ``self.g[j]`` from the gradient flowing out of layer ``j + 1``."""
        g = self.g[j]
        np.dot(g_out, w, out=g)
        a = self.h[j]
        if self.tanh:
            t = self.tmp[j]
            np.multiply(a, a, out=t)
            np.subtract(1.0, t, out=t)
            np.multiply(g, t, out=g)
        else:
            m = self.mask[j]
            np.greater(a, 0, out=m)
            np.multiply(g, m, out=g)

    def parameters(self) -> list[np.ndarray]:
        return [p.copy() for pair in zip(self.w, self.b) for p in pair]


def numpy_trainer(workload: Workload, problem: Problem) -> Trainer:
    """The hand-written numpy floor as a :class:`Trainer`."""
    mlp = _NumpyMLP(workload, problem)
    return Trainer(mlp.step, mlp.parameters)
