"""hookgrad.save / hookgrad.load: round trips, torch's checkpoint format both ways, and the
weights-only rule that no code from a file runs."""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys
import zipfile
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hookgrad
from hookgrad import nn

torch = pytest.importorskip("torch")

_DTYPES = [np.float32, np.float64, np.float16, np.int64, np.int32, np.int8, np.uint8, np.bool_]


class _RunsCode:
    """Unpickling this object runs a shell command that creates a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> object:
        return (os.system, (f"touch {self.marker}",))


@settings(max_examples=30, deadline=None)
@given(
    array=hnp.arrays(
        st.sampled_from(_DTYPES),
        hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4),
    )
)
def test_tensor_round_trip_keeps_values_dtype_and_shape(array: np.ndarray) -> None:
    """Any tensor comes back with its exact values (bit for bit), dtype and shape."""
    buffer = io.BytesIO()
    hookgrad.save(hookgrad.tensor(array), buffer)
    buffer.seek(0)
    loaded = hookgrad.load(buffer)
    assert loaded.dtype == array.dtype and tuple(loaded.shape) == array.shape
    assert loaded.numpy().tobytes() == np.ascontiguousarray(array).tobytes()


def test_state_dicts_and_plain_values_round_trip(tmp_path: Path) -> None:
    """A model's and an optimizer's state dicts, nested containers and plain values come back
    equal: OrderedDict stays OrderedDict, tuples stay tuples, Parameters stay Parameters."""
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    opt = hookgrad.optim.Adam(model.parameters(), lr=0.01)
    model(hookgrad.randn(5, 3)).sum().backward()
    opt.step()
    obj = {
        "model": model.state_dict(),
        "opt": opt.state_dict(),
        "epoch": 7,
        "extra": [1.5, None, "text", b"\x00\xff", (True, {3, 4}), np.arange(3)],
        "param": nn.Parameter(hookgrad.ones(2)),
        "frozen": nn.Parameter(hookgrad.ones(2), requires_grad=False),
    }
    path = tmp_path / "ckpt.pt"
    hookgrad.save(obj, path)
    back = hookgrad.load(path)
    assert type(back["model"]) is OrderedDict
    assert list(back["model"]) == list(obj["model"])
    for key, value in obj["model"].items():
        assert np.array_equal(back["model"][key].numpy(), value.numpy())
    assert back["model"]._metadata == obj["model"]._metadata
    assert back["opt"]["param_groups"] == obj["opt"]["param_groups"]
    assert np.array_equal(
        back["opt"]["state"][0]["exp_avg"].numpy(), obj["opt"]["state"][0]["exp_avg"].numpy()
    )
    assert back["epoch"] == 7
    assert back["extra"][:5] == obj["extra"][:5]
    assert np.array_equal(back["extra"][5], np.arange(3))
    assert type(back["param"]) is nn.Parameter and back["param"].requires_grad
    assert type(back["frozen"]) is nn.Parameter and not back["frozen"].requires_grad


def test_loaded_state_dict_restores_the_model_outputs(tmp_path: Path) -> None:
    """model.load_state_dict(hookgrad.load(...)) gives a fresh model the saved one's outputs."""
    hookgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    hookgrad.save(model.state_dict(), str(tmp_path / "m.pt"))
    fresh = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    fresh.load_state_dict(hookgrad.load(str(tmp_path / "m.pt")))
    x = hookgrad.randn(6, 3)
    assert np.array_equal(fresh(x).detach().numpy(), model(x).detach().numpy())


def test_views_keep_sharing_one_storage(tmp_path: Path) -> None:
    """Tensors viewing one array are saved as one storage and load as views of each other,
    as torch keeps them (a write through one shows in the other)."""
    base = hookgrad.arange(12.0).view(3, 4)
    hookgrad.save({"base": base, "column": base[:, 1], "row": base[2]}, tmp_path / "v.pt")
    back = hookgrad.load(tmp_path / "v.pt")
    assert back["column"].tolist() == [1.0, 5.0, 9.0]
    assert back["column"].numpy().strides == base[:, 1].numpy().strides  # a view, not a copy
    back["base"][2, 1] = -1.0
    assert back["column"].tolist() == [1.0, 5.0, -1.0]
    assert back["row"].tolist() == [8.0, -1.0, 10.0, 11.0]


