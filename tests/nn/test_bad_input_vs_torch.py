"""README/getting-started: `hookgrad.nn` layers and losses as torch's, also on bad input.

A battery of wrong shapes, wrong dtypes, bad options and edge values, each run on torch 2.13
and on hookgrad: the same exception class and text (torch. -> hookgrad.), or the same numbers.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hookgrad  # noqa: E402

X = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)

MISUSE: dict[str, Callable[[Any], Any]] = {
    "conv_wrong_channels": lambda lib: lib.nn.Conv2d(3, 2, 3)(lib.ones(1, 4, 5, 5)),
    "conv_input_too_small": lambda lib: lib.nn.Conv2d(1, 1, 3)(lib.ones(1, 1, 2, 2)),
    "conv_2d_input": lambda lib: lib.nn.Conv2d(1, 1, 3)(lib.ones(5, 5)),
    "conv_5d_input": lambda lib: lib.nn.Conv2d(1, 1, 3)(lib.ones(2, 1, 1, 5, 5)),
    "conv_groups_mismatch": lambda lib: lib.nn.Conv2d(3, 4, 3, groups=2),
    "functional_conv_padding_full": lambda lib: lib.nn.functional.conv2d(
        lib.ones(1, 1, 5, 5), lib.ones(1, 1, 3, 3), padding="full"
    ),
    "functional_conv_same_and_strided": lambda lib: lib.nn.functional.conv2d(
        lib.ones(1, 1, 5, 5), lib.ones(1, 1, 3, 3), padding="same", stride=2
    ),
    "conv_same_and_strided": lambda lib: lib.nn.Conv2d(1, 1, 3, stride=2, padding="same"),
    "conv_double_input": lambda lib: lib.nn.Conv2d(1, 1, 3)(lib.ones(1, 1, 5, 5).double()),
    "conv_double_input_no_bias": lambda lib: lib.nn.Conv2d(1, 1, 3, bias=False)(
        lib.ones(1, 1, 5, 5).double()
    ),
    "embedding_float_index": lambda lib: lib.nn.Embedding(3, 2)(lib.tensor([1.0])),
    "embedding_negative_index": lambda lib: lib.nn.Embedding(3, 2)(lib.tensor([-1])),
    "embedding_index_too_big": lambda lib: lib.nn.Embedding(3, 2)(lib.tensor([3])),
    "cross_entropy_target_rows": lambda lib: lib.nn.CrossEntropyLoss()(
        lib.ones(2, 3), lib.tensor([0, 1, 2])
    ),
    "nll_negative_target": lambda lib: lib.nn.NLLLoss()(lib.ones(2, 3), lib.tensor([0, -1])),
    "nll_target_too_big": lambda lib: lib.nn.NLLLoss()(lib.ones(2, 3), lib.tensor([0, 5])),
    "l1_incompatible_shapes": lambda lib: lib.nn.L1Loss()(lib.ones(3), lib.ones(4)),
    "mse_incompatible_shapes": lambda lib: lib.nn.MSELoss()(lib.ones(2, 3), lib.ones(2)),
    "bce_target_shape": lambda lib: lib.nn.BCEWithLogitsLoss()(lib.ones(3), lib.ones(2)),
    "bad_reduction": lambda lib: lib.nn.MSELoss(reduction="avg")(lib.ones(2), lib.ones(2)),
    "linear_scalar_input": lambda lib: lib.nn.Linear(2, 2)(lib.tensor(1.0)),
    "linear_double_input": lambda lib: lib.nn.Linear(2, 2)(lib.ones(3, 1, 2).double()),
    "linear_long_input": lambda lib: lib.nn.Linear(2, 2)(lib.ones(1, 2, dtype=lib.int64)),
    "linear_half_input": lambda lib: lib.nn.Linear(2, 2)(lib.ones(2).half()),
    "linear_double_input_no_bias": lambda lib: lib.nn.Linear(2, 2, bias=False)(
        lib.ones(1, 2).double()
    ),
    "flatten_dim_out_of_range": lambda lib: lib.nn.Flatten(2, 5)(lib.ones(2, 3, 4)),
    "flatten_start_after_end": lambda lib: lib.nn.Flatten(2, 1)(lib.ones(2, 3, 4)),
    "softmax_dim_out_of_range": lambda lib: lib.nn.Softmax(dim=3)(lib.ones(2, 3)),
    "dropout_p_above_one": lambda lib: lib.nn.Dropout(1.5),
    "module_list_of_a_number": lambda lib: lib.nn.ModuleList([lib.nn.ReLU()]).append(3),
    "sequential_append_a_function": lambda lib: lib.nn.Sequential().append(len),
    "sequential_append_a_class": lambda lib: lib.nn.Sequential().append(lib.nn.ReLU),
    "optimizer_of_a_module_class": lambda lib: lib.optim.SGD([lib.nn.Linear], lr=0.1),
    "module_without_forward": lambda lib: lib.nn.Module()(lib.ones(1)),
    "kaiming_on_a_vector": lambda lib: lib.nn.init.kaiming_uniform_(lib.nn.Parameter(lib.ones(3))),
    "unknown_nonlinearity": lambda lib: lib.nn.init.calculate_gain("swish"),
    "normal_with_a_negative_std": lambda lib: lib.nn.init.normal_(
        lib.nn.Parameter(lib.ones(2)), 0.0, -1.0
    ),
    "xavier_on_a_vector": lambda lib: lib.nn.init.xavier_uniform_(lib.nn.Parameter(lib.ones(3))),
    "kaiming_unknown_mode": lambda lib: lib.nn.init.kaiming_uniform_(
        lib.nn.Parameter(lib.ones(3, 3)), mode="fan"
    ),
    "leaky_relu_gain_of_a_string": lambda lib: lib.nn.init.calculate_gain("leaky_relu", "x"),
    "missing_parameter": lambda lib: lib.nn.Linear(2, 2).get_parameter("nope"),
    "load_state_dict_list_value": lambda lib: lib.nn.Linear(1, 1).load_state_dict(
        {"weight": [[1.0]], "bias": lib.ones(1)}
    ),
    "module_assigned_to_parameter_name": lambda lib: setattr(
        lib.nn.Linear(1, 1), "weight", lib.nn.ReLU()
    ),
}


@pytest.mark.parametrize("name", list(MISUSE))
def test_bad_input_raises_torchs_exception_and_text(name: str, fails_like_torch: Any) -> None:
    """Wrong shapes, dtypes and options fail as in torch: same class, same message."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the size-mismatch warnings of the losses
        fails_like_torch(MISUSE[name])


