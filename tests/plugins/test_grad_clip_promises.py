"""docs/plugins/grad_clip.md, promise by promise, attacked with edge settings and odd gradients.

Expected values come from torch 2.13 (``clip_grad_norm_``/``clip_grad_value_``) or from numpy
written out here, never from hookgrad's own output.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from pydantic import ValidationError

import hookgrad
from hookgrad.hookspecs import OptimizerStepPreEvent, hookimpl
from hookgrad.plugins.grad_clip import GradClip
from hookgrad.testing import capture_events

nn = hookgrad.nn
RNG = np.random.default_rng(20260101)
GRADS = {
    "a.weight": (RNG.standard_normal((3, 4)) * 3).astype(np.float32),
    "a.bias": (RNG.standard_normal(3) * 3).astype(np.float32),
    "b.weight": (RNG.standard_normal((2, 3)) * 0.2).astype(np.float32),
}


@pytest.fixture
def torch() -> ModuleType:
    """torch 2.13, the oracle for the modes the page says give torch's numbers."""
    return pytest.importorskip("torch")


def _params(grads: Mapping[str, np.ndarray | None], weight: float = 1.0) -> dict[str, Any]:
    """Named parameters of value ``weight`` holding ``grads`` (None: no gradient)."""
    params = {}
    for name, g in grads.items():
        shape = (2,) if g is None else g.shape
        p = nn.Parameter(hookgrad.tensor(np.full(shape, weight, np.float32)))
        p.grad = None if g is None else hookgrad.tensor(g.copy())
        params[name] = p
    return params


def _step(settings: Mapping[str, Any], params: Mapping[str, Any], steps: int = 1) -> list[dict]:
    """``steps`` optimizer steps (lr 0) under grad_clip; the clip records."""
    optimizer = hookgrad.optim.SGD(list(params.items()), lr=0.0)
    with capture_events(("grad_clip", GradClip(GradClip.Config(**settings)))) as capture:
        for _ in range(steps):
            optimizer.step()
    return capture.of_plugin("grad_clip")


def _torch_grads(torch: ModuleType, grads: Mapping[str, np.ndarray]) -> list[Any]:
    tensors = []
    for g in grads.values():
        p = torch.nn.Parameter(torch.ones(g.shape))
        p.grad = torch.tensor(g.copy())
        tensors.append(p)
    return tensors


def _two_norm(arrays: Sequence[np.ndarray]) -> float:
    return math.sqrt(sum(float(np.sum(a.astype(np.float64) ** 2)) for a in arrays))


# ---------------------------------------------------------------------- configuration table
@pytest.mark.parametrize(
    ("table", "field"),
    [
        ({"max_norm": -1.0}, "max_norm"),
        ({"max_norm": math.nan}, "max_norm"),
        ({"max_norm": -math.inf}, "max_norm"),
        ({"mode": "value", "clip_value": 0.0}, "clip_value"),
        ({"mode": "value", "clip_value": math.inf}, "clip_value"),
        ({"mode": "grad_input", "clip_value": math.nan}, "clip_value"),
        ({"mode": "agc", "agc_clipping": -0.5}, "agc_clipping"),
        ({"mode": "agc", "agc_eps": -1e-3}, "agc_eps"),
        ({"mode": "autoclip", "percentile": -0.001}, "percentile"),
        ({"mode": "autoclip", "history": -3}, "history"),
        ({"mode": "autoclip", "history": 2.5}, "history"),
        ({"norm_type": "nan"}, "norm_type"),
        ({"mode": "Norm"}, "mode"),
        ({"max_norm_": 1.0}, "max_norm_"),
    ],
)
def test_out_of_range_or_unknown_fields_fail_naming_the_field(table: dict, field: str) -> None:
    """'Out-of-range values fail the same way and name the field' (unknown keys too)."""
    with pytest.raises(ValidationError) as info:
        GradClip.Config.model_validate(table)
    assert [e["loc"] for e in info.value.errors()] == [(field,)]