def test_torch_reads_what_hookgrad_saved(tmp_path: Path) -> None:
    """torch.load (weights_only, its default) reads a hookgrad checkpoint: same values,
    dtypes, Parameters and shared views."""
    base = hookgrad.arange(6).view(2, 3)
    model = nn.Linear(3, 2)
    hookgrad.save(
        {
            "sd": model.state_dict(),
            "base": base,
            "col": base[:, 1],
            "p": nn.Parameter(hookgrad.ones(2, dtype=hookgrad.float64)),
        },
        tmp_path / "h.pt",
    )
    back = torch.load(tmp_path / "h.pt")
    assert back["sd"]["weight"].dtype == torch.float32
    np.testing.assert_array_equal(back["sd"]["weight"].numpy(), model.weight.detach().numpy())
    assert back["base"].dtype == torch.int64
    back["base"][1, 1] = 40
    assert back["col"].tolist() == [1, 40]
    assert isinstance(back["p"], torch.nn.Parameter) and back["p"].dtype == torch.float64


def test_hookgrad_reads_what_torch_saved(tmp_path: Path) -> None:
    """A torch.save'd state dict of float32/int64 tensors loads into a hookgrad model, which
    then computes torch's outputs."""
    torch.manual_seed(0)
    tmodel = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    torch.save(
        {
            "model": tmodel.state_dict(),
            "step": torch.tensor(5),
            "p": torch.nn.Parameter(torch.ones(2)),
        },
        tmp_path / "t.pt",
    )
    back = hookgrad.load(tmp_path / "t.pt")
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    model.load_state_dict(back["model"])
    x = np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)
    np.testing.assert_allclose(
        model(hookgrad.tensor(x)).detach().numpy(),
        tmodel(torch.tensor(x)).detach().numpy(),
        rtol=1e-6,
    )
    assert back["step"].dtype == hookgrad.int64 and back["step"].item() == 5
    assert type(back["p"]) is nn.Parameter and back["p"].requires_grad


def test_weights_only_load_runs_no_code_from_the_file(tmp_path: Path) -> None:
    """A checkpoint whose pickle calls os.system is refused with torch's UnpicklingError,
    and the command does not run; weights_only=False runs it (trusted files only)."""
    marker = tmp_path / "ran"
    path = tmp_path / "evil.pt"
    hookgrad.save({"x": _RunsCode(marker)}, path)
    with pytest.raises(
        pickle.UnpicklingError, match=r"(?s)Weights only load failed.*GLOBAL posix.system"
    ):
        hookgrad.load(path)
    assert not marker.exists()
    hookgrad.load(path, weights_only=False)
    assert marker.exists()


def test_torch_written_code_is_refused_too(tmp_path: Path) -> None:
    """The same refusal for a file torch.save wrote (a torch checkpoint is no safer)."""
    marker = tmp_path / "ran"
    torch.save({"x": _RunsCode(marker)}, tmp_path / "evil.pt")
    with pytest.raises(pickle.UnpicklingError, match="Unsupported global"):
        hookgrad.load(tmp_path / "evil.pt")
    assert not marker.exists()


def test_add_safe_globals_allows_a_trusted_class(tmp_path: Path) -> None:
    """hookgrad.serialization.add_safe_globals lets a weights-only load build that class."""
    hookgrad.save({"frac": __import__("fractions").Fraction(1, 3)}, tmp_path / "f.pt")
    from fractions import Fraction

    with pytest.raises(pickle.UnpicklingError):
        hookgrad.load(tmp_path / "f.pt")
    hookgrad.serialization.add_safe_globals([Fraction])
    try:
        assert hookgrad.load(tmp_path / "f.pt") == {"frac": Fraction(1, 3)}
    finally:
        hookgrad.serialization.clear_safe_globals()