def _values(out: Any) -> Any:
    if isinstance(out, tuple):
        return tuple(_values(o) for o in out)
    if hasattr(out, "detach"):
        return out.detach().numpy().astype(np.float64)
    return out


def _forward_backward(lib: Any, build: Callable[[Any], Any], x: Any, *rest: Any) -> Any:
    xt = lib.tensor(x, requires_grad=True)
    out = build(lib)(xt, *(lib.tensor(r) for r in rest))
    (
        out * lib.tensor(np.linspace(1.0, 2.0, out.numel(), dtype=np.float32)).reshape(out.shape)
    ).sum().backward()
    return out, xt.grad


EDGES: dict[str, tuple[Callable[[Any], Any], tuple[Any, ...]]] = {
    "cross_entropy_3d": (
        lambda lib: lib.nn.CrossEntropyLoss(),
        (X, np.array([[0, 1, 2, 1], [2, 2, 0, 1]])),
    ),
    "cross_entropy_ignore_index": (
        lambda lib: lib.nn.CrossEntropyLoss(ignore_index=1, reduction="sum"),
        (X[:, :, 0], np.array([1, 2])),
    ),
    "cross_entropy_probabilities_smoothing": (
        lambda lib: lib.nn.CrossEntropyLoss(label_smoothing=0.2),
        (X[:, :, 0], np.array([[0.1, 0.2, 0.7], [1.0, 0.0, 0.0]], np.float32)),
    ),
    "cross_entropy_weighted_mean": (
        lambda lib: lib.nn.CrossEntropyLoss(weight=lib.tensor([1.0, 2.0, 3.0])),
        (X[:, :, 0], np.array([0, 2])),
    ),
    "nll_unbatched": (lambda lib: lib.nn.NLLLoss(), (X[0, :, 0], np.array(2))),
    "cross_entropy_every_target_ignored": (
        lambda lib: lib.nn.CrossEntropyLoss(),
        (X[:, :, 0], np.array([-100, -100])),
    ),
    "nll_every_target_ignored_weighted": (
        lambda lib: lib.nn.NLLLoss(weight=lib.tensor([1.0, 0.5, 2.0]), ignore_index=1),
        (X[:, :, 0], np.array([1, 1])),
    ),
    "cross_entropy_smoothing_every_target_ignored": (
        lambda lib: lib.nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=0),
        (X[:, :, 0], np.array([0, 0])),
    ),
    "bce_extreme_logits": (
        lambda lib: lib.nn.BCEWithLogitsLoss(reduction="none", pos_weight=lib.tensor([2.0])),
        (np.array([100.0, -100.0, 0.0], np.float32), np.array([0.0, 1.0, 0.5], np.float32)),
    ),
    "log_softmax_extreme": (
        lambda lib: lib.nn.LogSoftmax(dim=1),
        (np.array([[1000.0, 0.0, -1000.0]], np.float32),),
    ),
    "gelu_tanh": (lambda lib: lib.nn.GELU("tanh"), (X,)),
    "leaky_relu_negative_slope": (lambda lib: lib.nn.LeakyReLU(-0.5), (X,)),
    "relu_at_zero": (lambda lib: lib.nn.ReLU(), (np.array([0.0, -0.0, 1.0], np.float32),)),
    "layer_norm_constant_row": (
        lambda lib: lib.nn.LayerNorm(4),
        (np.array([[2.0, 2.0, 2.0, 2.0], [1.0, 2.0, 3.0, 4.0]], np.float32),),
    ),
    "softmax_with_minus_infinity": (
        lambda lib: lib.nn.Softmax(dim=-1),
        (np.array([[-np.inf, 0.0], [-np.inf, 3.0]], np.float32),),
    ),
    "flatten_0_to_1": (lambda lib: lib.nn.Flatten(0, 1), (X,)),
    "mse_broadcast_row": (lambda lib: lib.nn.MSELoss(reduction="none"), (X[0], X[0, 0])),
}


