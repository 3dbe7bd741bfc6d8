"""``Bernoulli``: a 0/1 draw by probability or logit (torch's formulas and sampling)."""

from __future__ import annotations

from numbers import Number
from typing import Any, ClassVar

from .._grad_mode import enable_grad, no_grad
from .._ops.random import bernoulli
from .._size import Size
from .._tensor import Tensor
from ..nn._ops.loss import binary_cross_entropy_with_logits
from .categorical import logits_to_probs, probs_to_logits
from .distribution import Distribution, broadcast_all

__all__ = ["Bernoulli"]


class Bernoulli(Distribution):
    """1 with probability ``probs`` (or ``sigmoid(logits)``), else 0."""

    arg_constraints: ClassVar[dict[str, str]] = {
        "probs": "Interval(lower_bound=0.0, upper_bound=1.0)",
        "logits": "Real()",
    }
    _support = "Boolean()"

    def __init__(self, probs: Any = None, logits: Any = None, validate_args: Any = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        given = probs if probs is not None else logits
        (param,) = broadcast_all(given)
        if probs is not None:
            self.probs = param
        else:
            self.logits = param
        self._param = param
        batch_shape = Size() if isinstance(given, Number) else param.size()
        super().__init__(batch_shape, validate_args=validate_args)
        if probs is not None:
            self._check_parameter(
                "probs", param, self.arg_constraints["probs"], (param >= 0) & (param <= 1)
            )
        else:
            self._check_parameter("logits", param, "Real()", param == param)

    def __getattr__(self, name: str) -> Any:
        # Derived with grad enabled, as torch's lazy_property, even if first read under no_grad.
        if name not in ("probs", "logits"):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        with enable_grad():
            if name == "probs":
                value = logits_to_probs(self.__dict__["logits"], is_binary=True)
            else:
                value = probs_to_logits(self.__dict__["probs"], is_binary=True)
        self.__dict__[name] = value
        return value

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return bernoulli(self.probs.expand(shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._check_sample(value, (value == 0) | (value == 1))
        logits, value = broadcast_all(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self) -> Tensor:
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")