def test_crafted_tensor_cannot_read_outside_its_storage(tmp_path: Path) -> None:
    """A tensor whose size/stride reach past its storage is refused, not read from memory."""
    path = tmp_path / "t.pt"
    torch.save(torch.arange(4), path)
    with zipfile.ZipFile(path) as archive:
        pkl = next(name for name in archive.namelist() if name.endswith("data.pkl"))
    # size (4,) -> (4096,)
    _rewrite(path, pkl, lambda data: data.replace(b"K\x04\x85", b"M\x00\x10\x85"))
    with pytest.raises(pickle.UnpicklingError, match="outside its storage"):
        hookgrad.load(path)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "the file is empty"),
        (b"hello, not a checkpoint", "not a zip archive"),
    ],
)
def test_unreadable_files_name_the_file(tmp_path: Path, content: bytes, reason: str) -> None:
    """An empty or foreign file fails with a RuntimeError naming the file and the reason."""
    path = tmp_path / "broken.pt"
    path.write_bytes(content)
    with pytest.raises(RuntimeError, match=rf"'{path}'.*{reason}"):
        hookgrad.load(path)


def test_truncated_checkpoint_names_the_file(tmp_path: Path) -> None:
    """A checkpoint cut short fails with a RuntimeError naming the file."""
    path = tmp_path / "cut.pt"
    hookgrad.save({"w": hookgrad.ones(100)}, path)
    path.write_bytes(path.read_bytes()[:300])
    with pytest.raises(RuntimeError, match=rf"'{path}'.*truncated or damaged"):
        hookgrad.load(path)


def test_storage_of_the_wrong_size_names_the_file(tmp_path: Path) -> None:
    """A storage record shorter than its element count says is refused, naming the file."""
    path = tmp_path / "short.pt"
    hookgrad.save(hookgrad.ones(4), path)
    _rewrite(path, "archive/data/0", lambda data: data[:8])
    with pytest.raises(RuntimeError, match=rf"'{path}'.*holds 8 bytes, not 4 float32"):
        hookgrad.load(path)


def _rewrite(path: Path, record: str, change: Callable[[bytes], bytes]) -> None:
    """Rewrite one record of a checkpoint's zip archive (to build a damaged file)."""
    with zipfile.ZipFile(path) as archive:
        records = {name: archive.read(name) for name in archive.namelist()}
    records[record] = change(records[record])
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in records.items():
            archive.writestr(name, data)


def test_legacy_torch_format_is_named(tmp_path: Path) -> None:
    """torch's pre-1.6 format is refused with a message saying how to re-save it."""
    path = tmp_path / "old.pt"
    torch.save({"w": torch.ones(2)}, path, _use_new_zipfile_serialization=False)
    with pytest.raises(RuntimeError, match=rf"'{path}'.*legacy"):
        hookgrad.load(path)


def test_cuda_storages_need_map_location(tmp_path: Path) -> None:
    """A storage saved on CUDA loads only with map_location to the CPU, as torch on a
    CPU-only machine; with map_location='cpu', a dict or a callable it loads."""
    path = tmp_path / "cuda.pt"
    hookgrad.save(hookgrad.ones(2), path)
    _rewrite(
        path,
        "archive/data.pkl",
        lambda data: data.replace(b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0"),
    )
    with pytest.raises(RuntimeError, match=r"CUDA device but torch\.cuda\.is_available"):
        hookgrad.load(path)
    for where in ("cpu", hookgrad.device("cpu"), {"cuda:0": "cpu"}, lambda s, loc: s):
        assert hookgrad.load(path, map_location=where).tolist() == [1.0, 1.0]


def test_saving_needs_no_torch(tmp_path: Path) -> None:
    """hookgrad writes torch's format without importing torch."""
    code = (
        "import sys, hookgrad; hookgrad.save({'w': hookgrad.ones(2)}, sys.argv[1]); "
        "print(hookgrad.load(sys.argv[1])['w'].tolist(), 'torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "x.pt")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[1.0, 1.0] False"