@pytest.mark.filterwarnings("ignore:Using a target size:UserWarning")
@pytest.mark.parametrize("name", list(EDGES))
def test_edge_values_give_torchs_outputs_and_gradients(name: str) -> None:
    """Layers and losses on extreme or special inputs: torch's values and input gradients."""
    build, inputs = EDGES[name]
    expected = _values(_forward_backward(torch, build, *inputs))
    got = _values(_forward_backward(hookgrad, build, *inputs))
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_the_size_mismatch_warning_is_torchs() -> None:
    """MSELoss with a broadcasting target warns with torch's text (torch. -> hookgrad.)."""
    texts = []
    for lib in (torch, hookgrad):
        with pytest.warns(UserWarning) as caught:
            lib.nn.MSELoss()(lib.ones(3, 1), lib.zeros(3))
        texts.append([str(w.message) for w in caught])
    assert texts[1] == [t.replace("torch.", "hookgrad.") for t in texts[0]]


def test_a_bad_padding_string_is_a_value_error_at_construction() -> None:
    """Conv2d(padding="full") fails when built, with torch's ValueError text."""
    for lib in (torch, hookgrad):
        with pytest.raises(ValueError, match=r"^Invalid padding string 'full', should be one of"):
            lib.nn.Conv2d(1, 1, 3, padding="full")


def test_an_unknown_gelu_approximation_names_the_options() -> None:
    """GELU("fast") fails at the call with torch's text (hookgrad adds the value given)."""
    texts = []
    for lib in (torch, hookgrad):
        with pytest.raises(RuntimeError) as info:
            lib.nn.GELU("fast")(lib.ones(1))
        texts.append(str(info.value))
    assert texts[1].startswith(texts[0].rstrip("."))


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_softmax_of_a_row_with_plus_infinity_is_nan_as_in_torch() -> None:
    """Softmax over [inf, 0]: torch's [nan, nan] (the normaliser is nan)."""
    x = np.array([[np.inf, 0.0]], np.float32)
    expected = torch.softmax(torch.tensor(x), dim=-1).numpy()
    got = hookgrad.softmax(hookgrad.tensor(x), dim=-1).numpy()
    np.testing.assert_array_equal(got, expected)


# ---------------------------------------------------------------------- the Module API
def _model(lib: Any) -> Any:
    """A Sequential sharing one Linear twice, with a persistent and a non-persistent buffer."""
    from collections import OrderedDict

    lib.manual_seed(0)
    shared = lib.nn.Linear(2, 2)
    layers = [("a", shared), ("act", lib.nn.Tanh()), ("b", shared), ("ln", lib.nn.LayerNorm(2))]
    model = lib.nn.Sequential(OrderedDict(layers))
    model.register_buffer("count", lib.zeros(1, dtype=lib.int64))
    model.register_buffer("tmp", lib.ones(1), persistent=False)
    return model


