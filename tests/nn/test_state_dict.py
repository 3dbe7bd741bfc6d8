"""state_dict / load_state_dict: keys, detaching, round trips and torch's error texts."""

from __future__ import annotations

import pytest

import hookgrad
import hookgrad.nn as nn


class WithBuffers(nn.Module):
    """A linear child, a persistent and a non-persistent buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(2, 3)
        self.register_buffer("mean", hookgrad.tensor([0.5, -0.5]))
        self.register_buffer("cache", hookgrad.zeros(1), persistent=False)
        self.register_buffer("unset", None)


def test_state_dict_keys_in_order_without_non_persistent():
    """Keys are own params, persistent buffers, then children; None and non-persistent skipped."""
    assert list(WithBuffers().state_dict()) == ["mean", "fc.weight", "fc.bias"]


def test_state_dict_values_are_detached_and_share_memory():
    """Values are detached (no grad) but alias the parameter memory; keep_vars keeps objects."""
    layer = nn.Linear(2, 2)
    sd = layer.state_dict()
    assert not sd["weight"].requires_grad and not isinstance(sd["weight"], nn.Parameter)
    with hookgrad.no_grad():
        layer.weight.fill_(7.0)
    assert sd["weight"].tolist() == [[7.0, 7.0], [7.0, 7.0]]
    assert layer.state_dict(keep_vars=True)["weight"] is layer.weight


def test_state_dict_prefix_and_metadata():
    """prefix prepends to keys; _metadata records each module's version."""
    sd = WithBuffers().state_dict(prefix="net.")
    assert list(sd) == ["net.mean", "net.fc.weight", "net.fc.bias"]
    assert sd._metadata == {"net": {"version": 1}, "net.fc": {"version": 1}}


def test_round_trip_copies_values_in_place():
    """Loading another model's state_dict copies values without replacing Parameters."""
    src, dst = WithBuffers(), WithBuffers()
    weight = dst.fc.weight
    version = weight._version
    result = dst.load_state_dict(src.state_dict())
    assert dst.fc.weight is weight and weight._version == version + 1
    assert dst.fc.weight.tolist() == src.fc.weight.tolist()
    assert repr(result) == "<All keys matched successfully>"
    assert result.missing_keys == [] and result.unexpected_keys == []


def test_non_strict_returns_incompatible_keys():
    """strict=False loads what matches and returns (missing_keys, unexpected_keys)."""
    layer = nn.Linear(2, 3)
    result = layer.load_state_dict(
        {"weight": hookgrad.ones(3, 2), "extra": hookgrad.ones(1)}, strict=False
    )
    assert result.missing_keys == ["bias"] and result.unexpected_keys == ["extra"]
    assert result == (["bias"], ["extra"])
    assert layer.weight.sum().item() == 6.0
    assert "missing_keys=['bias']" in repr(result)


def test_strict_error_message_lists_all_problems():
    """Missing, unexpected and size-mismatched keys appear in one RuntimeError, torch's text."""
    layer = nn.Linear(2, 3)
    with pytest.raises(RuntimeError) as info:
        layer.load_state_dict({"weight": hookgrad.ones(2, 2), "extra": hookgrad.ones(3)})
    assert str(info.value) == (
        "Error(s) in loading state_dict for Linear:\n"
        '\tMissing key(s) in state_dict: "bias". \n'
        '\tUnexpected key(s) in state_dict: "extra". \n'
        "\tsize mismatch for weight: copying a param with shape hookgrad.Size([2, 2]) from "
        "checkpoint, the shape in current model is hookgrad.Size([3, 2])."
    )


def test_size_mismatch_raises_even_when_not_strict():
    """A size mismatch is an error whatever strict says."""
    with pytest.raises(RuntimeError, match="size mismatch for bias"):
        nn.Linear(2, 3).load_state_dict({"bias": hookgrad.ones(4)}, strict=False)


def test_non_tensor_value_is_reported():
    """A non-tensor checkpoint entry is reported with its type."""
    with pytest.raises(
        RuntimeError, match=r"While copying the parameter named \"weight\".*<class 'int'>"
    ):
        nn.Linear(2, 2).load_state_dict({"weight": 1, "bias": hookgrad.ones(2)})


def test_nested_unexpected_keys_under_known_and_unknown_children():
    """Keys under a missing child or naming an unknown leaf are unexpected."""
    model = nn.Sequential(nn.Linear(1, 1))
    sd = model.state_dict()
    sd["0.gamma"] = hookgrad.ones(1)
    sd["5.weight"] = hookgrad.ones(1)
    result = model.load_state_dict(sd, strict=False)
    assert sorted(result.unexpected_keys) == ["0.gamma", "5.weight"]


def test_load_state_dict_requires_mapping():
    """A non-mapping raises TypeError."""
    with pytest.raises(TypeError, match="Expected state_dict to be dict-like"):
        nn.Linear(1, 1).load_state_dict([("weight", hookgrad.ones(1, 1))])


def test_assign_replaces_parameter_objects():
    """assign=True installs the checkpoint tensors (as Parameters keeping requires_grad)."""
    layer = nn.Linear(1, 2)
    new_weight = hookgrad.tensor([[3.0], [4.0]])
    layer.load_state_dict({"weight": new_weight, "bias": hookgrad.zeros(2)}, assign=True)
    assert isinstance(layer.weight, nn.Parameter) and layer.weight.requires_grad
    with hookgrad.no_grad():
        new_weight.fill_(1.0)
    assert layer.weight.tolist() == [[1.0], [1.0]]


def test_buffers_round_trip_and_cast():
    """Buffers load by value; a float64 checkpoint casts into the float32 model."""
    model = WithBuffers()
    sd = {k: v.double() for k, v in WithBuffers().state_dict().items()}
    sd["mean"] = hookgrad.tensor([1.0, 2.0], dtype=hookgrad.float64)
    model.load_state_dict(sd)
    assert model.mean.tolist() == [1.0, 2.0] and model.mean.dtype == hookgrad.float32


class Stateful(nn.Module):
    """A module with extra state (a counter) saved through get_extra_state."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def get_extra_state(self):
        return {"count": self.count}

    def set_extra_state(self, state):
        self.count = state["count"]


def test_extra_state_round_trip():
    """get_extra_state is saved under _extra_state and restored by set_extra_state."""
    src = Stateful()
    src.count = 4
    sd = src.state_dict()
    assert sd["_extra_state"] == {"count": 4}
    dst = Stateful()
    dst.load_state_dict(sd)
    assert dst.count == 4
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "_extra_state"'):
        Stateful().load_state_dict({})
