"""The ``Distribution`` base: batch and event shapes, sample shapes, argument validation."""

from __future__ import annotations

from typing import Any, ClassVar

from .. import _creation
from .._ops.broadcast import broadcast_tensors
from .._size import Size, as_size
from .._tensor import Tensor

__all__ = ["Distribution", "broadcast_all"]


def broadcast_all(*values: Any) -> tuple[Tensor, ...]:
    """Numbers and tensors broadcast to one shape; numbers take the tensors' float dtype."""
    like = next((v for v in values if isinstance(v, Tensor)), None)
    dtype = like.dtype if like is not None and like.is_floating_point() else None
    tensors = [
        v if isinstance(v, Tensor) else _creation.tensor(float(v), dtype=dtype) for v in values
    ]
    return tuple(broadcast_tensors(*tensors))


class Distribution:
    """What every distribution shares: ``batch_shape``, ``event_shape``, ``sample`` by way of
    ``rsample`` or the subclass, and torch's checks of parameters and values (on by default,
    as ``torch.distributions.Distribution.set_default_validate_args(True)``)."""

    has_rsample = False
    _validate_default: ClassVar[bool] = True
    arg_constraints: ClassVar[dict[str, str]] = {}

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        if value not in (True, False):
            raise ValueError
        Distribution._validate_default = value

    def __init__(
        self,
        batch_shape: tuple[int, ...] = Size(),
        event_shape: tuple[int, ...] = Size(),
        validate_args: bool | None = None,
    ) -> None:
        self._batch_shape = as_size(tuple(batch_shape))
        self._event_shape = as_size(tuple(event_shape))
        self._validate_args = self._validate_default if validate_args is None else validate_args

    @property
    def batch_shape(self) -> Size:
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        return self._event_shape

    def _extended_shape(self, sample_shape: Any = ()) -> Size:
        return as_size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def sample(self, sample_shape: Any = ()) -> Tensor:
        """A sample, without gradient: ``rsample`` under ``no_grad`` unless overridden."""
        from .._grad_mode import no_grad

        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        raise NotImplementedError

    def sample_n(self, n: int) -> Tensor:
        return self.sample(Size((n,)))

    def log_prob(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def entropy(self) -> Tensor:
        raise NotImplementedError

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    @property
    def mean(self) -> Tensor:
        raise NotImplementedError

    @property
    def variance(self) -> Tensor:
        raise NotImplementedError

    def perplexity(self) -> Tensor:
        return self.entropy().exp()

    def _check_parameter(self, name: str, value: Tensor, constraint: str, valid: Tensor) -> None:
        """torch's ValueError for a parameter outside its constraint."""
        if self._validate_args and not bool(valid.all()):
            raise ValueError(
                f"Expected parameter {name} ({type(value).__name__} of shape "
                f"{tuple(value.shape)}) of distribution {self!r} to satisfy the constraint "
                f"{constraint}, but found invalid values:\n{value}"
            )

    def _check_sample(self, value: Tensor, valid: Tensor) -> None:
        """torch's ValueError for a value outside the support."""
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        if self._validate_args and not bool(valid.all()):
            raise ValueError(
                "Expected value argument "
                f"({type(value).__name__} of shape {tuple(value.shape)}) "
                f"to be within the support ({self._support}) of the distribution {self!r}, "
                f"but found invalid values:\n{value}"
            )

    _support = ""

    def __repr__(self) -> str:
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(
            f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}"
            for p in names
        )
        return f"{type(self).__name__}({args})"
