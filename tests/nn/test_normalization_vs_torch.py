"""BatchNorm1d/2d, F.batch_norm, GroupNorm and F.group_norm against torch 2.13."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import hookgrad  # noqa: E402

FAST = settings(max_examples=20, deadline=None)


def _x(*shape: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 2 + 0.5).astype(np.float32)


@st.composite
def batch_norm_cases(draw: st.DrawFn) -> tuple[str, tuple[int, ...], dict]:
    name = draw(st.sampled_from(["BatchNorm1d", "BatchNorm2d"]))
    rank = 4 if name == "BatchNorm2d" else draw(st.sampled_from([2, 3]))
    spatial = [draw(st.integers(1, 4)) for _ in range(rank - 2)]
    shape = (draw(st.integers(2, 4)), draw(st.integers(1, 3)), *spatial)
    kwargs = {
        "momentum": draw(st.sampled_from([0.1, 0.5, None])),
        "affine": draw(st.booleans()),
        "track_running_stats": draw(st.booleans()),
        "bias": draw(st.booleans()),
        "eps": draw(st.sampled_from([1e-5, 1e-3])),
    }
    return name, shape, kwargs


@FAST
@given(batch_norm_cases())
def test_batch_norm_trains_and_evaluates_like_torch(same_module, case):
    """BatchNorm over three training batches then one eval batch: torch's outputs, gradients,
    running statistics and num_batches_tracked, for every momentum (None: cumulative average),
    affine, bias and track_running_stats."""
    name, shape, kwargs = case
    same_module(
        lambda lib: getattr(lib.nn, name)(shape[1], **kwargs),
        _x(*shape),
        modes=("train", "train", "train", "eval"),
    )


@FAST
@given(
    st.tuples(st.integers(1, 3), st.integers(2, 3), st.integers(1, 3)),
    st.sampled_from([(1, 2), (2, 2), (4, 4), (1, 4), (2, 6)]),
    st.booleans(),
)
def test_group_norm_matches_torch(same_module, dims, groups_channels, affine):
    """GroupNorm on (N, C, H, W) input: torch's outputs and input/weight/bias gradients."""
    groups, channels = groups_channels
    n, h, w = dims
    same_module(
        lambda lib: lib.nn.GroupNorm(groups, channels, affine=affine),
        _x(n, channels, h, w),
    )


def test_functional_batch_norm_with_running_stats_matches_torch(same_function):
    """F.batch_norm in eval (running statistics) and training: torch's values and gradients."""
    mean, var = np.array([0.5, -1.0, 2.0], np.float32), np.array([1.5, 0.5, 3.0], np.float32)
    for training in (False, True):
        same_function(
            lambda lib, x, w, b, training=training: lib.nn.functional.batch_norm(
                x, lib.tensor(mean), lib.tensor(var), w, b, training, 0.3, 1e-3
            ),
            _x(4, 3, 5),
            _x(3, seed=2),
            _x(3, seed=3),
        )


def test_functional_batch_norm_updates_the_running_stats_like_torch():
    """Training F.batch_norm folds the batch mean and unbiased variance into the buffers."""
    x = _x(5, 3, 2)
    results = []
    for lib in (hookgrad, torch):
        mean, var = lib.zeros(3), lib.ones(3)
        lib.nn.functional.batch_norm(lib.tensor(x), mean, var, training=True, momentum=0.25)
        results.append((mean.numpy(), var.numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0], 1e-5, 1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], 1e-5, 1e-6)


def test_functional_group_norm_matches_torch(same_function):
    """F.group_norm with and without weight and bias, on 2-D to 4-D input."""
    same_function(lambda lib, x: lib.nn.functional.group_norm(x, 2), _x(3, 4))
    same_function(
        lambda lib, x, w, b: lib.nn.functional.group_norm(x, 3, w, b, eps=1e-3),
        _x(2, 6, 3, 2),
        _x(6, seed=4),
        _x(6, seed=5),
    )


def test_a_training_step_counts_versions_as_torch(lib):
    """A training step bumps num_batches_tracked's version (add_) but, as torch's kernel, not
    the running statistics' it overwrites."""
    bn = lib.nn.BatchNorm1d(2)
    before = [bn.running_mean._version, bn.running_var._version, bn.num_batches_tracked._version]
    bn(lib.ones(3, 2))
    after = [bn.running_mean._version, bn.running_var._version, bn.num_batches_tracked._version]
    assert [a - b for a, b in zip(after, before)] == [0, 0, 1]


