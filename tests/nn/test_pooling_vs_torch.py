"""Max, average and adaptive-average pooling (1-D, 2-D, modules and functionals) vs torch 2.13."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import hookgrad  # noqa: E402

FAST = settings(max_examples=40, deadline=None)


def _x(*shape: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@st.composite
def windows(draw: st.DrawFn, dims: int = 2) -> dict[str, Any]:
    """Pooling options: kernel, stride (None half the time), padding, dilation, ceil mode."""
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(dims))
    stride = draw(st.none() | st.tuples(*[st.integers(1, 3)] * dims))
    padding = tuple(draw(st.integers(0, 2)) for _ in range(dims))
    return {
        "kernel_size": kernel if dims == 2 else kernel[0],
        "stride": stride if stride is None or dims == 2 else stride[0],
        "padding": padding if dims == 2 else padding[0],
        "ceil_mode": draw(st.booleans()),
    }


shapes_2d = st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 7), st.integers(1, 7))


def _window_in_padding_only(size: int, options: dict[str, Any], dim: int, dilation: int) -> bool:
    """Whether some output window of max pooling along ``dim`` holds padding only: torch 2.13's
    CPU backward then scatters to index -1 and can abort the whole process (seen in a full
    run), so such cases are left out of the comparison."""
    k, p = options["kernel_size"][dim], options["padding"][dim]
    s = (options["stride"] or options["kernel_size"])[dim]
    span = dilation * (k - 1) + 1
    out = (size + 2 * p - span + (s - 1 if options["ceil_mode"] else 0)) // s + 1
    if options["ceil_mode"] and (out - 1) * s >= size + p:
        out -= 1
    return any(
        all(not 0 <= i * s - p + j * dilation < size for j in range(k)) for i in range(max(out, 0))
    )


@FAST
@given(shapes_2d, windows(), st.integers(1, 2), st.booleans())
def test_max_pool2d_matches_torch(same_or_torch_error, shape, options, dilation, unbatched):
    """F.max_pool2d: torch's values, indices and gradients (or torch's error) for kernel,
    stride, padding, dilation and ceil mode, on batched and unbatched input."""
    assume(not any(_window_in_padding_only(shape[2 + d], options, d, dilation) for d in (0, 1)))
    x = _x(*shape)[0] if unbatched else _x(*shape)
    same_or_torch_error(
        lambda lib, t: lib.nn.functional.max_pool2d(
            t, dilation=dilation, return_indices=True, **options
        ),
        x,
    )


@FAST
@given(shapes_2d, windows(), st.booleans(), st.sampled_from([None, 2, 5]))
def test_avg_pool2d_matches_torch(same_or_torch_error, shape, options, include_pad, divisor):
    """F.avg_pool2d: torch's values and gradients (or error), with count_include_pad,
    ceil mode and divisor_override."""
    same_or_torch_error(
        lambda lib, t: lib.nn.functional.avg_pool2d(
            t, count_include_pad=include_pad, divisor_override=divisor, **options
        ),
        _x(*shape),
    )


@FAST
@given(
    shapes_2d,
    st.tuples(st.integers(1, 5) | st.none(), st.integers(1, 5) | st.none()) | st.integers(1, 5),
)
def test_adaptive_avg_pool2d_matches_torch(same_function, shape, output_size):
    """F.adaptive_avg_pool2d into larger, smaller and None output sizes: torch's numbers."""
    same_function(lambda lib, t: lib.nn.functional.adaptive_avg_pool2d(t, output_size), _x(*shape))


@FAST
@given(st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 9)), windows(dims=1))
def test_1d_pooling_matches_torch(same_function, same_or_torch_error, shape, options):
    """max_pool1d (with indices), avg_pool1d, adaptive_avg_pool1d: torch's numbers or error."""
    same_or_torch_error(
        lambda lib, t: lib.nn.functional.max_pool1d(t, return_indices=True, **options),
        _x(*shape),
    )
    same_or_torch_error(lambda lib, t: lib.nn.functional.avg_pool1d(t, **options), _x(*shape))
    same_function(
        lambda lib, t: lib.nn.functional.adaptive_avg_pool1d(t, options["padding"] + 1),
        _x(*shape),
    )


MODULES = {
    "MaxPool2d": lambda lib: lib.nn.MaxPool2d(3, 2, 1),
    "MaxPool2d_indices": lambda lib: lib.nn.MaxPool2d((2, 3), 1, 1, 2, True, True),
    "AvgPool2d": lambda lib: lib.nn.AvgPool2d(3, 2, 1, True, False),
    "AvgPool2d_default": lambda lib: lib.nn.AvgPool2d(2),
    "AdaptiveAvgPool2d": lambda lib: lib.nn.AdaptiveAvgPool2d((2, None)),
    "AdaptiveAvgPool2d_1": lambda lib: lib.nn.AdaptiveAvgPool2d(1),
    "MaxPool1d": lambda lib: lib.nn.MaxPool1d(2),
    "AvgPool1d": lambda lib: lib.nn.AvgPool1d(3, 2, 1),
    "AdaptiveAvgPool1d": lambda lib: lib.nn.AdaptiveAvgPool1d(3),
}