def _names(pairs: Any) -> list[str]:
    return [name for name, _ in pairs]


MODULE_API: dict[str, Callable[[Any, Any], Any]] = {
    "named_modules": lambda lib, m: _names(m.named_modules()),
    "named_modules_with_duplicates": lambda lib, m: _names(m.named_modules(remove_duplicate=False)),
    "named_parameters_with_duplicates": lambda lib, m: _names(
        m.named_parameters(remove_duplicate=False)
    ),
    "named_parameters_prefix_no_recurse": lambda lib, m: _names(
        m.ln.named_parameters(prefix="x", recurse=False)
    ),
    "named_buffers": lambda lib, m: _names(m.named_buffers()),
    "state_dict_keys_with_prefix": lambda lib, m: list(m.state_dict(prefix="p.")),
    "half_keeps_integer_buffers": lambda lib, m: str(m.half().count.dtype).removeprefix("torch."),
    "eval_and_train_return_self": lambda lib, m: (m.eval() is m, m.a.training, m.train() is m),
    "train_with_a_string": lambda lib, m: m.train("yes"),
    "parameter_deleted": lambda lib, m: (delattr(m.ln, "bias"), _names(m.ln.named_parameters())),
    "parameter_set_to_none": lambda lib, m: (
        setattr(m.ln, "bias", None),
        _names(m.ln.named_parameters()),
        "bias" in m.ln.state_dict(),
    ),
    "apply_order": lambda lib, m: (
        lambda log: (m.apply(lambda x: log.append(type(x).__name__)), log)
    )([]),
    "sequential_pop": lambda lib, m: (type(m.pop(1)).__name__, _names(m.named_children())),
    "sequential_delete_slice": lambda lib, m: (
        m.__delitem__(slice(0, 2)),
        _names(m.named_children()),
    ),
    "sequential_insert": lambda lib, m: (m.insert(1, lib.nn.ReLU()), _names(m.named_children())),
    "sequential_slice_keeps_names": lambda lib, m: _names(m[1:3].named_children()),
    "load_non_strict_reports_keys": lambda lib, m: (
        lambda r: (sorted(r.missing_keys), sorted(r.unexpected_keys))
    )(m.load_state_dict({"x": lib.ones(1)}, strict=False)),
    "load_float_into_an_integer_buffer": lambda lib, m: (
        m.load_state_dict({**m.state_dict(), "count": lib.ones(1) * 3.7}),
        m.count.tolist(),
        str(m.count.dtype).removeprefix("torch."),
    ),
    "load_with_assign": lambda lib, m: (
        lambda t: (
            m.load_state_dict({**m.state_dict(), "ln.weight": t}, assign=True),
            m.ln.weight is t,
            type(m.ln.weight).__name__,
        )
    )(lib.ones(2)),
    "missing_submodule": lambda lib, m: m.get_submodule("ln.nope"),
    "register_module_none": lambda lib, m: (
        m.register_module("z", None),
        _names(m.named_children()),
    ),
    "add_a_number_as_module": lambda lib, m: m.add_module("z", 3),
    "buffer_named_like_a_parameter": lambda lib, m: m.ln.register_buffer("weight", lib.ones(2)),
    "tensor_registered_as_parameter": lambda lib, m: m.ln.register_parameter("w2", lib.ones(2)),
    "missing_attribute": lambda lib, m: m.nope,
    "state_dict_detached_or_kept": lambda lib, m: (
        [v.requires_grad for v in m.state_dict().values()],
        [v.requires_grad for v in m.state_dict(keep_vars=True).values()],
    ),
    "zero_grad_sets_none": lambda lib, m: (
        m(lib.ones(1, 2)).sum().backward(),
        m.zero_grad(),
        [p.grad for p in m.parameters()],
    ),
}


def _outcome(lib: Any, action: Callable[[Any, Any], Any]) -> tuple[str, str]:
    try:
        return "ok", repr(action(lib, _model(lib))).replace("torch.", "hookgrad.")
    except Exception as error:  # the class and text are what is compared
        return type(error).__name__, str(error).replace("torch.", "hookgrad.")


@pytest.mark.parametrize("name", list(MODULE_API))
def test_module_api_on_odd_use_matches_torch(name: str) -> None:
    """`Module` (parameters, buffers, children, state_dict, train/eval, zero_grad) and the
    containers behave as torch's on shared layers, deletions, slices and misuse."""
    assert _outcome(hookgrad, MODULE_API[name]) == _outcome(torch, MODULE_API[name])