@pytest.mark.parametrize(
    ("mode", "field", "value"),
    [
        ("value", "norm_type", 1.0),
        ("value", "error_if_nonfinite", True),
        ("grad_input", "max_norm", 2.0),
        ("agc", "clip_value", 0.5),
        ("autoclip", "max_norm", 2.0),
        ("norm", "percentile", 50.0),
        ("per_module", "agc_eps", 0.1),
        ("grad_input", "history", 3),
    ],
)
def test_a_field_of_another_mode_is_an_error(mode: str, field: str, value: object) -> None:
    """'Setting a field that belongs to another mode is an error', naming the field and mode."""
    with pytest.raises(ValidationError, match=rf"{field} applies to mode .* mode '{mode}' uses"):
        GradClip.Config.model_validate({"mode": mode, field: value})


@pytest.mark.parametrize(
    ("mode", "field", "value"),
    [
        ("per_module", "max_norm", 3.0),
        ("autoclip", "error_if_nonfinite", True),
        ("grad_input", "clip_value", 0.2),
        ("autoclip", "percentile", 0.0),
        ("autoclip", "percentile", 100.0),
        ("autoclip", "history", 1),
        ("norm", "norm_type", -math.inf),
        ("norm", "norm_type", 0.5),
    ],
)
def test_a_field_of_its_own_mode_is_accepted_at_the_edges(mode: str, field: str, value: object):
    """Each field is accepted in the modes the table lists, including its documented edges."""
    config = GradClip.Config.model_validate({"mode": mode, field: value})
    assert getattr(config, field) == value


def test_norm_type_accepts_the_string_inf() -> None:
    """'norm_type: any float is accepted, as in torch: inf ... or the string "inf"'."""
    assert GradClip.Config(norm_type="inf").norm_type == math.inf


# ---------------------------------------------------------------------- norm mode vs torch
@pytest.mark.parametrize("norm_type", [0.5, 1.0, 3.0, 0.0, -1.0, -math.inf, math.inf], ids=str)
def test_norm_mode_gives_torchs_gradients_for_any_norm_type(torch: ModuleType, norm_type: float):
    """'Any float is accepted, as in torch': the clipped gradients equal clip_grad_norm_'s."""
    params = _params(GRADS)
    _step({"max_norm": 0.7, "norm_type": norm_type}, params)
    reference = _torch_grads(torch, GRADS)
    torch.nn.utils.clip_grad_norm_(reference, 0.7, norm_type)
    for (name, p), q in zip(params.items(), reference):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, err_msg=name)


@pytest.mark.parametrize("norm_type", [1.0, 0.5, math.inf], ids=str)
def test_records_hold_two_norms_whatever_norm_type(norm_type: float) -> None:
    """'The records always hold 2-norms': pre_norm is the 2-norm, post_norm after the scale."""
    params = _params(GRADS)
    [record] = _step({"max_norm": 0.7, "norm_type": norm_type}, params)
    pre = _two_norm(list(GRADS.values()))
    post = _two_norm([p.grad.numpy() for p in params.values()])
    assert record["data"]["pre_norm"] == pytest.approx(pre, rel=1e-5)
    assert record["data"]["post_norm"] == pytest.approx(post, rel=1e-5)
    assert record["data"]["threshold"] == 0.7 and record["data"]["clipped"] is True


def test_a_norm_just_under_max_norm_shrinks_but_is_not_clipped(torch: ModuleType) -> None:
    """'torch always multiplies': within 1e-6 under max_norm shrinks slightly, clipped false."""
    g = {"w.weight": np.array([0.6, 0.8], np.float32)}  # 2-norm exactly 1.0
    params = _params(g)
    [record] = _step({"max_norm": 1.0}, params)
    reference = _torch_grads(torch, g)
    torch.nn.utils.clip_grad_norm_(reference, 1.0)
    np.testing.assert_array_equal(params["w.weight"].grad.numpy(), reference[0].grad.numpy())
    assert params["w.weight"].grad.numpy()[0] < np.float32(0.6)
    assert record["data"]["clipped"] is False


