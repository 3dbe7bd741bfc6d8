"""Index samplers, as in ``torch.utils.data.sampler``."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any, Generic, TypeVar

import numpy as np

from ..._creation import Generator, randint, randperm
from ..._ops.random import multinomial
from ..._tensor import _wrap
from ._utils.seed import draw_seed

__all__ = [
    "BatchSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
]

T_co = TypeVar("T_co", covariant=True)

_REPLACEMENT_CHUNK = 32
"""Draws with replacement come in chunks of this many, as torch draws them."""


class Sampler(Generic[T_co]):
    """Base class: an iterable of indices (or of lists of indices, for batch samplers)."""

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError


class SequentialSampler(Sampler[int]):
    """``0, 1, ..., len(data_source) - 1``, always in that order."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """Random indices: a fresh permutation per pass, or draws with ``replacement=True``.

    Without a ``generator``, each pass seeds a private one from the default generator (one
    draw), as torch does, so ``hookgrad.manual_seed`` fixes the order of every epoch.
    """

    def __init__(
        self,
        data_source: Sized,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: Generator | None = None,
    ) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError(
                f"replacement should be a boolean value, but got replacement={replacement}"
            )
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(
                "num_samples should be a positive integer value, but got "
                f"num_samples={self.num_samples}"
            )

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        generator = self.generator
        if generator is None:
            generator = Generator().manual_seed(draw_seed(None))
        if self.replacement:
            full, rest = divmod(self.num_samples, _REPLACEMENT_CHUNK)
            for _ in range(full):  # lazily: minGPT asks for 1e10 samples
                yield from randint(n, (_REPLACEMENT_CHUNK,), generator=generator).tolist()
            yield from randint(n, (rest,), generator=generator).tolist()
        else:
            full, rest = divmod(self.num_samples, n)
            for _ in range(full):
                yield from randperm(n, generator=generator).tolist()
            yield from randperm(n, generator=generator).tolist()[:rest]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given indices in a fresh random order on each pass (without replacement)."""

    def __init__(self, indices: Sequence[int], generator: Generator | None = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


def _multinomial(
    weights: np.ndarray, num_samples: int, replacement: bool, generator: Generator | None
) -> list[int]:
    """``torch.multinomial(weights, num_samples, replacement, generator=generator)``, as
    torch's sampler draws its indices."""
    rows = _wrap(np.asarray(weights, dtype=np.float64))
    return multinomial(rows, num_samples, replacement, generator=generator).tolist()


class WeightedRandomSampler(Sampler[int]):
    """``num_samples`` indices in ``[0, len(weights))``, each as likely as its weight."""

    def __init__(
        self,
        weights: Sequence[float],
        num_samples: int,
        replacement: bool = True,
        generator: Generator | None = None,
    ) -> None:
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(
                f"num_samples should be a positive integer value, but got num_samples={num_samples}"
            )
        if not isinstance(replacement, bool):
            raise ValueError(
                f"replacement should be a boolean value, but got replacement={replacement}"
            )
        array = np.asarray(weights, dtype=np.float64)
        if array.ndim != 1:
            raise ValueError(
                f"weights should be a 1d sequence but given weights have shape {array.shape}"
            )
        self.weights = array
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        yield from _multinomial(self.weights, self.num_samples, self.replacement, self.generator)

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list[int]]):
    """Groups another sampler's indices into lists of ``batch_size`` (last one shorter or dropped)."""

    def __init__(
        self, sampler: Sampler[Any] | Iterable[Any], batch_size: int, drop_last: bool
    ) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(
                f"batch_size should be a positive integer value, but got batch_size={batch_size}"
            )
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[Any]]:
        indices = iter(self.sampler)
        while batch := list(itertools.islice(indices, self.batch_size)):
            if self.drop_last and len(batch) < self.batch_size:
                return
            yield batch

    def __len__(self) -> int:
        size = len(self.sampler)  # type: ignore[arg-type]
        if self.drop_last:
            return size // self.batch_size
        return (size + self.batch_size - 1) // self.batch_size
