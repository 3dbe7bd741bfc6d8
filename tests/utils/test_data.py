"""hookgrad.utils.data on its own: import paths, seeded shuffling, in-process workers."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

import hookgrad
from hookgrad.utils.data import (
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    get_worker_info,
    random_split,
)


def _run(program: str) -> None:
    subprocess.run([sys.executable, "-c", program], check=True, capture_output=True, timeout=60)


def test_data_is_an_attribute_after_import_hookgrad_alone() -> None:
    """``import hookgrad as torch; torch.utils.data.DataLoader`` works, loaded on first access."""
    _run(
        "import sys; import hookgrad as torch\n"
        "assert 'hookgrad.utils.data' not in sys.modules\n"
        "assert torch.utils.data.DataLoader.__module__ == 'hookgrad.utils.data.dataloader'\n"
        "import hookgrad.utils.data as d; assert d is torch.utils.data\n"
    )


def test_from_import_of_the_submodule_works() -> None:
    """``from hookgrad.utils.data import DataLoader`` in a fresh interpreter."""
    _run("from hookgrad.utils.data import DataLoader, TensorDataset, random_split\n")


def _dataset(n: int = 10) -> TensorDataset:
    return TensorDataset(hookgrad.arange(n))


def _epochs(loader: DataLoader, count: int = 3) -> list[list[int]]:
    return [[i for (batch,) in loader for i in batch.tolist()] for _ in range(count)]


def test_manual_seed_fixes_every_epochs_shuffle() -> None:
    """After manual_seed(s), a shuffled loader's epochs repeat; epochs differ from each other."""
    loader = DataLoader(_dataset(), batch_size=3, shuffle=True)
    hookgrad.manual_seed(5)
    first = _epochs(loader)
    hookgrad.manual_seed(5)
    assert _epochs(loader) == first
    assert all(sorted(epoch) == list(range(10)) for epoch in first)
    assert len({tuple(e) for e in first}) == 3
    hookgrad.manual_seed(6)
    assert _epochs(loader) != first


def test_a_seeded_generator_orders_the_shuffle_whatever_the_global_seed() -> None:
    """DataLoader(generator=Generator().manual_seed(s)) gives the same epochs under any global seed."""

    def run(global_seed: int) -> list[list[int]]:
        hookgrad.manual_seed(global_seed)
        generator = hookgrad.Generator().manual_seed(3)
        return _epochs(DataLoader(_dataset(), batch_size=4, shuffle=True, generator=generator))

    assert run(0) == run(1)


def test_workers_do_not_change_the_shuffled_batches() -> None:
    """num_workers=2 gives the same shuffled batches as num_workers=0 for the same seed."""

    def run(workers: int) -> list[list[int]]:
        hookgrad.manual_seed(2)
        return _epochs(DataLoader(_dataset(), batch_size=3, shuffle=True, num_workers=workers))

    assert run(2) == run(0)


def test_shuffle_draws_seeds_where_torch_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """Per epoch: an unseeded shuffle draws the pass seed and its own seed from the default
    generator; a loader with a generator draws its pass seed from that generator only."""
    from hookgrad.utils.data._utils import seed as seed_module

    draws: list[object] = []
    real = seed_module.draw_seed

    def spy(generator: object) -> int:
        draws.append(generator)
        return real(generator)  # type: ignore[arg-type]

    monkeypatch.setattr(seed_module, "draw_seed", spy)
    monkeypatch.setattr("hookgrad.utils.data.sampler.draw_seed", spy)
    monkeypatch.setattr("hookgrad.utils.data.dataloader.draw_seed", spy)
    _epochs(DataLoader(_dataset(), batch_size=3, shuffle=True), 2)
    assert draws == [None] * 4
    draws.clear()
    generator = hookgrad.Generator().manual_seed(0)
    _epochs(DataLoader(_dataset(), shuffle=True, generator=generator), 2)
    assert draws == [generator] * 2


def test_random_numbers_inside_a_dataset_come_from_the_main_generator() -> None:
    """With workers, a dataset's own random draws are those it makes without workers."""

    class Noisy(Dataset[Any]):
        def __len__(self) -> int:
            return 6

        def __getitem__(self, i: int) -> Any:
            return hookgrad.rand(2) + i

    def run(workers: int) -> list[list[list[float]]]:
        hookgrad.manual_seed(9)
        return [b.tolist() for b in DataLoader(Noisy(), batch_size=2, num_workers=workers)]

    assert run(2) == run(0)


def test_what_is_not_there_yet_is_absent() -> None:
    """The names docs/data.md lists as missing are not exported (an import fails loudly)."""
    import hookgrad.utils.data as data

    for name in ("DistributedSampler", "IterDataPipe", "MapDataPipe"):
        assert not hasattr(data, name)


def test_weighted_sampler_draws_in_proportion_to_the_weights() -> None:
    """With replacement, index i comes up about weights[i] / sum(weights) of the time."""
    sampler = WeightedRandomSampler(
        [1.0, 0.0, 3.0], 4000, generator=hookgrad.Generator().manual_seed(0)
    )
    drawn = list(sampler)
    assert len(sampler) == len(drawn) == 4000
    assert drawn.count(1) == 0
    assert abs(drawn.count(2) / 4000 - 0.75) < 0.03
    assert (
        list(
            WeightedRandomSampler(
                [1.0, 0.0, 3.0], 4000, generator=hookgrad.Generator().manual_seed(0)
            )
        )
        == drawn
    )