def test_eval_mode_leaves_the_running_stats_alone():
    """In eval mode BatchNorm reads the running statistics and writes nothing."""
    bn = hookgrad.nn.BatchNorm2d(2).eval()
    bn(hookgrad.randn(3, 2, 2, 2))
    assert bn.running_mean.tolist() == [0.0, 0.0] and bn.running_var.tolist() == [1.0, 1.0]
    assert bn.num_batches_tracked.item() == 0


@pytest.mark.parametrize(
    "build",
    [
        lambda lib: lib.nn.BatchNorm1d(3),
        lambda lib: lib.nn.BatchNorm2d(5, eps=1e-3, momentum=None, affine=False),
        lambda lib: lib.nn.BatchNorm2d(5, track_running_stats=False, bias=False),
        lambda lib: lib.nn.GroupNorm(2, 4),
        lambda lib: lib.nn.GroupNorm(1, 3, eps=0.1, affine=False),
        lambda lib: lib.nn.GroupNorm(1, 3, bias=False),
    ],
)
def test_repr_state_dict_and_initial_values_match_torch(build):
    """repr, state_dict keys, dtypes and initial values (weight 1, bias 0, var 1) as torch."""
    h, t = build(hookgrad), build(torch)
    assert repr(h) == repr(t)
    h_state, t_state = h.state_dict(), t.state_dict()
    assert list(h_state) == list(t_state)
    for key, value in t_state.items():
        assert h_state[key].numpy().dtype == value.numpy().dtype, key
        np.testing.assert_array_equal(h_state[key].numpy(), value.numpy(), err_msg=key)
    assert [n for n, _ in h.named_buffers()] == [n for n, _ in t.named_buffers()]


def test_a_state_dict_without_num_batches_tracked_loads_as_in_torch():
    """A version-1 state dict (no num_batches_tracked) loads strictly, keeping the counter."""
    for lib in (hookgrad, torch):
        bn = lib.nn.BatchNorm1d(2)
        state = {k: v for k, v in bn.state_dict().items() if k != "num_batches_tracked"}
        assert not bn.load_state_dict(state).missing_keys


def test_node_names_match_torch():
    """Batch norm (training and eval) and group norm record torch's node names."""
    for lib in (hookgrad, torch):
        x = lib.ones(2, 4, 3, requires_grad=True)
        bn = lib.nn.BatchNorm1d(4)
        names = [bn(x).grad_fn.name(), bn.eval()(x).grad_fn.name()]
        names.append(lib.nn.GroupNorm(2, 4)(x).grad_fn.name())
        assert names == [
            "NativeBatchNormBackward0",
            "NativeBatchNormBackward0",
            "NativeGroupNormBackward0",
        ]


MISUSE = {
    "bn1d_on_1d": lambda lib: lib.nn.BatchNorm1d(4)(lib.ones(4)),
    "bn1d_on_4d": lambda lib: lib.nn.BatchNorm1d(4)(lib.ones(2, 4, 1, 1)),
    "bn2d_on_3d": lambda lib: lib.nn.BatchNorm2d(4)(lib.ones(2, 4, 3)),
    "bn_wrong_channels": lambda lib: lib.nn.BatchNorm1d(4)(lib.ones(2, 3)),
    "bn_eval_wrong_channels": lambda lib: lib.nn.BatchNorm1d(4).eval()(lib.ones(2, 3)),
    "f_bn_eval_without_stats": lambda lib: lib.nn.functional.batch_norm(lib.ones(2, 4), None, None),
    "f_bn_weight_size": lambda lib: lib.nn.functional.batch_norm(
        lib.ones(2, 4), None, None, lib.ones(3), training=True
    ),
    "f_bn_bias_size": lambda lib: lib.nn.functional.batch_norm(
        lib.ones(2, 4), None, None, None, lib.ones(3), training=True
    ),
    "gn_groups_do_not_divide": lambda lib: lib.nn.GroupNorm(2, 3),
    "gn_on_1d": lambda lib: lib.nn.functional.group_norm(lib.ones(4), 2),
    "gn_input_channels": lambda lib: lib.nn.GroupNorm(2, 4)(lib.ones(2, 3, 5)),
    "gn_weight_size": lambda lib: lib.nn.functional.group_norm(lib.ones(2, 4, 4), 2, lib.ones(3)),
}


@pytest.mark.parametrize("name", list(MISUSE))
def test_misuse_raises_torchs_error(fails_like_torch, name):
    """Wrong ranks, channel counts and missing running statistics fail as in torch."""
    fails_like_torch(MISUSE[name])


