"""Conv1d/F.conv1d and ConvTranspose2d/F.conv_transpose2d against torch 2.13."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import hookgrad  # noqa: E402

FAST = settings(max_examples=40, deadline=None)


def _x(*shape: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@FAST
@given(
    st.integers(1, 2),
    st.sampled_from([(1, 1), (2, 2), (2, 4), (3, 3), (4, 2)]),
    st.integers(1, 9),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(0, 2) | st.sampled_from(["same", "valid"]),
    st.integers(1, 2),
    st.booleans(),
)
def test_conv1d_matches_torch(
    same_or_torch_error, n, channels, length, kernel, stride, padding, dilation, bias
):
    """F.conv1d over stride, padding (ints and strings), dilation, groups and bias: torch's
    values and gradients for input, weight and bias, or torch's error."""
    cin, cout = channels
    groups = math.gcd(cin, cout) if (cin + cout) % 3 == 0 else 1
    arrays = [_x(n, cin, length), _x(cout, cin // groups, kernel, seed=2)]
    if bias:
        arrays.append(_x(cout, seed=3))
    same_or_torch_error(
        lambda lib, x, w, b=None: lib.nn.functional.conv1d(
            x, w, b, stride, padding, dilation, groups
        ),
        *arrays,
    )


@FAST
@given(
    st.integers(1, 2),
    st.sampled_from([(1, 1), (2, 2), (2, 4), (3, 3), (4, 2)]),
    st.tuples(st.integers(1, 5), st.integers(1, 5)),
    st.tuples(st.integers(1, 3), st.integers(1, 3)),
    st.tuples(st.integers(1, 3), st.integers(1, 3)),
    st.tuples(st.integers(0, 2), st.integers(0, 2)),
    st.tuples(st.integers(0, 2), st.integers(0, 2)),
    st.tuples(st.integers(1, 2), st.integers(1, 2)),
    st.booleans(),
)
def test_conv_transpose2d_matches_torch(
    same_or_torch_error, n, channels, size, kernel, stride, padding, output_padding, dilation, bias
):
    """F.conv_transpose2d over stride, padding, output padding, dilation, groups and bias:
    torch's values and gradients for input, weight and bias, or torch's error."""
    cin, cout = channels
    groups = math.gcd(cin, cout) if (cin + cout) % 3 == 0 else 1
    out = [(i - 1) * s - 2 * p + d * (k - 1) + 1 for i, s, p, d, k in zip(
        size, stride, padding, dilation, kernel)]  # fmt: skip
    if min(out) < 1:
        return  # torch's error here depends on its backend (oneDNN or not): not pinned
    arrays = [_x(n, cin, *size), _x(cin, cout // groups, *kernel, seed=2)]
    if bias:
        arrays.append(_x(cout, seed=3))
    same_or_torch_error(
        lambda lib, x, w, b=None: lib.nn.functional.conv_transpose2d(
            x, w, b, stride, padding, output_padding, groups, dilation
        ),
        *arrays,
    )


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize(
    ("kernel", "dilation"), [(2, 1), (4, 1), (4, 3), ((2, 3), 1), ((3, 4), (2, 1))]
)
def test_same_padding_with_an_even_kernel_pads_the_far_side_like_torch(
    same_function, kernel, dilation
):
    """'same' with an even effective kernel: one more zero at the far end, as torch, for
    conv2d and conv1d (values, gradients, output size)."""
    k2 = kernel if isinstance(kernel, tuple) else (kernel, kernel)
    same_function(
        lambda lib, x, w, b: lib.nn.functional.conv2d(x, w, b, padding="same", dilation=dilation),
        _x(2, 3, 6, 5),
        _x(4, 3, *k2, seed=2),
        _x(4, seed=3),
    )
    d1 = dilation if isinstance(dilation, int) else dilation[0]
    same_function(
        lambda lib, x, w: lib.nn.functional.conv1d(x, w, padding="same", dilation=d1),
        _x(2, 3, 7),
        _x(4, 3, k2[1], seed=2),
    )


def test_unbatched_input_matches_torch(same_function):
    """(C, L) input to conv1d and (C, H, W) input to conv_transpose2d work as in torch."""
    same_function(
        lambda lib, x, w: lib.nn.functional.conv1d(x, w, padding=1), _x(3, 6), _x(2, 3, 3)
    )
    same_function(
        lambda lib, x, w: lib.nn.functional.conv_transpose2d(x, w, stride=2),
        _x(3, 4, 4),
        _x(3, 2, 3, 3),
    )


MODULES = {
    "Conv1d": lambda lib: lib.nn.Conv1d(4, 6, 3),
    "Conv1d_options": lambda lib: lib.nn.Conv1d(4, 6, 3, 2, 1, 2, 2, False),
    "Conv1d_same": lambda lib: lib.nn.Conv1d(4, 6, 3, padding="same"),
    "ConvTranspose2d": lambda lib: lib.nn.ConvTranspose2d(4, 6, 3),
    "ConvTranspose2d_options": lambda lib: lib.nn.ConvTranspose2d(
        4, 6, (3, 2), (2, 1), 1, (1, 0), 2, False, (1, 2)
    ),
}


@pytest.mark.parametrize("name", list(MODULES))
def test_modules_match_torch(same_module, name):
    """Each module: torch's repr, parameter names and shapes, outputs and gradients."""
    build = MODULES[name]
    h, t = build(hookgrad), build(torch)
    assert repr(h) == repr(t)
    assert [(k, tuple(v.shape)) for k, v in h.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in t.state_dict().items()
    ]
    same_module(build, _x(2, 4, 7) if "1d" in name else _x(2, 4, 5, 6))


@pytest.mark.parametrize(
    ("build", "fan_in"),
    [
        (lambda: hookgrad.nn.Conv1d(4, 6, 5), 4 * 5),
        (lambda: hookgrad.nn.Conv1d(4, 6, 5, groups=2), 2 * 5),
        (lambda: hookgrad.nn.ConvTranspose2d(4, 6, 3), 6 * 9),
        (lambda: hookgrad.nn.ConvTranspose2d(4, 6, 3, groups=2), 3 * 9),
    ],
)
def test_default_init_is_torchs_distribution(build, fan_in):
    """kaiming_uniform_(a=sqrt(5)) weight and U(+-1/sqrt(fan_in)) bias, fan_in from the
    weight's dim 1 (out_channels / groups for a transposed convolution), as torch."""
    layer = build()
    bound = 1 / math.sqrt(fan_in)
    for p in (layer.weight, layer.bias):
        values = p.detach().numpy()
        assert np.abs(values).max() <= bound and np.abs(values).max() > 0.5 * bound


def test_conv_transpose_output_size_picks_the_output_padding_like_torch():
    """ConvTranspose2d(..., output_size=) chooses the output padding; out of range is
    torch's ValueError."""
    shapes = []
    for lib in (hookgrad, torch):
        layer = lib.nn.ConvTranspose2d(3, 2, 3, stride=2)
        shapes.append(tuple(layer(lib.ones(1, 3, 4, 4), output_size=(10, 9)).shape))
        shapes.append(tuple(layer(lib.ones(3, 4, 4), output_size=[2, 10, 10]).shape))
    assert shapes[:2] == shapes[2:] == [(1, 2, 10, 9), (2, 10, 10)]


def test_an_output_size_out_of_range_is_torchs_value_error():
    """An unreachable output_size is torch's ValueError, naming the range and the input size
    (printed as torch.Size)."""
    errors = []
    for lib in (hookgrad, torch):
        layer = lib.nn.ConvTranspose2d(3, 2, 3, stride=2)
        with pytest.raises(ValueError) as info:
            layer(lib.ones(1, 3, 4, 4), output_size=(12, 10))
        errors.append(str(info.value))
    assert errors[0] == errors[1]


def test_an_unknown_padding_mode_is_a_value_error_naming_the_modes(lib):
    """An unknown padding_mode is torch's ValueError (torch prints the modes as a set, in
    hash order, so only the start and end are compared)."""
    with pytest.raises(ValueError, match=r"^padding_mode must be one of \{.*'bogus'$"):
        lib.nn.Conv1d(3, 2, 3, padding_mode="bogus")


def test_node_names_match_torch():
    """conv1d and conv_transpose2d record ConvolutionBackward0; unbatched input a squeeze."""
    for lib in (hookgrad, torch):
        f = lib.nn.functional
        x3 = lib.ones(1, 2, 5, requires_grad=True)
        x4 = lib.ones(1, 2, 5, 5, requires_grad=True)
        names = [
            f.conv1d(x3, lib.ones(3, 2, 2)).grad_fn.name(),
            f.conv_transpose2d(x4, lib.ones(2, 3, 2, 2)).grad_fn.name(),
            f.conv1d(x3[0], lib.ones(3, 2, 2)).grad_fn.name(),
        ]
        assert names == ["ConvolutionBackward0", "ConvolutionBackward0", "SqueezeBackward1"]


MISUSE = {
    "conv1d_on_1d": lambda lib: lib.nn.functional.conv1d(lib.ones(8), lib.ones(2, 1, 3)),
    "conv1d_on_4d": lambda lib: lib.nn.Conv1d(2, 2, 3)(lib.ones(1, 2, 3, 8)),
    "conv1d_channels": lambda lib: lib.nn.functional.conv1d(lib.ones(2, 3, 8), lib.ones(2, 2, 3)),
    "conv1d_4d_weight": lambda lib: lib.nn.functional.conv1d(
        lib.ones(2, 3, 8), lib.ones(2, 3, 3, 3)
    ),
    "conv1d_kernel_too_big": lambda lib: lib.nn.Conv1d(3, 2, 3)(lib.ones(2, 3, 2)),
    "conv1d_two_strides": lambda lib: lib.nn.functional.conv1d(
        lib.ones(2, 3, 8), lib.ones(2, 3, 3), stride=(1, 1)
    ),
    "conv1d_same_strided": lambda lib: lib.nn.Conv1d(3, 2, 3, padding="same", stride=2),
    "conv1d_groups": lambda lib: lib.nn.Conv1d(3, 2, 3, groups=2),
    "convT_reflect": lambda lib: lib.nn.ConvTranspose2d(3, 2, 3, padding_mode="reflect"),
    "convT_on_2d": lambda lib: lib.nn.functional.conv_transpose2d(
        lib.ones(8, 8), lib.ones(3, 3, 3, 3)
    ),
    "convT_channels": lambda lib: lib.nn.ConvTranspose2d(2, 3, 3)(lib.ones(2, 3, 8, 8)),
    "convT_weight_groups": lambda lib: lib.nn.functional.conv_transpose2d(
        lib.ones(2, 4, 8, 8), lib.ones(4, 3, 3, 3), groups=3
    ),
    "convT_output_padding": lambda lib: lib.nn.ConvTranspose2d(3, 3, 3, 2, output_padding=2)(
        lib.ones(2, 3, 8, 8)
    ),
    "convT_dtypes": lambda lib: lib.nn.functional.conv_transpose2d(
        lib.ones(2, 3, 8, 8), lib.ones(3, 3, 3, 3).double()
    ),
    "convT_output_size_length": lambda lib: lib.nn.ConvTranspose2d(3, 2, 3, stride=2)(
        lib.ones(1, 3, 4, 4), output_size=(10,)
    ),
}


@pytest.mark.parametrize("name", list(MISUSE))
def test_misuse_raises_torchs_error(fails_like_torch, name):
    """Wrong ranks, channels, options and dtypes fail as in torch: same class, same text."""
    fails_like_torch(MISUSE[name])