def test_weighted_sampler_without_replacement_draws_distinct_indices() -> None:
    """replacement=False draws each index at most once, heavy ones first more often."""
    firsts = [next(iter(WeightedRandomSampler([1, 1, 50, 1], 4, False))) for _ in range(50)]
    assert all(sorted(WeightedRandomSampler([1, 1, 50, 1], 4, False)) == [0, 1, 2, 3] for _ in "ab")
    assert firsts.count(2) > 40


def test_random_sampler_with_replacement_draws_num_samples_in_range() -> None:
    """replacement=True draws num_samples indices in [0, n), repeatable with a generator."""

    def draw() -> list[int]:
        return list(RandomSampler(range(4), True, 70, hookgrad.Generator().manual_seed(1)))

    drawn = draw()
    assert len(drawn) == 70 and set(drawn) == {0, 1, 2, 3}
    assert draw() == drawn


def test_random_sampler_without_replacement_chains_permutations() -> None:
    """num_samples > n without replacement: whole permutations, then part of another."""
    drawn = list(RandomSampler(range(4), num_samples=10))
    assert [sorted(drawn[:4]), sorted(drawn[4:8])] == [[0, 1, 2, 3]] * 2
    assert len(drawn) == 10 and len(set(drawn[8:])) == 2


def test_subset_random_sampler_permutes_the_given_indices() -> None:
    """SubsetRandomSampler yields exactly the given indices, in a seeded random order."""
    indices = [7, 3, 11, 5, 9]
    first = list(SubsetRandomSampler(indices, hookgrad.Generator().manual_seed(0)))
    assert sorted(first) == sorted(indices)
    assert list(SubsetRandomSampler(indices, hookgrad.Generator().manual_seed(0))) == first


def test_random_split_is_reproducible_with_a_generator() -> None:
    """random_split(generator=Generator().manual_seed(s)) gives the same disjoint splits."""

    def split() -> list[list[int]]:
        parts = random_split(range(10), [0.3, 0.7], generator=hookgrad.Generator().manual_seed(4))
        return [list(p) for p in parts]

    parts = split()
    assert [len(p) for p in parts] == [3, 7]
    assert sorted(parts[0] + parts[1]) == list(range(10))
    assert split() == parts


class _Range(IterableDataset[int]):
    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end

    def __iter__(self) -> Any:
        return iter(range(self.start, self.end))


def test_worker_init_fn_runs_per_worker_per_epoch_and_once_when_persistent() -> None:
    """Each epoch starts new workers (one init call each); persistent_workers keep theirs."""
    calls: list[tuple[int, int]] = []

    def init(worker_id: int) -> None:
        info = get_worker_info()
        assert info is not None
        calls.append((worker_id, info.num_workers))

    for persistent, expected in ((False, 4), (True, 2)):
        calls.clear()
        loader = DataLoader(
            _dataset(), num_workers=2, worker_init_fn=init, persistent_workers=persistent
        )
        assert _epochs(loader, 2) == [list(range(10))] * 2
        assert len(calls) == expected and set(calls) == {(0, 2), (1, 2)}


def test_a_worker_changes_only_its_own_dataset_copy() -> None:
    """Attributes a worker sets on info.dataset leave the loader's dataset as it was."""
    dataset = _Range(0, 6)

    def init(worker_id: int) -> None:
        info = get_worker_info()
        assert info is not None
        info.dataset.start = 3 * worker_id
        info.dataset.end = 3 * worker_id + 3

    loader = DataLoader(dataset, num_workers=2, worker_init_fn=init)
    assert [b.item() for b in loader] == [0, 3, 1, 4, 2, 5]
    assert (dataset.start, dataset.end) == (0, 6)


def test_no_worker_info_outside_workers() -> None:
    """get_worker_info() is None in the main process and with num_workers=0."""
    seen = []

    class Probe(Dataset[int]):
        def __len__(self) -> int:
            return 2

        def __getitem__(self, i: int) -> int:
            seen.append(get_worker_info())
            return i

    list(DataLoader(Probe()))
    assert seen == [None, None] and get_worker_info() is None


def test_subset_of_a_tensor_dataset_keeps_autograd() -> None:
    """Batches stacked from a tensor that requires grad carry the graph back to it."""
    weights = hookgrad.ones(4, 2, requires_grad=True)
    (batch,) = next(iter(DataLoader(TensorDataset(weights * 3), batch_size=4)))
    batch.sum().backward()
    assert weights.grad is not None and weights.grad.tolist() == [[3.0, 3.0]] * 4


@pytest.mark.parametrize("num_workers", [0, 2])
def test_len_of_an_iterator_is_the_number_of_batches(num_workers: int) -> None:
    """len(iter(loader)) == len(loader) == ceil(n / batch_size)."""
    loader = DataLoader(_dataset(10), batch_size=4, num_workers=num_workers)
    assert len(iter(loader)) == len(loader) == 3
