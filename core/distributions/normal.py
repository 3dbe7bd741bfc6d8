"""``Normal(loc, scale)``: sampling through ``torch.normal`` (torch's stream), reparameterised
samples ``loc + eps * scale``, and torch's ``log_prob``/``entropy``/``cdf`` formulas."""

from __future__ import annotations

import math
from numbers import Real
from typing import Any, ClassVar

from .. import _creation
from .._grad_mode import no_grad
from .._ops.elementwise import erf
from .._ops.random import normal
from .._ops.unary import reciprocal
from .._size import Size
from .._tensor import Tensor
from .distribution import Distribution, broadcast_all

__all__ = ["Normal"]


class Normal(Distribution):
    """The normal distribution with mean ``loc`` and standard deviation ``scale``."""

    arg_constraints: ClassVar[dict[str, str]] = {
        "loc": "Real()",
        "scale": "GreaterThan(lower_bound=0.0)",
    }
    has_rsample = True
    _support = "Real()"

    def __init__(self, loc: Any, scale: Any, validate_args: Any = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        if isinstance(loc, Real) and isinstance(scale, Real):
            batch_shape = Size()
        else:
            batch_shape = self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)
        self._check_parameter("loc", self.loc, "Real()", self.loc == self.loc)
        self._check_parameter("scale", self.scale, "GreaterThan(lower_bound=0.0)", self.scale > 0)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        return self.stddev.pow(2)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return normal(self.loc.expand(shape), self.scale.expand(shape))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        eps = _creation.empty(shape, dtype=self.loc.dtype).normal_()
        return self.loc + eps * self.scale

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._check_sample(value, value == value)
        var = self.scale**2
        log_scale = self.scale.log()
        return -((value - self.loc) ** 2) / (2 * var) - log_scale - math.log(math.sqrt(2 * math.pi))

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._check_sample(value, value == value)
        return 0.5 * (1 + erf((value - self.loc) * reciprocal(self.scale) / math.sqrt(2)))

    def entropy(self) -> Tensor:
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()
