"""``Categorical``: one draw from ``K`` classes, by probabilities or logits (torch's formulas)."""

from __future__ import annotations

from typing import Any, ClassVar

from .. import _creation
from .._dtype import finfo
from .._grad_mode import enable_grad
from .._ops.broadcast import broadcast_tensors
from .._ops.elementwise import floor, log1p
from .._ops.random import multinomial
from .._size import Size
from .._tensor import Tensor
from .distribution import Distribution

__all__ = ["Categorical", "logits_to_probs", "probs_to_logits"]


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """``log(p)`` (or ``log(p) - log1p(-p)`` when binary), ``p`` clamped to [eps, 1 - eps]."""
    eps = finfo(probs.dtype).eps
    ps_clamped = probs.clamp(min=eps, max=1 - eps)
    if is_binary:
        return ps_clamped.log() - log1p(-ps_clamped)
    return ps_clamped.log()


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """``sigmoid(logits)`` when binary, else ``softmax(logits, -1)``."""
    if is_binary:
        return logits.sigmoid()
    return logits.softmax(-1)


class Categorical(Distribution):
    """A draw from ``probs.size(-1)`` classes; ``probs`` are normalised to sum to one and
    ``logits`` to log-sum-exp to zero, as in torch."""

    arg_constraints: ClassVar[dict[str, str]] = {
        "probs": "Simplex()",
        "logits": "IndependentConstraint(Real(), 1)",
    }
    has_enumerate_support = True

    def __init__(
        self, probs: Tensor | None = None, logits: Tensor | None = None, validate_args: Any = None
    ) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
            self._param = self.probs
        else:
            assert logits is not None
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
            self._param = self.logits
        self._num_events = self._param.size()[-1]
        batch_shape = self._param.size()[:-1] if self._param.dim() > 1 else Size()
        super().__init__(batch_shape, validate_args=validate_args)
        if probs is not None:
            p = self.probs
            valid = (p >= 0).all(-1) & ((p.sum(-1) - 1).abs() < 1e-6)
            self._check_parameter("probs", p, "Simplex()", valid)
        else:
            self._check_parameter("logits", self.logits, "IndependentConstraint(Real(), 1)",
                                  (self.logits == self.logits).all(-1))  # fmt: skip

    def __getattr__(self, name: str) -> Any:
        # The parameter not given is derived on first use (torch's lazy_property).
        # Derived with grad enabled, as torch's lazy_property, even if first read under no_grad.
        if name not in ("probs", "logits"):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        with enable_grad():
            if name == "probs":
                value = logits_to_probs(self.__dict__["logits"])
            else:
                value = probs_to_logits(self.__dict__["probs"])
        self.__dict__[name] = value
        return value

    @property
    def param_shape(self) -> Size:
        return self._param.size()

    @property
    def _support(self) -> str:  # type: ignore[override]
        return f"IntegerInterval(lower_bound=0, upper_bound={self._num_events - 1})"

    @property
    def mean(self) -> Tensor:
        return _creation.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype)

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(dim=-1)

    @property
    def variance(self) -> Tensor:
        return _creation.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        """Class indices: ``multinomial`` with replacement on the flattened probabilities."""
        if not isinstance(sample_shape, Size):
            sample_shape = Size(sample_shape)
        probs_2d = self.probs.reshape(-1, self._num_events)
        samples_2d = multinomial(probs_2d, sample_shape.numel(), True).T
        return samples_2d.reshape(self._extended_shape(sample_shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            valid = (value == floor(value)) & (value >= 0) & (value <= self._num_events - 1)
            self._check_sample(value, valid)
        value = value.long().unsqueeze(-1)
        value, log_pmf = broadcast_tensors(value, self.logits)
        value = value[..., :1]
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self) -> Tensor:
        min_real = finfo(self.logits.dtype).min
        logits = self.logits.clamp(min=min_real)
        p_log_p = logits * self.probs
        return -p_log_p.sum(-1)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        num_events = self._num_events
        values = _creation.arange(num_events, dtype=_creation.int64)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1, *self._batch_shape))
        return values