@pytest.mark.parametrize("name", list(MODULES))
def test_modules_match_torch(same_module, name):
    """Each pooling module: torch's repr, outputs and input gradients."""
    build = MODULES[name]
    assert repr(build(hookgrad)) == repr(build(torch))
    shape = (2, 3, 7) if "1d" in name else (2, 3, 6, 7)
    same_module(build, _x(*shape))


def test_node_names_match_torch():
    """The 2-D ops record torch's nodes; 1-D ones end in a squeeze; (1, 1) adaptive is a mean."""
    for lib in (hookgrad, torch):
        f = lib.nn.functional
        x4, x3 = lib.ones(1, 2, 4, 4, requires_grad=True), lib.ones(1, 2, 4, requires_grad=True)
        names = [
            f.max_pool2d(x4, 2).grad_fn.name(),
            f.avg_pool2d(x4, 2).grad_fn.name(),
            f.adaptive_avg_pool2d(x4, 2).grad_fn.name(),
            f.adaptive_avg_pool2d(x4, 1).grad_fn.name(),
            f.max_pool1d(x3, 2).grad_fn.name(),
            f.avg_pool1d(x3, 2).grad_fn.name(),
        ]
        assert names == [
            "MaxPool2DWithIndicesBackward0",
            "AvgPool2DBackward0",
            "AdaptiveAvgPool2DBackward0",
            "MeanBackward1",
            "SqueezeBackward1",
            "SqueezeBackward1",
        ], lib.__name__


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_max_pool_gradient_is_zero_where_nothing_was_selected_even_for_nan(value):
    """A NaN or inf output gradient reaches only the selected inputs; the others get 0, as
    torch's scatter gives (no NaN from multiplying by a mask)."""
    x = _x(1, 1, 4, 4)
    grads = []
    for lib in (hookgrad, torch):
        t = lib.tensor(x, requires_grad=True)
        lib.nn.functional.max_pool2d(t, 2).backward(lib.full((1, 1, 2, 2), value))
        grads.append(t.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])
    assert (grads[0] == 0).sum() == 12


def test_max_pool_propagates_nan_and_picks_torchs_indices():
    """A window holding NaN gives NaN at the last NaN's index; a window of -inf and padding
    only points at its first input position, as torch's kernel does."""
    x = _x(2, 3, 9, 9)
    x[x > 1] = np.nan
    x[0, 0, :3, :3] = -np.inf
    results = []
    for lib in (hookgrad, torch):
        out, idx = lib.nn.functional.max_pool2d(lib.tensor(x), 3, 2, 1, return_indices=True)
        results.append((out.numpy(), idx.numpy()))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    assert np.isnan(results[0][0]).any()


def test_max_pool_on_integers_keeps_the_dtype():
    """Max pooling an int64 tensor gives int64 values, as torch's."""
    for lib in (hookgrad, torch):
        out = lib.nn.functional.max_pool2d(lib.arange(16).reshape(1, 1, 4, 4), 2)
        assert out.tolist() == [[[[5, 7], [13, 15]]]] and out.dtype == lib.int64


MISUSE = {
    "max_1d_input": lambda lib: lib.nn.functional.max_pool2d(lib.ones(8), 2),
    "max_5d_input": lambda lib: lib.nn.MaxPool2d(2)(lib.ones(1, 2, 3, 8, 8)),
    "max_pad_too_big": lambda lib: lib.nn.functional.max_pool2d(lib.ones(1, 1, 8, 8), 3, 1, 2),
    "max_stride_zero": lambda lib: lib.nn.functional.max_pool2d(lib.ones(1, 1, 8, 8), 3, 0),
    "max_kernel_too_big": lambda lib: lib.nn.MaxPool2d(9)(lib.ones(2, 3, 8, 8)),
    "max_kernel_three_ints": lambda lib: lib.nn.MaxPool2d((2, 2, 2))(lib.ones(1, 1, 8, 8)),
    "avg_pad_too_big": lambda lib: lib.nn.AvgPool2d(3, padding=2)(lib.ones(1, 1, 8, 8)),
    "avg_2d_input": lambda lib: lib.nn.AvgPool2d(2)(lib.ones(3, 8)),
    "avg_kernel_too_big": lambda lib: lib.nn.AvgPool2d(9)(lib.ones(2, 3, 8, 8)),
    "adaptive_1d_input": lambda lib: lib.nn.AdaptiveAvgPool2d(2)(lib.ones(8)),
    "adaptive_three_sizes": lambda lib: lib.nn.AdaptiveAvgPool2d((2, 2, 2))(lib.ones(1, 2, 4, 4)),
    "adaptive_empty_plane": lambda lib: lib.nn.AdaptiveAvgPool2d(2)(lib.ones(2, 3, 0, 4)),
    "max1d_on_4d": lambda lib: lib.nn.MaxPool1d(2)(lib.ones(2, 3, 4, 8)),
    "max1d_on_1d": lambda lib: lib.nn.MaxPool1d(2)(lib.ones(8)),
    "avg1d_on_1d": lambda lib: lib.nn.AvgPool1d(2)(lib.ones(8)),
    "adaptive1d_on_4d": lambda lib: lib.nn.AdaptiveAvgPool1d(2)(lib.ones(2, 3, 4, 8)),
}


@pytest.mark.parametrize("name", list(MISUSE))
def test_misuse_raises_torchs_error(fails_like_torch, name):
    """Wrong ranks, oversized padding or kernels and zero strides fail as in torch."""
    fails_like_torch(MISUSE[name])
