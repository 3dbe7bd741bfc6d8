"""torch.Size, Tensor.type(), the typed tensor classes, Tensor.new*, keyword forms (alpha=,
value=, out=) and is_sparse, each compared with torch 2.13."""

from __future__ import annotations

import pickle
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hookgrad

torch = pytest.importorskip("torch")


def _dtype(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


# ---------------------------------------------------------------------------- torch.Size
def test_shape_is_a_size_that_prints_as_torch() -> None:
    """``.shape``/``.size()`` are Size tuples printing as ``torch.Size([2, 3])``; slicing,
    adding and repeating keep the type; ``numel()`` is the product."""
    for lib in (hookgrad, torch):
        x = lib.zeros(2, 3)
        for shape in (x.shape, x.size()):
            assert isinstance(shape, lib.Size) and isinstance(shape, tuple)
            assert shape == (2, 3) and shape.numel() == 6
        assert repr(x.shape) == str(x.shape) == "torch.Size([2, 3])"
        assert repr(x.shape[1:]) == "torch.Size([3])" and isinstance(x.shape[1:], lib.Size)
        assert x.shape[0] == 2 and type(x.shape[0]) is int
        assert repr(x.shape + (1,)) == "torch.Size([2, 3, 1])"  # noqa: RUF005
        assert repr((1,) + x.shape) == "torch.Size([1, 2, 3])"  # noqa: RUF005
        assert repr(x.shape * 2) == "torch.Size([2, 3, 2, 3])"
        assert repr(lib.zeros(()).shape) == "torch.Size([])"
        assert f"{x.shape}" == "torch.Size([2, 3])"


def test_size_constructor_checks_ints_as_torch() -> None:
    """``Size([...])`` takes ints (numpy ints too) and refuses floats with torch's TypeError."""
    assert hookgrad.Size([np.int64(2), 3]) == torch.Size([2, 3])
    with pytest.raises(TypeError) as theirs:
        torch.Size([2.5])
    with pytest.raises(TypeError) as ours:
        hookgrad.Size([2.5])
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize(("shape", "dim"), [((2, 3), 5), ((2, 3), -3), ((), 0)])
def test_size_of_a_missing_dim_is_torch_index_error(shape: tuple[int, ...], dim: int) -> None:
    """``size(dim)`` for a dim the tensor lacks is torch's IndexError, message included."""
    with pytest.raises(IndexError) as theirs:
        torch.ones(shape).size(dim)
    with pytest.raises(IndexError) as ours:
        hookgrad.ones(shape).size(dim)
    assert str(ours.value) == str(theirs.value)
    assert hookgrad.ones(2, 3).size(-1) == torch.ones(2, 3).size(-1) == 3


def test_size_pickles_as_size() -> None:
    """A Size survives pickling as a Size."""
    shape = pickle.loads(pickle.dumps(hookgrad.zeros(4, 1).shape))
    assert type(shape) is hookgrad.Size and shape == (4, 1)


# ---------------------------------------------------------------------------- type() and typed classes
TYPED = [
    "FloatTensor",
    "DoubleTensor",
    "HalfTensor",
    "LongTensor",
    "IntTensor",
    "BoolTensor",
    "ByteTensor",
]


@pytest.mark.parametrize("name", TYPED)
def test_type_names_and_typed_classes_match_torch(name: str) -> None:
    """``x.type()`` names torch's class; the class builds tensors of its dtype from data or
    sizes, and ``isinstance`` checks the dtype."""
    for lib in (hookgrad, torch):
        cls = getattr(lib, name)
        made = cls([1, 0, 1])
        assert made.type() == f"torch.{name}"
        assert isinstance(made, cls) and isinstance(made, lib.Tensor)
        assert not issubclass(cls, lib.Tensor)  # torch's typed classes are not subclasses
        assert tuple(cls(2, 3).shape) == (2, 3) and cls(2, 3).type() == f"torch.{name}"
        assert tuple(cls().shape) == (0,)
        others = [n for n in TYPED if n != name]
        assert not any(isinstance(made, getattr(lib, n)) for n in others)
    assert _dtype(hookgrad.FloatTensor([1, 2])) == _dtype(torch.FloatTensor([1, 2]))


def test_type_casts_like_torch() -> None:
    """``x.type(dtype)``, ``x.type('torch.DoubleTensor')`` and ``x.type(DoubleTensor)`` cast;
    an unknown name is torch's ValueError."""
    for lib in (hookgrad, torch):
        x = lib.tensor([1.5, -2.0])
        assert x.type(lib.float64).type() == "torch.DoubleTensor"
        assert x.type("torch.LongTensor").tolist() == [1, -2]
        assert x.type(lib.IntTensor).type() == "torch.IntTensor"
        with pytest.raises(ValueError):
            x.type("torch.NoSuchTensor")


def test_typed_class_wraps_a_tensor_of_its_dtype_only() -> None:
    """``FloatTensor(t)`` returns a float32 ``t`` itself; another dtype is a TypeError."""
    for lib in (hookgrad, torch):
        t = lib.ones(2)
        assert (
            lib.FloatTensor(t).data_ptr() == t.data_ptr()
            if lib is torch
            else lib.FloatTensor(t) is t
        )
        with pytest.raises(TypeError):
            lib.LongTensor(t)


@given(
    data=st.one_of(
        st.lists(st.integers(-5, 5), max_size=4),
        st.lists(st.lists(st.floats(-3, 3, width=32), min_size=2, max_size=2), max_size=3),
        st.lists(st.booleans(), min_size=1, max_size=3),
    ),
    sizes=st.lists(st.integers(0, 3), max_size=3),
)
@settings(max_examples=30, deadline=None)
def test_tensor_constructor_is_torchs_legacy_one(data: list[Any], sizes: list[int]) -> None:
    """``torch.Tensor(data)`` holds the values in float32 whatever their type, and
    ``torch.Tensor(*sizes)``/``Tensor(Size)``/``Tensor()`` is a float32 tensor of that shape,
    as the tutorials' ``torch.Tensor([0])`` accumulators and ``torch.Tensor(1, n).fill_(v)``
    rely on."""
    for made in (lambda L: L.Tensor(data), lambda L: L.Tensor(*sizes).zero_(),
                 lambda L: L.Tensor(L.Size(sizes)).zero_(), lambda L: L.Tensor()):  # fmt: skip
        ours, theirs = made(hookgrad), made(torch)
        assert _dtype(ours) == _dtype(theirs) == "float32"
        assert ours.tolist() == theirs.tolist()


def test_tensor_constructor_shares_a_tensors_data_and_refuses_a_number() -> None:
    """``torch.Tensor(t)`` is ``t``'s data in ``t``'s dtype (writes show through), and
    ``Tensor(2.5)`` is a TypeError."""
    for lib in (hookgrad, torch):
        t = lib.ones(2, dtype=lib.int64)
        alias = lib.Tensor(t)
        alias[0] = 7
        assert t.tolist() == [7, 1] and _dtype(alias) == "int64"
        with pytest.raises(TypeError, match="data must be a sequence"):
            lib.Tensor(2.5)


def test_device_and_layout_probes_answer_as_for_a_cpu_tensor() -> None:
    """``is_xpu``, ``is_mps``, ``is_meta``, ... are False on a dense CPU tensor, as torch's
    (DCGAN's forward asks ``input.is_cuda or input.is_xpu``)."""
    probes = ["is_cuda", "is_xpu", "is_mps", "is_meta", "is_quantized", "is_mkldnn",
              "is_nested", "is_sparse", "is_sparse_csr"]  # fmt: skip
    for lib in (hookgrad, torch):
        x = lib.ones(2)
        assert [getattr(x, name) for name in probes] == [False] * len(probes)


# ---------------------------------------------------------------------------- new*
NEW = {
    "new_zeros": lambda L, x: x.new_zeros(2, 3),
    "new_zeros_tuple_dtype": lambda L, x: x.new_zeros((2,), dtype=L.float64),
    "new_ones": lambda L, x: x.new_ones((1, 2)),
    "new_ones_dtype": lambda L, x: x.new_ones(3, dtype=L.int64),
    "new_full": lambda L, x: x.new_full((2, 2), 7),
    "new_full_dtype": lambda L, x: x.new_full((2,), 1.5, dtype=L.float64),
    "new_empty_shape": lambda L, x: x.new_empty(2, 4).zero_(),
    "new_tensor": lambda L, x: x.new_tensor([1, 2, 3]),
    "new_tensor_dtype": lambda L, x: x.new_tensor([1, 2], dtype=L.int32),
    "new_data": lambda L, x: x.new([1, 2]),
    "new_tuple_is_data": lambda L, x: x.new((2, 3)),
    "new_sizes": lambda L, x: x.new(2, 3).zero_(),
    "new_nothing": lambda L, x: x.new(),
}


@pytest.mark.parametrize("name", sorted(NEW))
@pytest.mark.parametrize("source", ["float64", "int64"])
def test_new_factories_match_torch(name: str, source: str) -> None:
    """``new_*`` and ``new`` keep the source's dtype unless ``dtype=`` is given, with torch's
    values and shape."""
    ours = NEW[name](hookgrad, hookgrad.ones(1, dtype=getattr(hookgrad, source)))
    theirs = NEW[name](torch, torch.ones(1, dtype=getattr(torch, source)))
    assert _dtype(ours) == _dtype(theirs)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.tolist() == theirs.tolist()
    assert ours.requires_grad is False


# ---------------------------------------------------------------------------- keyword forms
def test_alpha_and_value_keywords_match_torch() -> None:
    """add/sub (method and function) with alpha=, add_/sub_ with alpha=, addcmul_/addcdiv_
    with value= and sign_ give torch's numbers."""
    a0, b0 = np.array([1.0, -2.0, 3.0], np.float32), np.array([0.5, 4.0, -1.0], np.float32)
    results = []
    for lib in (hookgrad, torch):
        a, b = lib.tensor(a0), lib.tensor(b0)
        c = a.clone()
        c.add_(b, alpha=2).sub_(b, alpha=0.5).addcmul_(a, b, value=-1).addcdiv_(a, b + 5, value=3)
        outs = [
            a.add(b, alpha=3),
            lib.add(a, b, alpha=-1),
            a.sub(b, alpha=2),
            lib.sub(a, b, alpha=0.25),
            a.subtract(b, alpha=2),
            c,
            c.clone().sign_(),
        ]
        results.append([o.numpy() for o in outs])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_alpha_gradient_matches_torch() -> None:
    """``a.add(b, alpha=)`` and ``a.sub(b, alpha=)`` scale b's gradient as torch's."""
    grads = []
    for lib in (hookgrad, torch):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([3.0, 4.0], requires_grad=True)
        (a.add(b, alpha=3) * a.sub(b, alpha=0.5)).sum().backward()
        grads.append((a.grad.tolist(), b.grad.tolist()))
    assert grads[0] == grads[1]


def test_is_sparse_is_false() -> None:
    """Dense tensors report ``is_sparse`` False, as torch's."""
    assert hookgrad.ones(2).is_sparse is torch.ones(2).is_sparse is False


OUT = {
    "add": lambda L, a, b, o: L.add(a, b, alpha=2, out=o),
    "mul": lambda L, a, b, o: L.mul(a, b, out=o),
    "matmul": lambda L, a, b, o: L.matmul(a, b.T, out=o),
    "sum": lambda L, a, b, o: L.sum(a, 0, out=o),
    "exp": lambda L, a, b, o: L.exp(a, out=o),
    "cat": lambda L, a, b, o: L.cat([a, b], out=o),
    "cumsum": lambda L, a, b, o: L.cumsum(a, 1, out=o),
    "clamp": lambda L, a, b, o: L.clamp(a, -0.5, 0.5, out=o),
}


@pytest.mark.parametrize("name", sorted(OUT))
def test_out_keyword_matches_torch(name: str) -> None:
    """``out=`` writes the result into the given tensor (resized with torch's warning when
    its shape differs) and returns that tensor."""
    rng = np.random.default_rng(3)
    a0, b0 = (
        rng.standard_normal((2, 3)).astype(np.float32),
        rng.standard_normal((2, 3)).astype(np.float32),
    )
    results = []
    for lib in (hookgrad, torch):
        out = lib.empty(1)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            returned = OUT[name](lib, lib.tensor(a0), lib.tensor(b0), out)
        assert returned is out
        results.append((out.numpy().copy(), [str(w.message)[:60] for w in caught]))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    assert results[0][1] == results[1][1]


def test_out_keyword_refuses_autograd_and_narrowing_casts_as_torch() -> None:
    """``out=`` with an input that requires grad, or into a lower dtype, is torch's error."""
    for program in (
        lambda L: L.add(L.ones(2, requires_grad=True), 1, out=L.empty(2)),
        lambda L: L.add(L.ones(2), 1.5, out=L.empty(2, dtype=L.int64)),
    ):
        with pytest.raises(RuntimeError) as theirs:
            program(torch)
        with pytest.raises(RuntimeError) as ours:
            program(hookgrad)
        assert str(ours.value) == str(theirs.value)
    with torch.no_grad(), hookgrad.no_grad():  # allowed without grad mode, as in torch
        assert hookgrad.add(
            hookgrad.ones(2, requires_grad=True), 1, out=hookgrad.empty(2)
        ).tolist() == [2.0, 2.0]


# ---------------------------------------------------------------------------- memory_format
MEMORY_FORMAT = {
    "clone": lambda L, x: L.clone(x, memory_format=L.contiguous_format),
    "clone_method": lambda L, x: x.clone(memory_format=L.preserve_format),
    "contiguous": lambda L, x: x.transpose(0, 1).contiguous(memory_format=L.contiguous_format),
    "zeros_like": lambda L, x: L.zeros_like(x, memory_format=L.preserve_format),
    "ones_like": lambda L, x: L.ones_like(x, memory_format=L.contiguous_format),
    "full_like": lambda L, x: L.full_like(x, 2.5, memory_format=L.preserve_format),
    "empty_like": lambda L, x: L.empty_like(x, memory_format=L.preserve_format).zero_(),
    "empty": lambda L, x: L.empty(2, 3, memory_format=L.contiguous_format).zero_(),
    "to": lambda L, x: x.to(L.float64, memory_format=L.preserve_format),
    "channels_last_4d": lambda L, x: x.reshape(1, 2, 3, 1).contiguous(
        memory_format=L.channels_last
    ),
}


@pytest.mark.parametrize("name", sorted(MEMORY_FORMAT))
def test_memory_format_is_accepted_and_changes_no_values(name: str) -> None:
    """``memory_format=`` is accepted where torch takes it; values, dtype and shape are torch's
    (hookgrad keeps every tensor row-major, so the format changes nothing else)."""
    x0 = np.arange(6, dtype=np.float32).reshape(2, 3)
    ours = MEMORY_FORMAT[name](hookgrad, hookgrad.tensor(x0))
    theirs = MEMORY_FORMAT[name](torch, torch.tensor(x0))
    assert ours.tolist() == theirs.tolist() and _dtype(ours) == _dtype(theirs)


def test_memory_formats_print_and_check_rank_as_torch() -> None:
    """The formats print as torch's; a channels-last format needs rank 4 (3d: rank 5), torch's
    error otherwise."""
    for name in ("contiguous_format", "preserve_format", "channels_last", "channels_last_3d"):
        assert repr(getattr(hookgrad, name)) == repr(getattr(torch, name))
    for refuse in (
        lambda L: L.ones(2, 3).contiguous(memory_format=L.channels_last),
        lambda L: L.ones(2, 3).clone(memory_format=L.channels_last),
        lambda L: L.ones(2, 3, 4, 5).to(memory_format=L.channels_last_3d),
    ):
        with pytest.raises(RuntimeError) as theirs:
            refuse(torch)
        with pytest.raises(RuntimeError) as ours:
            refuse(hookgrad)
        assert str(ours.value) == str(theirs.value)