def test_error_if_nonfinite_raises_torchs_error_for_nan(torch: ModuleType) -> None:
    """error_if_nonfinite: a nan total norm raises the RuntimeError torch raises."""
    g = {"w.weight": np.array([np.nan, 1.0], np.float32)}
    with pytest.raises(RuntimeError) as expected:
        torch.nn.utils.clip_grad_norm_(_torch_grads(torch, g), 1.0, error_if_nonfinite=True)
    params = _params(g)
    with pytest.raises(RuntimeError) as got:
        _step({"error_if_nonfinite": True}, params)
    assert str(got.value.__cause__) == str(expected.value)  # a PluginError naming grad_clip
    assert isinstance(got.value.__cause__, RuntimeError)
    np.testing.assert_array_equal(params["w.weight"].grad.numpy(), g["w.weight"])


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_an_inf_norm_turns_gradients_into_nan_as_torch_does(torch: ModuleType) -> None:
    """'a nan or inf total norm makes norm ... turn the gradients into nan' (null norms)."""
    g = {"w.weight": np.array([np.inf, 1.0], np.float32)}
    params = _params(g)
    [record] = _step({}, params)
    reference = _torch_grads(torch, g)
    torch.nn.utils.clip_grad_norm_(reference, 1.0)
    np.testing.assert_array_equal(params["w.weight"].grad.numpy(), reference[0].grad.numpy())
    assert record["data"]["pre_norm"] is None and record["data"]["nonfinite"] is True


def test_finite_records_have_no_nonfinite_key() -> None:
    """'nonfinite: present, and true, only when a norm was nan or inf'."""
    [record] = _step({}, _params(GRADS))
    assert "nonfinite" not in record["data"]


# ---------------------------------------------------------------------- value mode
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_value_mode_clamps_inf_and_keeps_nan_as_torch(torch: ModuleType) -> None:
    """value: clip_grad_value_ semantics, also for inf (clamped) and nan (kept) entries."""
    g = {"w.weight": np.array([np.inf, -np.inf, np.nan, 0.3, -2.0], np.float32)}
    params = _params(g)
    [record] = _step({"mode": "value", "clip_value": 0.5}, params)
    reference = _torch_grads(torch, g)
    torch.nn.utils.clip_grad_value_(reference, 0.5)
    np.testing.assert_array_equal(params["w.weight"].grad.numpy(), reference[0].grad.numpy())
    assert record["data"]["clipped"] is True and record["data"]["nonfinite"] is True


def test_value_mode_records_unclipped_steps_with_equal_norms() -> None:
    """value: 'write it even when nothing was clipped'; pre and post norms are equal then."""
    g = {"w.weight": np.array([0.5, -0.5], np.float32)}
    params = _params(g)
    records = _step({"mode": "value", "clip_value": 0.5}, params, steps=3)
    assert [r["step"] for r in records] == [0, 1, 2]
    for r in records:
        assert r["module_name"] is None and r["data"]["clipped"] is False
        assert r["data"]["pre_norm"] == r["data"]["post_norm"] == pytest.approx(math.sqrt(0.5))


# ---------------------------------------------------------------------- records and selection
@pytest.mark.parametrize("mode", ["norm", "value", "per_module", "agc", "autoclip"])
def test_a_step_without_gradients_writes_no_record(mode: str) -> None:
    """'A step in which no selected parameter has a gradient writes no record.'"""
    assert _step({"mode": mode}, _params({"a.weight": None, "b.weight": None})) == []


@pytest.mark.parametrize("mode", ["norm", "value", "agc", "autoclip"])
def test_global_modes_write_one_record_per_step_named_none(mode: str) -> None:
    """norm, value, agc and autoclip write one record per step with module_name null."""
    records = _step({"mode": mode}, _params(GRADS), steps=4)
    assert [(r["step"], r["module_name"], r["data"]["mode"]) for r in records] == [
        (s, None, mode) for s in range(4)
    ]


