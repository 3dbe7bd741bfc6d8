"""Sequential, ModuleList and ModuleDict: indexing, slicing, mutation, naming, repr."""

from __future__ import annotations

from collections import OrderedDict

import pytest

import hookgrad
import hookgrad.nn as nn


def _layers(n: int) -> list[nn.Linear]:
    return [nn.Linear(i + 1, i + 2) for i in range(n)]


def test_sequential_forward_chains_modules():
    """forward feeds each module the previous output."""
    seq = nn.Sequential(nn.Linear(2, 2, bias=False), nn.ReLU())
    with hookgrad.no_grad():
        seq[0].weight.copy_(hookgrad.tensor([[1.0, 0.0], [0.0, -1.0]]))
    assert seq(hookgrad.tensor([[3.0, 4.0]])).tolist() == [[3.0, 0.0]]


def test_sequential_indexing_len_iteration():
    """Integer and negative indices, len and iteration follow registration order."""
    a, b, c = _layers(3)
    seq = nn.Sequential(a, b, c)
    assert (seq[0], seq[-1], len(seq), list(seq)) == (a, c, 3, [a, b, c])
    with pytest.raises(IndexError, match="index 3 is out of range"):
        seq[3]


def test_sequential_slice_returns_sequential_keeping_names():
    """A slice is a new Sequential that keeps the original keys."""
    a, b, c = _layers(3)
    sub = nn.Sequential(a, b, c)[1:]
    assert type(sub) is nn.Sequential and list(sub) == [b, c]
    assert list(sub._modules) == ["1", "2"]


def test_sequential_from_ordered_dict_uses_keys():
    """An OrderedDict argument names the children."""
    seq = nn.Sequential(OrderedDict([("fc", nn.Linear(1, 1)), ("act", nn.Tanh())]))
    assert [n for n, _ in seq.named_children()] == ["fc", "act"]
    assert isinstance(seq.act, nn.Tanh)


def test_sequential_append_insert_extend_pop_delete_renumber():
    """Mutations keep children numbered 0..n-1 in order."""
    a, b, c, d = _layers(4)
    seq = nn.Sequential(a)
    assert seq.append(c) is seq
    seq.insert(1, b)
    seq.extend([d])
    assert list(seq) == [a, b, c, d] and list(seq._modules) == ["0", "1", "2", "3"]
    assert seq.pop(1) is b
    del seq[0]
    assert list(seq) == [c, d] and list(seq._modules) == ["0", "1"]
    seq.insert(-1, a)
    assert list(seq) == [c, a, d]
    seq[1] = b
    assert seq[1] is b


def test_sequential_add_concatenates():
    """seq1 + seq2 is a new Sequential of both; += extends in place."""
    a, b = _layers(2)
    left = nn.Sequential(a)
    both = left + nn.Sequential(b)
    assert list(both) == [a, b] and len(left) == 1
    left += nn.Sequential(b)
    assert list(left) == [a, b]


def test_modulelist_registers_parameters():
    """Modules in a ModuleList contribute their parameters with positional names."""
    holder = nn.Module()
    holder.layers = nn.ModuleList(_layers(2))
    assert [n for n, _ in holder.named_parameters()] == [
        "layers.0.weight",
        "layers.0.bias",
        "layers.1.weight",
        "layers.1.bias",
    ]


def test_modulelist_list_operations():
    """append/extend/insert/index/slice/len/iter/pop/del behave like a list."""
    a, b, c, d = _layers(4)
    ml = nn.ModuleList([a])
    ml.append(c)
    ml.extend([d])
    ml.insert(1, b)
    assert list(ml) == [a, b, c, d] and len(ml) == 4 and ml[-1] is d
    sliced = ml[1:3]
    assert type(sliced) is nn.ModuleList and list(sliced) == [b, c]
    assert list(sliced._modules) == ["0", "1"]
    assert ml.pop(0) is a and list(ml._modules) == ["0", "1", "2"]
    del ml[1:]
    assert list(ml) == [b]
    ml[0] = c
    assert ml[0] is c
    with pytest.raises(IndexError, match="index 1 is out of range"):
        ml[1]


def test_modulelist_extend_rejects_non_iterable():
    """extend with a non-iterable raises TypeError naming the type."""
    with pytest.raises(
        TypeError, match=r"ModuleList\.extend should be called with an iterable, but got Linear"
    ):
        nn.ModuleList().extend(nn.Linear(1, 1))


def test_modulelist_has_no_forward():
    """Calling a ModuleList raises NotImplementedError."""
    with pytest.raises(NotImplementedError):
        nn.ModuleList()(hookgrad.ones(1))


def test_modulelist_repr_groups_repeats():
    """Consecutive identical children print once with a range and a count."""
    ml = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2), nn.ReLU()])
    assert repr(ml) == (
        "ModuleList(\n"
        "  (0-1): 2 x Linear(in_features=2, out_features=2, bias=True)\n"
        "  (2): ReLU()\n"
        ")"
    )
    assert repr(nn.ModuleList()) == "ModuleList()"


def test_moduledict_mapping_behaviour():
    """ModuleDict keeps insertion order and supports the dict operations."""
    md = nn.ModuleDict({"act": nn.ReLU(), "fc": nn.Linear(1, 1)})
    md["out"] = nn.Tanh()
    md.update([("drop", nn.Dropout())])
    assert list(md) == ["act", "fc", "out", "drop"] and len(md) == 4
    assert "fc" in md and isinstance(md.fc, nn.Linear)
    assert [type(v).__name__ for v in md.values()] == ["ReLU", "Linear", "Tanh", "Dropout"]
    assert isinstance(md.pop("act"), nn.ReLU) and "act" not in md
    del md["out"]
    assert list(md.keys()) == ["fc", "drop"]
    assert [n for n, _ in md.named_parameters()] == ["fc.weight", "fc.bias"]
    md.clear()
    assert len(md) == 0


def test_moduledict_update_errors():
    """update rejects non-iterables and pairs of the wrong length."""
    with pytest.raises(TypeError, match="iterable of key/value pairs, but got int"):
        nn.ModuleDict().update(3)
    with pytest.raises(ValueError, match="element #0 has length 3; 2 is required"):
        nn.ModuleDict().update([("a", nn.ReLU(), 1)])


def test_sequential_state_dict_names():
    """Nested containers give dotted positional keys in state_dict."""
    model = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU(), nn.Linear(2, 1)))
    assert list(model.state_dict()) == ["0.weight", "0.bias", "1.1.weight", "1.1.bias"]
