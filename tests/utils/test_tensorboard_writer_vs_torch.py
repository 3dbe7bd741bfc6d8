"""``from torch.utils.tensorboard import SummaryWriter`` (karpathy/makemore's first lines) runs
on hookgrad: the writer takes hookgrad tensors where torch's takes torch's, and TensorBoard
reads the same scalars and histograms from both writers' files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hookgrad
from hookgrad.testing import as_torch

pytest.importorskip("tensorboardX")
event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
torch = pytest.importorskip("torch")


def _log(lib: Any, writer_class: Any, logdir: Path) -> None:
    writer = writer_class(log_dir=str(logdir))
    weights = lib.tensor(np.linspace(-1, 1, 50, dtype=np.float32))
    for step in range(3):
        loss = lib.tensor(0.5) / (step + 1)
        writer.add_scalar("Loss/train", loss, step)
        writer.add_scalars("Loss", {"train": loss, "test": loss * 2}, step)
        writer.add_histogram("weights", weights * step, step)
    writer.flush()
    writer.close()


def _read(logdir: Path) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for run in sorted({p.parent for p in logdir.rglob("events.out.tfevents.*")}):
        acc = event_accumulator.EventAccumulator(str(run), size_guidance={"histograms": 0})
        acc.Reload()
        # add_scalars' runs: tensorboardX's Loss/train where torch's is Loss_train (documented).
        prefix = str(run.relative_to(logdir)).replace("/", "_")
        for tag in acc.Tags()["scalars"]:
            values[f"{prefix}/{tag}"] = [(e.step, e.value) for e in acc.Scalars(tag)]
        for tag in acc.Tags()["histograms"]:
            values[f"{prefix}/{tag}"] = [
                (e.step, e.histogram_value.num, round(e.histogram_value.sum, 4))
                for e in acc.Histograms(tag)
            ]
    return values


def test_summary_writer_logs_what_torchs_logs(tmp_path: Path) -> None:
    """Scalars (a 0-dim tensor, a dict of them) and a histogram of a tensor read back the same
    from hookgrad's writer as from torch's, step by step (add_scalars' run folders are named
    main/tag where torch's are main_tag)."""
    from torch.utils.tensorboard import SummaryWriter as TorchWriter

    from hookgrad.utils.tensorboard import SummaryWriter

    _log(hookgrad, SummaryWriter, tmp_path / "ours")
    _log(torch, TorchWriter, tmp_path / "theirs")
    ours, theirs = _read(tmp_path / "ours"), _read(tmp_path / "theirs")
    assert ours.keys() == theirs.keys() and len(ours) == 4, (ours.keys(), theirs.keys())
    for tag, events in theirs.items():
        assert [e[0] for e in ours[tag]] == [e[0] for e in events] == [0, 1, 2]
        np.testing.assert_allclose([e[1:] for e in ours[tag]], [e[1:] for e in events], rtol=1e-6)


def test_torch_utils_tensorboard_import_is_hookgrads() -> None:
    """Inside as_torch(), the import line of a torch script gives hookgrad's writer."""
    with as_torch():
        from torch.utils.tensorboard import SummaryWriter
    from hookgrad.utils.tensorboard import SummaryWriter as Ours

    assert SummaryWriter is Ours