def test_per_module_records_one_per_owning_module_and_root() -> None:
    """per_module: one record per owning module (name before the last dot; '' for no dot)."""
    grads = {**GRADS, "gain": np.array([5.0], np.float32)}
    params = _params(grads)
    records = _step({"mode": "per_module", "max_norm": 1.0}, params)
    assert sorted(r["module_name"] for r in records) == ["", "a", "b"]
    for record in records:
        owned = [g for n, g in grads.items() if n.rpartition(".")[0] == record["module_name"]]
        pre = _two_norm(owned)
        assert record["data"]["pre_norm"] == pytest.approx(pre, rel=1e-5)
        assert record["data"]["clipped"] is (pre > 1.0)
    owned_by_b = [params["b.weight"].grad.numpy()]
    assert _two_norm(owned_by_b) == pytest.approx(_two_norm([GRADS["b.weight"]]), rel=1e-6)


def test_per_module_without_names_does_what_norm_does() -> None:
    """Unnamed parameters (param0, ...) fall into the root group: per_module == norm."""
    results = []
    for mode in ("per_module", "norm"):
        ps = [nn.Parameter(hookgrad.tensor(np.ones(g.shape, np.float32))) for g in GRADS.values()]
        for p, g in zip(ps, GRADS.values()):
            p.grad = hookgrad.tensor(g.copy())
        optimizer = hookgrad.optim.SGD(ps, lr=0.0)
        with capture_events(("grad_clip", GradClip(GradClip.Config(mode=mode)))) as capture:
            optimizer.step()
        [record] = capture.of_plugin("grad_clip")
        results.append(([p.grad.numpy() for p in ps], record))
    (per_module, per_record), (norm, norm_record) = results
    assert per_record["module_name"] == ""
    for a, b in zip(per_module, norm):
        np.testing.assert_array_equal(a, b)
    assert per_record["data"]["pre_norm"] == norm_record["data"]["pre_norm"]


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(3, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, x: Any) -> Any:
        return self.head(self.body(x).tanh())


def test_exclude_leaves_parameters_out_of_clip_and_norm() -> None:
    """'exclude = ["head"] leaves the head.* parameters out of both the clip and the norm.'"""
    model = _Net()
    optimizer = hookgrad.optim.SGD(model.named_parameters(), lr=0.0)
    (model(hookgrad.randn(6, 3) * 10) ** 2).sum().backward()
    before = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
    plugin = GradClip(GradClip.Config(max_norm=0.1, exclude=("head",)))
    with capture_events(("grad_clip", plugin)) as capture:
        optimizer.step()
    [record] = capture.of_plugin("grad_clip")
    body = [before["body.weight"], before["body.bias"]]
    assert record["data"]["pre_norm"] == pytest.approx(_two_norm(body), rel=1e-5)
    for name in ("head.weight", "head.bias"):
        np.testing.assert_array_equal(model.get_parameter(name).grad.numpy(), before[name])
    clipped = [model.body.weight.grad.numpy(), model.body.bias.grad.numpy()]
    assert _two_norm(clipped) == pytest.approx(0.1, rel=1e-4)


class _Veto:
    """A tryfirst plugin that vetoes every step."""

    @hookimpl(tryfirst=True)
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> bool:
        return False


def test_a_vetoed_step_is_neither_clipped_nor_recorded() -> None:
    """'If a plugin earlier in the chain vetoes the step, grad_clip ... writes no record.'"""
    params = _params(GRADS)
    optimizer = hookgrad.optim.SGD(list(params.items()), lr=0.0)
    plugin = GradClip(GradClip.Config(max_norm=0.01))
    with capture_events(("veto", _Veto()), ("grad_clip", plugin)) as capture:
        optimizer.step()
    assert capture.of_plugin("grad_clip") == []
    for name, p in params.items():
        np.testing.assert_array_equal(p.grad.numpy(), GRADS[name])


