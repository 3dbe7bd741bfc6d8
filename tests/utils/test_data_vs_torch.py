"""Differential tests: hookgrad.utils.data against torch.utils.data (torch 2.13).

The same dataset goes through both libraries' DataLoaders; batches must agree in values,
dtypes, shapes, container types and order. Where the order is random, hookgrad's order is
replayed into torch through ``batch_sampler`` (hookgrad's random streams are its own).
"""

from __future__ import annotations

import collections
import inspect
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hookgrad
import hookgrad.utils.data as hdata

torch = pytest.importorskip("torch")
tdata = torch.utils.data

FAST = settings(max_examples=40, deadline=None)

Point = collections.namedtuple("Point", ["x", "y"])


def _plain(value: Any) -> Any:
    """A library-neutral picture of a batch: tensors become (dtype, shape, values)."""
    if isinstance(value, (hookgrad.Tensor, torch.Tensor)):
        arr = value.detach().numpy()
        return ("tensor", str(arr.dtype), arr.shape, arr.tolist())
    if isinstance(value, dict):
        return ("dict", {k: _plain(v) for k, v in value.items()})
    if isinstance(value, tuple):
        return (type(value).__name__, [_plain(v) for v in value])
    if isinstance(value, list):
        return ("list", [_plain(v) for v in value])
    return ("leaf", type(value).__name__, value)


def _tensor_dataset(lib: Any, n: int) -> Any:
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3) / 7
    y = np.arange(n) % 4
    return lib.utils.data.TensorDataset(lib.tensor(x), lib.tensor(y))


def _batches(loader: Any) -> list[Any]:
    return [_plain(b) for b in loader]


def _both(make: Callable[[Any], Any]) -> tuple[list[Any], list[Any]]:
    """The batches of ``make(lib)`` for hookgrad and for torch."""
    return _batches(make(hookgrad)), _batches(make(torch))


@FAST
@given(
    n=st.integers(0, 23),
    batch_size=st.one_of(st.none(), st.integers(1, 9)),
    drop_last=st.booleans(),
)
def test_sequential_batches_match_torch(n: int, batch_size: int | None, drop_last: bool) -> None:
    """Unshuffled TensorDataset batches, their count and len() equal torch's for any sizes."""
    drop_last = drop_last and batch_size is not None

    def make(lib: Any) -> Any:
        return lib.utils.data.DataLoader(
            _tensor_dataset(lib, n), batch_size=batch_size, drop_last=drop_last
        )

    got, expected = _both(make)
    assert got == expected
    assert len(make(hookgrad)) == len(make(torch)) == len(expected)


@FAST
@given(data=st.data(), n=st.integers(1, 20), batch_size=st.integers(1, 7), drop_last=st.booleans())
def test_given_sampler_and_batch_sampler_match_torch(
    data: st.DataObject, n: int, batch_size: int, drop_last: bool
) -> None:
    """A user's sampler (any index order, repeats allowed) or batch_sampler gives torch's batches."""
    order = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=2 * n))
    got, expected = _both(
        lambda lib: lib.utils.data.DataLoader(
            _tensor_dataset(lib, n), batch_size=batch_size, sampler=order, drop_last=drop_last
        )
    )
    assert got == expected
    groups = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    got, expected = _both(
        lambda lib: lib.utils.data.DataLoader(_tensor_dataset(lib, n), batch_sampler=groups)
    )
    assert got == expected