@pytest.mark.parametrize(
    "build",
    [
        lambda lib: lib.nn.BatchNorm1d(4)(lib.ones(1, 4)),
        lambda lib: lib.nn.BatchNorm1d(4)(lib.ones(1, 4, 1)),
        lambda lib: lib.nn.BatchNorm2d(2)(lib.ones(1, 2, 1, 1)),
        lambda lib: lib.nn.GroupNorm(2, 2).eval()(lib.ones(1, 2, 1)),
    ],
)
def test_one_value_to_normalize_is_torchs_value_error(build):
    """One value per channel (batch norm, training) or per group (group norm, always) is
    torch's ValueError, with the size as torch prints it (torch.Size or a list)."""
    errors = []
    for lib in (hookgrad, torch):
        with pytest.raises(ValueError) as info:
            build(lib)
        errors.append(str(info.value))
    assert errors[0] == errors[1]


@FAST
@given(
    st.sampled_from(["InstanceNorm1d", "InstanceNorm2d"]),
    st.integers(1, 3),
    st.integers(1, 3),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_instance_norm_trains_and_evaluates_like_torch(
    same_module, name, n, channels, affine, track, unbatched
):
    """InstanceNorm over two training steps and an eval step: torch's outputs, gradients
    and running statistics, batched and unbatched, with and without affine and tracking."""
    spatial = (5,) if name == "InstanceNorm1d" else (3, 4)
    shape = (channels, *spatial) if unbatched else (n, channels, *spatial)
    same_module(
        lambda lib: getattr(lib.nn, name)(channels, affine=affine, track_running_stats=track),
        _x(*shape),
        modes=("train", "train", "eval"),
    )


def test_functional_instance_norm_matches_torch(same_function):
    """F.instance_norm with weight and bias, from input statistics and from running ones."""
    mean, var = np.array([0.5, -1.0, 2.0], np.float32), np.array([1.5, 0.5, 3.0], np.float32)
    for use_input_stats in (True, False):
        same_function(
            lambda lib, x, w, b, use=use_input_stats: lib.nn.functional.instance_norm(
                x, lib.tensor(mean), lib.tensor(var), w, b, use, 0.2, 1e-3
            ),
            _x(2, 3, 5),
            _x(3, seed=2),
            _x(3, seed=3),
        )


def test_instance_norm_repr_and_state_dict_match_torch():
    """repr and state_dict keys of InstanceNorm1d/2d as torch's (no buffers by default)."""
    for build in (
        lambda lib: lib.nn.InstanceNorm2d(3),
        lambda lib: lib.nn.InstanceNorm1d(4, affine=True, track_running_stats=True),
    ):
        h, t = build(hookgrad), build(torch)
        assert repr(h) == repr(t)
        assert list(h.state_dict()) == list(t.state_dict())


INSTANCE_MISUSE = {
    "in1d_on_4d": lambda lib: lib.nn.InstanceNorm1d(3)(lib.ones(2, 3, 4, 4)),
    "in2d_on_2d": lambda lib: lib.nn.InstanceNorm2d(3)(lib.ones(3, 4)),
    "in_affine_channels": lambda lib: lib.nn.InstanceNorm2d(4, affine=True)(lib.ones(2, 3, 4, 4)),
}


@pytest.mark.parametrize("name", list(INSTANCE_MISUSE))
def test_instance_norm_misuse_raises_torchs_error(fails_like_torch, name):
    """Wrong ranks and a channel count that does not match the affine parameters fail as
    in torch."""
    fails_like_torch(INSTANCE_MISUSE[name])


def test_instance_norm_channel_mismatch_without_affine_warns_as_torch():
    """Without affine a channel mismatch only warns, with torch's text."""
    texts = []
    for lib in (hookgrad, torch):
        with pytest.warns(UserWarning) as caught:
            lib.nn.InstanceNorm2d(4)(lib.ones(2, 3, 4, 4))
        texts.append([str(w.message) for w in caught])
    assert texts[0] == texts[1]


def test_instance_norm_records_the_group_norm_node():
    """docs/nn.md: instance norm from input statistics records NativeGroupNormBackward0."""
    x = hookgrad.ones(2, 3, 4, requires_grad=True)
    assert hookgrad.nn.InstanceNorm1d(3)(x).grad_fn.name() == "NativeGroupNormBackward0"


def test_one_spatial_element_is_torchs_value_error():
    """Instance statistics of one element are torch's ValueError naming torch.Size."""
    errors = []
    for lib in (hookgrad, torch):
        with pytest.raises(ValueError) as info:
            lib.nn.InstanceNorm2d(3)(lib.ones(2, 3, 1, 1))
        errors.append(str(info.value))
    assert errors[0] == errors[1]