# ---------------------------------------------------------------------- agc
def _agc_numpy(weight: np.ndarray, grad: np.ndarray, clipping: float, eps: float) -> np.ndarray:
    """timm's unitwise AGC written out: units along dim 0 for ndim >= 2, else one unit."""
    axes = tuple(range(1, weight.ndim)) if weight.ndim > 1 else None
    keep = weight.ndim > 1
    w_norm = np.sqrt(np.sum(weight.astype(np.float64) ** 2, axis=axes, keepdims=keep))
    g_norm = np.sqrt(np.sum(grad.astype(np.float64) ** 2, axis=axes, keepdims=keep))
    max_norm = clipping * np.maximum(w_norm, eps)
    return np.where(g_norm > max_norm, grad * (max_norm / np.maximum(g_norm, 1e-6)), grad)


@pytest.mark.parametrize("shape", [(4, 2, 3, 3), (5,), (), (3, 1)], ids=str)
def test_agc_units_follow_unitwise_norm(shape: tuple[int, ...]) -> None:
    """agc: one unit per index of dim 0 (conv output channel); a vector or scalar is one unit."""
    rng = np.random.default_rng(len(shape))
    weight = rng.standard_normal(shape).astype(np.float32)
    grad = (
        rng.standard_normal(shape) * np.linspace(0.001, 1.0, max(1, weight.size)).reshape(shape)
    ).astype(np.float32)
    p = nn.Parameter(hookgrad.tensor(weight))
    p.grad = hookgrad.tensor(grad.copy())
    [record] = _step({"mode": "agc", "agc_clipping": 0.05}, {"conv.weight": p})
    expected = _agc_numpy(weight, grad, 0.05, 1e-3)
    np.testing.assert_allclose(p.grad.numpy(), expected, rtol=1e-5, atol=1e-8)
    assert record["data"]["threshold"] == 0.05
    assert record["data"]["clipped"] is bool(not np.array_equal(expected, grad))


# ---------------------------------------------------------------------- autoclip
def test_autoclip_never_clips_the_first_step() -> None:
    """'The first step is never clipped, because the percentile of a single norm is that norm.'"""
    params = _params({"w.weight": np.array([300.0, 400.0], np.float32)})
    [record] = _step({"mode": "autoclip", "percentile": 0.0}, params)
    assert record["data"]["clipped"] is False
    assert record["data"]["threshold"] == pytest.approx(500.0)
    np.testing.assert_allclose(params["w.weight"].grad.numpy(), [300.0, 400.0], rtol=1e-5)


def test_autoclip_history_starts_empty_with_every_runtime() -> None:
    """'The history belongs to the plugin instance: it starts empty with every new runtime.'"""
    grads = [np.array([3.0, 4.0], np.float32), np.array([30.0, 40.0], np.float32)]
    thresholds = []
    for g in grads:  # two runtimes, one step each: each is a first step
        thresholds += [
            r["data"]["threshold"]
            for r in _step({"mode": "autoclip", "percentile": 0.0}, _params({"w.w": g}))
        ]
    assert thresholds == pytest.approx([5.0, 50.0])


def test_autoclip_percentile_matches_numpy_over_a_run() -> None:
    """autoclip: each step's threshold is np.percentile of the norms so far, this one included."""
    norms = [4.0, 8.0, 1.0, 2.0, 16.0, 0.5]
    p = nn.Parameter(hookgrad.tensor(np.zeros(1, np.float32)))
    optimizer = hookgrad.optim.SGD([("w.w", p)], lr=0.0)
    plugin = GradClip(GradClip.Config(mode="autoclip", percentile=40.0, history=4))
    with capture_events(("grad_clip", plugin)) as capture:
        for n in norms:
            p.grad = hookgrad.tensor(np.array([n], np.float32))
            optimizer.step()
    got = [r["data"]["threshold"] for r in capture.of_plugin("grad_clip")]
    expected = [float(np.percentile(norms[max(0, i - 3) : i + 1], 40.0)) for i in range(6)]
    assert got == pytest.approx(expected)