@FAST
@given(
    n=st.integers(1, 23),
    batch_size=st.integers(1, 9),
    drop_last=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_shuffled_batches_are_torchs_for_the_same_order(
    n: int, batch_size: int, drop_last: bool, seed: int
) -> None:
    """A shuffled epoch is a permutation cut into torch's batches (replayed through a sampler)."""
    hookgrad.manual_seed(seed)
    x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    loader = hdata.DataLoader(
        hdata.TensorDataset(hookgrad.tensor(x), hookgrad.arange(n)),
        batch_size=batch_size,
        shuffle=True,
        drop_last=drop_last,
    )
    got = _batches(loader)
    order = [i for batch in got for i in batch[1][1][3]]  # the index column
    assert len(set(order)) == len(order) == (n // batch_size * batch_size if drop_last else n)
    replay = tdata.DataLoader(
        tdata.TensorDataset(torch.tensor(x), torch.arange(n)),
        batch_size=batch_size,
        sampler=order,
    )
    assert got == _batches(replay)


class _Mixed:
    """Samples mixing every kind of leaf and container default_collate knows."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Any:
        return {
            "float": i / 3,
            "int": i * 7,
            "bool": i % 2 == 0,
            "str": f"s{i}",
            "array_f32": np.full((2,), i, dtype=np.float32),
            "array_i16": np.arange(3, dtype=np.int16) * i,
            "np_f64": np.float64(i) / 4,
            "np_i32": np.int32(i),
            "point": Point(x=i, y=float(i)),
            "pair": (i, [i + 0.5, np.float32(i)]),
            "nested": {"deep": [np.ones((1, 2), dtype=np.float64) * i]},
        }


@pytest.mark.parametrize("batch_size", [None, 1, 3])
def test_default_collate_and_convert_match_torch(batch_size: int | None) -> None:
    """Python/numpy leaves, dicts, namedtuples and nested lists collate (or convert) as in torch."""
    got, expected = _both(lambda lib: lib.utils.data.DataLoader(_Mixed(5), batch_size=batch_size))
    assert got == expected
    if batch_size is not None:  # batched Python floats become float64, unbatched stay floats
        assert expected[0][1]["float"][1] == "float64"


def test_collate_with_tensors_of_every_dtype_matches_torch() -> None:
    """Tensor samples are stacked keeping their dtype; a tensor inside a tuple too."""
    for dtype in ("float32", "float64", "int64", "int32", "bool", "uint8"):
        samples = [np.arange(4).reshape(2, 2).astype(dtype) + (i % 2) for i in range(3)]

        def collate(lib: Any, samples: list[np.ndarray] = samples) -> Any:
            return _plain(lib.utils.data.default_collate([(lib.tensor(s), 1) for s in samples]))

        assert collate(hookgrad) == collate(torch)


@pytest.mark.parametrize(
    "name",
    [
        "DataLoader",
        "RandomSampler",
        "SubsetRandomSampler",
        "WeightedRandomSampler",
        "BatchSampler",
        "random_split",
    ],
)
def test_signature_matches_torch(name: str) -> None:
    """Parameter names, kinds and defaults are torch's (generators aside, which are hookgrad's)."""

    def parameters(lib: Any) -> list[tuple[str, Any, Any]]:
        signature = inspect.signature(getattr(lib.utils.data, name))
        return [
            (p.name, p.kind, "generator" if p.name == "generator" else p.default)
            for p in signature.parameters.values()
        ]

    assert parameters(hookgrad) == parameters(torch)


def test_custom_collate_fn_gets_torchs_sample_lists() -> None:
    """collate_fn receives the list of samples of each batch (one sample without batching)."""

    def describe(samples: Any) -> Any:
        return repr([[t.tolist() for t in sample] for sample in samples])

    def run(lib: Any, batch_size: int | None) -> list[Any]:
        loader = lib.utils.data.DataLoader(
            _tensor_dataset(lib, 5),
            batch_size=batch_size,
            collate_fn=lambda data: describe(data if batch_size else [data]),
        )
        return list(loader)

    for batch_size in (None, 2):
        assert run(hookgrad, batch_size) == run(torch, batch_size)


class _Box:
    """A leaf type default_collate does not know."""

    def __init__(self, value: int) -> None:
        self.value = value


def test_collate_extended_with_a_collate_fn_map_matches_torch() -> None:
    """collate() with default_collate_fn_map plus an entry for a new type collates it, as torch."""

    def run(lib: Any) -> Any:
        module = hookgrad.utils.data._utils.collate if lib is hookgrad else tdata._utils.collate
        extra = {_Box: lambda batch, *, collate_fn_map: sum(b.value for b in batch)}
        samples = [{"box": _Box(i), "x": lib.tensor([i])} for i in range(3)]
        return _plain(
            module.collate(samples, collate_fn_map={**module.default_collate_fn_map, **extra})
        )

    assert run(hookgrad) == run(torch)


def _error(call: Callable[[Any], Any], lib: Any) -> tuple[type[BaseException], str]:
    with pytest.raises(Exception) as info:
        call(lib)
    return type(info.value), str(info.value)


class _Stream:
    """An iterable dataset built for each library: its ``IterableDataset`` base."""

    @staticmethod
    def of(lib: Any, items: list[Any]) -> Any:
        class Stream(lib.utils.data.IterableDataset):
            def __iter__(self) -> Any:
                return iter(items)

            def __len__(self) -> int:
                return len(items)

        return Stream()


def _set_batch_size(lib: Any) -> None:
    _loader(lib).batch_size = 3


def _loader(lib: Any, **options: Any) -> Any:
    return lib.utils.data.DataLoader(_tensor_dataset(lib, 5), **options)


MISUSES: dict[str, Callable[[Any], Any]] = {
    "tensor size mismatch": lambda L: L.utils.data.TensorDataset(L.zeros(3), L.zeros(4)),
    "sampler with shuffle": lambda L: _loader(L, sampler=[0, 1], shuffle=True),
    "batch_sampler with batch_size": lambda L: _loader(L, batch_sampler=[[0]], batch_size=2),
    "batch_sampler with shuffle": lambda L: _loader(L, batch_sampler=[[0]], shuffle=True),
    "batch_sampler with sampler": lambda L: _loader(L, batch_sampler=[[0]], sampler=[0]),
    "batch_sampler with drop_last": lambda L: _loader(L, batch_sampler=[[0]], drop_last=True),
    "no batching with drop_last": lambda L: _loader(L, batch_size=None, drop_last=True),
    "negative workers": lambda L: _loader(L, num_workers=-1),
    "negative timeout": lambda L: _loader(L, timeout=-1),
    "negative prefetch": lambda L: _loader(L, num_workers=1, prefetch_factor=-1),
    "prefetch without workers": lambda L: _loader(L, prefetch_factor=2),
    "persistent without workers": lambda L: _loader(L, persistent_workers=True),
    "context without workers": lambda L: _loader(L, multiprocessing_context="fork"),
    "set batch_size after init": _set_batch_size,
    "iterable with shuffle": lambda L: L.utils.data.DataLoader(_Stream.of(L, [1]), shuffle=True),
    "iterable with sampler": lambda L: L.utils.data.DataLoader(_Stream.of(L, [1]), sampler=[0]),
    "batch size zero": lambda L: L.utils.data.BatchSampler(range(3), 0, False),
    "batch size bool": lambda L: L.utils.data.BatchSampler(range(3), True, False),
    "drop_last not bool": lambda L: L.utils.data.BatchSampler(range(3), 2, 1),
    "replacement not bool": lambda L: L.utils.data.RandomSampler(range(3), replacement=1),
    "num_samples zero": lambda L: L.utils.data.RandomSampler(range(3), num_samples=0),
    "empty dataset shuffled": lambda L: L.utils.data.RandomSampler(range(0)),
    "split sums wrong": lambda L: L.utils.data.random_split(range(5), [2, 2]),
    "split fraction over 1": lambda L: L.utils.data.random_split(range(5), [1.5, -0.5]),
    "stack args and kwargs": lambda L: L.utils.data.StackDataset(range(2), b=range(2)),
    "stack of nothing": lambda L: L.utils.data.StackDataset(),
    "stack size mismatch": lambda L: L.utils.data.StackDataset(a=range(2), b=range(3)),
    "weighted num_samples zero": lambda L: L.utils.data.WeightedRandomSampler([1.0, 2.0], 0),
    "weighted 2d weights": lambda L: L.utils.data.WeightedRandomSampler([[1.0, 2.0]], 2),
    "weighted replacement int": lambda L: L.utils.data.WeightedRandomSampler([1, 2], 1, 1),
    "weighted too many": lambda L: list(L.utils.data.WeightedRandomSampler([1, 2], 3, False)),
    "weighted negative": lambda L: list(L.utils.data.WeightedRandomSampler([-1, 2], 1)),
    "weighted nan": lambda L: list(L.utils.data.WeightedRandomSampler([1, float("nan")], 1)),
    "weighted all zero": lambda L: list(L.utils.data.WeightedRandomSampler([0, 0], 1)),
    "empty concat": lambda L: L.utils.data.ConcatDataset([]),
    "concat of iterable": lambda L: L.utils.data.ConcatDataset([_Stream.of(L, [1])]),
    "concat index too negative": lambda L: L.utils.data.ConcatDataset([range(2)])[-3],
    "collate an object": lambda L: L.utils.data.default_collate([object()]),
    "collate ragged lists": lambda L: L.utils.data.default_collate([[1, 2], [3]]),
    "collate string arrays": lambda L: L.utils.data.default_collate([np.array(["a"])]),
    "base dataset": lambda L: L.utils.data.Dataset()[0],
}


@pytest.mark.parametrize("name", sorted(MISUSES))
def test_misuse_raises_torchs_error(name: str) -> None:
    """Each misuse raises torch's exception type with torch's message."""
    assert _error(MISUSES[name], hookgrad) == _error(MISUSES[name], torch)


def test_empty_split_warns_as_torch() -> None:
    """A fraction that leaves a split empty warns with torch's text."""
    messages = []
    for lib in (hookgrad, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lib.utils.data.random_split(range(2), [0.5, 0.5, 0.0])
        messages.append([str(w.message) for w in caught])
    assert (
        messages[0]
        == messages[1]
        == ["Length of split at index 2 is 0. This might result in an empty dataset."]
    )


@FAST
@given(
    n=st.integers(0, 40),
    weights=st.lists(st.integers(1, 9), min_size=1, max_size=5),
)
def test_random_split_lengths_match_torch(n: int, weights: list[int]) -> None:
    """Fractions give torch's split sizes (floors, remainder round-robin) or torch's refusal when
    rounding makes them sum past 1; the splits partition the dataset."""
    fractions = [w / sum(weights) for w in weights]

    def split(lib: Any) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                return lib.utils.data.random_split(range(n), fractions)
            except ValueError as error:
                return str(error)

    got, expected = split(hookgrad), split(torch)
    if isinstance(expected, str):
        assert got == expected
        return
    assert [len(s) for s in got] == [len(s) for s in expected]
    assert sorted(i for s in got for i in s) == list(range(n))


def test_subset_and_concat_indexing_match_torch() -> None:
    """Subset, ConcatDataset (negative indices too) and ``+`` read the same items as torch."""

    def items(lib: Any) -> list[Any]:
        d = lib.utils.data
        base = _tensor_dataset(lib, 6)
        subset = d.Subset(base, [4, 0, 2])
        joined = d.ConcatDataset([subset, base]) + subset
        picks = [subset[1], joined[0], joined[3], joined[-1], joined[-7], subset[[0, 2]]]
        return [_plain(p) for p in picks] + [len(joined), joined.cumulative_sizes]

    assert items(hookgrad) == items(torch)


@pytest.mark.parametrize("batch_size", [None, 2])
def test_stack_dataset_matches_torch(batch_size: int | None) -> None:
    """StackDataset gives tuples (positional) or dicts (keywords) of items, batched as in torch."""

    def make(lib: Any, keywords: bool) -> Any:
        parts = {"x": _tensor_dataset(lib, 5), "n": list(range(10, 15))}
        stack = (
            lib.utils.data.StackDataset(**parts)
            if keywords
            else lib.utils.data.StackDataset(*parts.values())
        )
        return lib.utils.data.DataLoader(stack, batch_size=batch_size)

    for keywords in (False, True):
        got, expected = _both(lambda lib, keywords=keywords: make(lib, keywords))
        assert got == expected


def test_weighted_sampler_without_replacement_puts_zero_weights_last_as_torch() -> None:
    """Without replacement, zero-weight indices are drawn (not refused) after every positive one."""
    for lib in (hookgrad, torch):
        drawn = list(lib.utils.data.WeightedRandomSampler([0.0, 3.0, 0.0, 2.0], 4, False))
        assert sorted(drawn[:2]) == [1, 3] and sorted(drawn) == [0, 1, 2, 3]


def test_chain_dataset_matches_torch() -> None:
    """IterableDataset ``+`` IterableDataset chains the streams; len() sums."""

    def chained(lib: Any) -> tuple[list[Any], int]:
        chain = _Stream.of(lib, [1, 2]) + _Stream.of(lib, [3])
        return _batches(lib.utils.data.DataLoader(chain, batch_size=2)), len(chain)

    assert chained(hookgrad) == chained(torch)


@pytest.mark.parametrize("batch_size", [None, 1, 2, 3])
@pytest.mark.parametrize("drop_last", [False, True])
def test_iterable_dataset_batches_match_torch(batch_size: int | None, drop_last: bool) -> None:
    """An iterable dataset batches in stream order; len(loader) derives from len(dataset)."""
    if batch_size is None and drop_last:
        return

    def make(lib: Any) -> Any:
        return lib.utils.data.DataLoader(
            _Stream.of(lib, [np.float32(i) for i in range(7)]),
            batch_size=batch_size,
            drop_last=drop_last,
        )

    got, expected = _both(make)
    assert got == expected
    assert len(make(hookgrad)) == len(make(torch))


class _RangeStream:
    """Example 1 of torch's IterableDataset docs: each worker streams its share of a range."""

    @staticmethod
    def of(lib: Any, start: int, end: int, split: bool) -> Any:
        class RangeStream(lib.utils.data.IterableDataset):
            def __init__(self) -> None:
                self.start, self.end = start, end

            def __iter__(self) -> Any:
                info = lib.utils.data.get_worker_info()
                if info is None or not split:
                    return iter(range(self.start, self.end))
                per_worker = -(-(self.end - self.start) // info.num_workers)
                first = self.start + info.id * per_worker
                return iter(range(first, min(first + per_worker, self.end)))

        return RangeStream()


def _split_in_init(lib: Any) -> Callable[[int], None]:
    """Example 2 of torch's docs: ``worker_init_fn`` narrows each worker's dataset copy."""

    def init(worker_id: int) -> None:
        info = lib.utils.data.get_worker_info()
        dataset = info.dataset
        per_worker = -(-(dataset.end - dataset.start) // info.num_workers)
        dataset.start += worker_id * per_worker
        dataset.end = min(dataset.start + per_worker, dataset.end)

    return init


@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
@pytest.mark.parametrize(
    ("start", "end", "workers", "split", "batch_size"),
    [(3, 7, 2, True, None), (3, 7, 2, False, None), (0, 11, 3, True, 2), (3, 7, 12, True, None)],
)
def test_iterable_dataset_with_workers_matches_torchs_processes(
    start: int, end: int, workers: int, split: bool, batch_size: int | None
) -> None:
    """With num_workers > 0, an iterable dataset's items interleave as from torch's workers."""
    got, expected = _both(
        lambda lib: lib.utils.data.DataLoader(
            _RangeStream.of(lib, start, end, split), num_workers=workers, batch_size=batch_size
        )
    )
    assert got == expected


def test_worker_init_fn_configures_each_copy_as_in_torch() -> None:
    """worker_init_fn sees get_worker_info() and changes only its own worker's dataset copy."""
    got, expected = _both(
        lambda lib: lib.utils.data.DataLoader(
            _RangeStream.of(lib, 3, 7, split=False),
            num_workers=2,
            worker_init_fn=_split_in_init(lib),
        )
    )
    assert got == expected == [_plain(torch.tensor([v])) for v in (3, 5, 4, 6)]


class _WhoLoads:
    """A map-style dataset whose samples record which worker loaded them."""

    @staticmethod
    def of(lib: Any) -> Any:
        class WhoLoads(lib.utils.data.Dataset):
            def __len__(self) -> int:
                return 9

            def __getitem__(self, i: int) -> Any:
                info = lib.utils.data.get_worker_info()
                return (i, -1 if info is None else info.id, 0 if info is None else info.num_workers)

        return WhoLoads()


@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
@pytest.mark.parametrize("workers", [0, 2, 3])
def test_map_dataset_workers_load_batches_round_robin_as_torch(workers: int) -> None:
    """Batch i is loaded by worker i % num_workers, with torch's batches, in order."""
    got, expected = _both(
        lambda lib: lib.utils.data.DataLoader(_WhoLoads.of(lib), batch_size=2, num_workers=workers)
    )
    assert got == expected


class _Faulty:
    """A map-style dataset whose item 3 cannot be read."""

    def __len__(self) -> int:
        return 6

    def __getitem__(self, i: int) -> int:
        if i == 3:
            raise KeyError(f"bad item {i}")
        return i


@pytest.mark.parametrize("workers", [0, 2])
def test_an_error_in_a_worker_reaches_the_loop_with_its_type(workers: int) -> None:
    """A dataset's exception stops the loop with its own type, in torch as in hookgrad; hookgrad
    keeps the message as it is (torch prefixes it with the worker's traceback)."""
    for lib in (hookgrad, torch):
        loader = lib.utils.data.DataLoader(_Faulty(), batch_size=2, num_workers=workers)
        with pytest.raises(KeyError) as info:
            list(loader)
        if lib is hookgrad or workers == 0:
            assert info.value.args == ("bad item 3",)


def test_pin_memory_warns_and_changes_nothing_as_torch_on_cpu() -> None:
    """pin_memory=True on a CPU gives torch's warning and the unpinned batches."""
    results = []
    for lib in (hookgrad, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            batches = _batches(_loader(lib, batch_size=2, pin_memory=True))
        results.append((batches, [str(w.message) for w in caught]))
    assert results[0] == results[1]
    assert results[0][0] == _batches(_loader(hookgrad, batch_size=2))


# ---------------------------------------------------------------------------------- training


def _mlp(nn: Any) -> Any:
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))


def _train(lib: Any, model: Any, epochs: list[Any], grad_norms: list[float]) -> list[float]:
    """SGD over ``epochs`` (one loader per epoch), with forward and backward hooks on Linears."""
    for module in model:
        if isinstance(module, lib.nn.Linear):
            module.register_forward_hook(lambda m, args, out: out * 1.0)
            module.register_full_backward_hook(
                lambda m, gin, gout: grad_norms.append(float(gout[0].norm()))
            )
    optimizer = lib.optim.SGD(model.parameters(), lr=0.2, momentum=0.5)
    loss_fn = lib.nn.CrossEntropyLoss()
    losses = []
    for loader in epochs:
        for x, y, _ in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


@pytest.mark.filterwarnings("ignore:Full backward hook is firing:UserWarning")
def test_shuffled_training_loop_gives_torchs_losses() -> None:
    """TensorDataset + shuffled DataLoader + MLP + SGD with hooks: torch's losses and hook values.

    hookgrad's loader shuffles; torch replays the same batch order (read from an index
    column) through ``batch_sampler``, starting from the same weights.
    """
    rng = np.random.default_rng(3)
    x = rng.standard_normal((30, 4)).astype(np.float32)
    y = rng.integers(0, 3, size=30)
    index = np.arange(30)

    hookgrad.manual_seed(1)
    loader = hdata.DataLoader(
        hdata.TensorDataset(hookgrad.tensor(x), hookgrad.tensor(y), hookgrad.tensor(index)),
        batch_size=8,
        shuffle=True,
    )
    order = [batch[2].tolist() for epoch in range(2) for batch in loader]
    assert order[0] != sorted(order[0]) or order[1] != sorted(order[1])  # really shuffled

    torch.manual_seed(0)
    reference = _mlp(torch.nn)
    model = _mlp(hookgrad.nn)
    with hookgrad.no_grad():
        for p, q in zip(reference.parameters(), model.parameters()):
            q.copy_(hookgrad.tensor(p.detach().numpy()))
    hookgrad.manual_seed(1)  # the same two epochs again, for training
    dataset = tdata.TensorDataset(torch.tensor(x), torch.tensor(y), torch.tensor(index))
    torch_epochs = [
        tdata.DataLoader(dataset, batch_sampler=order[:4]),
        tdata.DataLoader(dataset, batch_sampler=order[4:]),
    ]
    hook_values: tuple[list[float], list[float]] = ([], [])
    got = _train(hookgrad, model, [loader, loader], hook_values[0])
    expected = _train(torch, reference, torch_epochs, hook_values[1])
    assert len(got) == 8
    np.testing.assert_allclose(got, expected, rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(hook_values[0], hook_values[1], rtol=2e-4, atol=1e-6)


def test_a_seed_shuffles_as_torch_does() -> None:
    """docs/data.md: the same seed gives hookgrad and torch the same shuffled orders, epoch after
    epoch, with the default generator and with a loader's own."""

    def epochs(lib: Any, own: bool) -> list[list[int]]:
        lib.manual_seed(0)
        generator = lib.Generator().manual_seed(5) if own else None
        data = _tensor_dataset(lib, 20)
        loader = lib.utils.data.DataLoader(data, batch_size=20, shuffle=True, generator=generator)
        return [next(iter(loader))[1].tolist() for _ in range(3)]

    for own in (False, True):
        ours = epochs(hookgrad, own)
        assert ours == epochs(torch, own)
        assert ours[0] != ours[1] and sorted(ours[0]) == sorted(ours[1])


def test_random_sampler_with_replacement_draws_lazily_as_torch() -> None:
    """minGPT's ``RandomSampler(ds, replacement=True, num_samples=int(1e10))``: the first
    batches come at once (indices are drawn 32 at a time as asked) and equal torch's."""
    import time

    firsts = []
    for lib in (hookgrad, torch):
        lib.manual_seed(3407)
        sampler = lib.utils.data.RandomSampler(range(50), replacement=True, num_samples=int(1e10))
        loader = lib.utils.data.DataLoader(list(range(50)), sampler=sampler, batch_size=8)
        started = time.perf_counter()
        batches = iter(loader)
        firsts.append([next(batches).tolist() for _ in range(6)])
        assert time.perf_counter() - started < 1.0
    assert firsts[0] == firsts[1]
