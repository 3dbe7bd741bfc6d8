"""hookgrad.utils.safetensors: safetensors.torch's API, weights moving between torch and
hookgrad through real safetensors files."""

from __future__ import annotations

import builtins
from pathlib import Path

import numpy as np
import pytest

import hookgrad
from hookgrad import nn
from hookgrad.utils import safetensors as hg_st

torch = pytest.importorskip("torch")
st_torch = pytest.importorskip("safetensors.torch")


def _torch_mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.LayerNorm(8), torch.nn.Linear(8, 3)
    )


def _hg_mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 3))


_X = np.linspace(-2, 2, 20, dtype=np.float32).reshape(5, 4)


def test_torch_weights_load_into_a_hookgrad_model(tmp_path: Path) -> None:
    """A file safetensors.torch wrote from torch weights gives a hookgrad model torch's outputs."""
    tmodel = _torch_mlp()
    st_torch.save_file(tmodel.state_dict(), tmp_path / "m.safetensors")
    model = _hg_mlp()
    model.load_state_dict(hg_st.load_file(tmp_path / "m.safetensors"))
    np.testing.assert_allclose(
        model(hookgrad.tensor(_X)).detach().numpy(),
        tmodel(torch.tensor(_X)).detach().numpy(),
        rtol=1e-5,
        atol=1e-6,
    )


def test_hookgrad_weights_load_into_a_torch_model(tmp_path: Path) -> None:
    """A file hookgrad wrote loads with safetensors.torch into a torch model that then computes
    hookgrad's outputs; metadata travels too."""
    hookgrad.manual_seed(3)
    model = _hg_mlp()
    hg_st.save_file(model.state_dict(), tmp_path / "m.safetensors", metadata={"step": "9"})
    tmodel = _torch_mlp()
    tmodel.load_state_dict(st_torch.load_file(tmp_path / "m.safetensors"))
    np.testing.assert_allclose(
        tmodel(torch.tensor(_X)).detach().numpy(),
        model(hookgrad.tensor(_X)).detach().numpy(),
        rtol=1e-5,
        atol=1e-6,
    )
    from safetensors import safe_open

    with safe_open(tmp_path / "m.safetensors", framework="pt") as f:
        assert f.metadata() == {"step": "9"}


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int8", "bool"])
def test_bytes_round_trip_keeps_dtype_and_values(dtype: str) -> None:
    """save()/load() bytes keep every dtype and value, and torch reads the same bytes."""
    array = (np.arange(6) % 3 - 1).astype(dtype).reshape(2, 3)
    data = hg_st.save({"a": hookgrad.tensor(array)})
    back = hg_st.load(data)["a"]
    assert back.dtype == array.dtype and np.array_equal(back.numpy(), array)
    assert np.array_equal(st_torch.load(data)["a"].numpy(), array)


def test_bfloat16_weights_move_both_ways(tmp_path: Path) -> None:
    """bfloat16 tensors from torch load as hookgrad bfloat16 with the same bits, and back."""
    pytest.importorskip("ml_dtypes")
    weights = torch.randn(3, 4).to(torch.bfloat16)
    st_torch.save_file({"w": weights}, tmp_path / "b.safetensors")
    back = hg_st.load_file(tmp_path / "b.safetensors")["w"]
    assert back.dtype == hookgrad.bfloat16
    assert np.array_equal(
        back.numpy().view(np.uint16), weights.view(torch.int16).numpy().view(np.uint16)
    )
    hg_st.save_file({"w": back}, tmp_path / "c.safetensors")
    assert torch.equal(st_torch.load_file(tmp_path / "c.safetensors")["w"], weights)


def test_loaded_tensors_are_writable() -> None:
    """Loaded tensors own writable memory: in-place updates (an optimizer step) work."""
    back = hg_st.load(hg_st.save({"a": hookgrad.ones(3)}))["a"]
    back.add_(1.0)
    assert back.tolist() == [2.0, 2.0, 2.0]


def test_refusals_match_safetensors_torch() -> None:
    """Non-contiguous and memory-sharing tensors are refused with safetensors.torch's errors."""
    base_hg, base_t = hookgrad.ones(3, 4), torch.ones(3, 4)
    for save, t in ((hg_st.save, base_hg.t()), (st_torch.save, base_t.t())):
        with pytest.raises(ValueError, match="You are trying to save a non contiguous tensor: `a`"):
            save({"a": t})
    for save, t in ((hg_st.save, base_hg), (st_torch.save, base_t)):
        with pytest.raises(RuntimeError, match="Some tensors share memory"):
            save({"a": t, "b": t[1]})


def test_damaged_file_error_names_the_file(tmp_path: Path) -> None:
    """A truncated file fails with safetensors' error, noting which file."""
    path = tmp_path / "cut.safetensors"
    hg_st.save_file({"a": hookgrad.ones(10)}, path)
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(Exception, match="incomplete metadata") as info:
        hg_st.load_file(path)
    assert str(path) in "".join(info.value.__notes__)


def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the safetensors package, the ImportError says which extra to install."""
    real_import = builtins.__import__

    def no_safetensors(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("safetensors"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_safetensors)
    with pytest.raises(ImportError, match=r"pip install 'hookgrad\[safetensors\]'"):
        hg_st.save({"a": hookgrad.ones(1)})