def test_autoclip_error_if_nonfinite_raises(torch: ModuleType) -> None:
    """error_if_nonfinite also applies to autoclip: torch's RuntimeError on an inf norm."""
    g = {"w.weight": np.array([np.inf], np.float32)}
    with pytest.raises(RuntimeError) as expected:
        torch.nn.utils.clip_grad_norm_(_torch_grads(torch, g), 1.0, error_if_nonfinite=True)
    with pytest.raises(RuntimeError) as got:
        _step({"mode": "autoclip", "error_if_nonfinite": True}, _params(g))
    assert str(got.value.__cause__) == str(expected.value)  # a PluginError naming grad_clip


# ---------------------------------------------------------------------- grad_input mode
def test_grad_input_leaves_the_modules_own_weight_gradient_alone() -> None:
    """grad_input: 'A module's own weight gradient is not clamped' (only what flows out)."""
    layer = nn.Linear(2, 2)
    with hookgrad.no_grad():
        layer.weight.copy_(hookgrad.tensor([[5.0, 0.0], [0.0, 5.0]]))
    model = nn.Sequential(layer)
    x = hookgrad.tensor([[10.0, -10.0]], requires_grad=True)
    plugin = GradClip(GradClip.Config(mode="grad_input", clip_value=1.0, modules=("0",)))
    with capture_events(("grad_clip", plugin)):
        (model(x) * 3.0).sum().backward()
    np.testing.assert_allclose(layer.weight.grad.numpy(), [[30.0, -30.0], [30.0, -30.0]])
    np.testing.assert_allclose(x.grad.numpy(), [[1.0, 1.0]])


def test_grad_input_runs_before_the_modules_own_full_backward_hooks() -> None:
    """'after the module's backward and before the module's own full backward hooks'."""
    model = nn.Sequential(nn.Linear(2, 2))
    seen: list[np.ndarray] = []
    model[0].register_full_backward_hook(lambda m, gi, go: seen.append(gi[0].numpy().copy()))
    x = (hookgrad.ones(1, 2) * 50).requires_grad_()
    plugin = GradClip(GradClip.Config(mode="grad_input", clip_value=0.001, modules=("0",)))
    with capture_events(("grad_clip", plugin)):
        (model(x) * 100.0).sum().backward()
    [grad_input] = seen
    assert np.abs(grad_input).max() <= np.float32(0.001)


def test_a_second_instance_under_another_name_clamps_grad_input_too(tmp_path) -> None:
    """'One mode per instance': a class_path table adds a grad_input instance beside norm."""
    path = tmp_path / "hookgrad.toml"
    path.write_text(
        "[plugins.grad_clip]\nmax_norm = 0.5\n\n[plugins.clip_input]\n"
        'class_path = "hookgrad.plugins.grad_clip:GradClip"\nmode = "grad_input"\n'
        "clip_value = 0.1\n\n[events]\nmemory = true\n"
    )
    model = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 1))
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.0)
    x = (hookgrad.randn(4, 3) * 10).requires_grad_()
    with hookgrad.Runtime(path, environ={}) as rt:
        (model(x) * 50).sum().backward()
        optimizer.step()
    records = [r for r in rt.memory.records if r.get("plugin") == "grad_clip"]
    modes = {r["data"]["mode"] for r in records}
    assert modes == {"norm", "grad_input"}
    assert np.abs(x.grad.numpy()).max() <= np.float32(0.1)
    total = _two_norm([p.grad.numpy() for p in model.parameters()])
    assert total == pytest.approx(0.5, rel=1e-4)


@pytest.mark.parametrize("mode", ["norm", "value", "per_module", "agc", "autoclip"])
@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0,)], ids=str)
def test_an_empty_parameter_is_clipped_as_nothing(mode: str, shape: tuple[int, ...]) -> None:
    """A parameter with no entries (Linear(3, 0)) adds nothing to any norm and breaks no mode."""
    big = np.array([30.0, 40.0], np.float32)
    params = _params({"empty.weight": np.zeros(shape, np.float32), "fc.weight": big})
    records = _step({"mode": mode}, params)
    assert params["empty.weight"].grad.shape == shape
    clipped = params["fc.weight"].grad.numpy()
    expected = {
        "norm": big / 50.0,
        "per_module": big / 50.0,
        "value": np.ones(2, np.float32),
        "agc": big * (0.01 * math.sqrt(2.0) / 50.0),  # the weight row is [1, 1]
        "autoclip": big,  # the first step is never clipped
    }[mode]
    np.testing.assert_allclose(clipped, expected, rtol=1e-5)
    pres = [r["data"]["pre_norm"] for r in records if r["module_name"] != "empty"]
    assert pres == [pytest.approx(50.0)]


# ---------------------------------------------------------------------- any gradients at all
_VALUES = st.one_of(
    st.floats(-1e3, 1e3, width=32),
    st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan, 1e-30, 3e38]),
)
_ARRAYS = st.lists(
    hnp.arrays(np.float32, hnp.array_shapes(min_dims=0, max_dims=2, max_side=4), elements=_VALUES),
    min_size=1,
    max_size=4,
)


@settings(max_examples=80, deadline=None)
@given(
    grads=_ARRAYS,
    mode=st.sampled_from(["norm", "value"]),
    norm_type=st.sampled_from([2.0, 1.0, math.inf, 0.5, 3.0]),
    limit=st.sampled_from([1e-3, 0.5, 1.0, 1e4]),
)
def test_any_gradients_are_clipped_as_torch_clips_them(
    grads: list[np.ndarray], mode: str, norm_type: float, limit: float
) -> None:
    """norm and value modes 'give the same numbers as torch', for any gradients at all."""
    torch = pytest.importorskip("torch")
    named = {f"m{i}.weight": g for i, g in enumerate(grads)}
    settings_ = {"mode": mode}
    settings_ |= (
        {"max_norm": limit, "norm_type": norm_type} if mode == "norm" else {"clip_value": limit}
    )
    params = _params(named)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        [record] = _step(settings_, params)
        reference = _torch_grads(torch, named)
        if mode == "norm":
            torch.nn.utils.clip_grad_norm_(reference, limit, norm_type)
        else:
            torch.nn.utils.clip_grad_value_(reference, limit)
    for (name, p), q in zip(params.items(), reference):
        np.testing.assert_allclose(
            p.grad.numpy(), q.grad.numpy(), rtol=2e-5, atol=1e-30, equal_nan=True, err_msg=name
        )
    # the record's 2-norm is the one torch computes (in float32): it may overflow to inf
    pre = float(torch.nn.utils.get_total_norm([torch.tensor(g) for g in named.values()]))
    if math.isfinite(pre):
        assert record["data"]["pre_norm"] == pytest.approx(pre, rel=1e-5)
    else:
        assert record["data"]["pre_norm"] is None and record["data"]["nonfinite"] is True


def test_autoclip_history_restarts_when_the_same_instance_joins_a_new_runtime() -> None:
    """'it starts empty with every new runtime', also for one instance registered again."""
    plugin = GradClip(GradClip.Config(mode="autoclip", percentile=0.0))
    thresholds = []
    for g in ([3.0, 4.0], [30.0, 40.0]):
        params = _params({"w.weight": np.array(g, np.float32)})
        optimizer = hookgrad.optim.SGD(list(params.items()), lr=0.0)
        with capture_events(("grad_clip", plugin)) as capture:
            optimizer.step()
        thresholds += [r["data"]["threshold"] for r in capture.of_plugin("grad_clip")]
    assert thresholds == pytest.approx([5.0, 50.0])
