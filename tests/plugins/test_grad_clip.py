"""The grad_clip plugin: each mode against torch or a direct numpy computation, its records."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

import hookgrad
from hookgrad.hookspecs import FullBackwardEvent, OptimizerStepPreEvent, call_order, hookimpl
from hookgrad.plugins.grad_clip import GradClip
from hookgrad.runtime import ConfigError
from hookgrad.testing import capture_events

# Parameters as an optimizer built from named parameters sees them: owners fc, conv, "" (root).
SHAPES = {"fc.weight": (4, 3), "fc.bias": (4,), "conv.weight": (2, 2, 2), "gain": ()}
Arrays = dict[str, np.ndarray]


@pytest.fixture
def torch() -> ModuleType:
    """torch 2.13 as the oracle; the differential tests skip cleanly without it."""
    return pytest.importorskip("torch")


# ---------------------------------------------------------------------- helpers
def _arrays(scale: float = 1.0, seed: int = 7) -> Arrays:
    rng = np.random.default_rng(seed)
    return {
        name: (rng.standard_normal(shape) * scale).astype(np.float32)
        for name, shape in SHAPES.items()
    }


def _parameters(lib: ModuleType, weights: Arrays, grads: Arrays) -> dict[str, Any]:
    """Leaf tensors of ``lib`` holding ``weights``; a name missing from ``grads`` has no grad."""
    params = {}
    for name, w in weights.items():
        p = lib.tensor(w, requires_grad=True)
        if name in grads:
            p.grad = lib.tensor(grads[name])
        params[name] = p
    return params


def _run(settings: Mapping[str, Any], params: dict[str, Any], steps: Iterable[Arrays] = ({},)):
    """Optimizer steps (lr 0) with grad_clip on ``params``, setting each step's grads first."""
    optimizer = hookgrad.optim.SGD(list(params.items()), lr=0.0)
    plugin = GradClip(GradClip.Config(**settings))
    with capture_events(("grad_clip", plugin)) as capture:
        for grads in steps:
            for name, g in grads.items():
                params[name].grad = hookgrad.tensor(g)
            optimizer.step()
    return capture.of_plugin("grad_clip")


def _grads_of(params: Mapping[str, Any]) -> dict[str, np.ndarray | None]:
    return {n: None if p.grad is None else p.grad.numpy().copy() for n, p in params.items()}


def _assert_grads_close(got: Mapping[str, Any], expected: Mapping[str, Any]) -> None:
    for (name, g), e in zip(_grads_of(got).items(), _grads_of(expected).values()):
        assert (g is None) == (e is None), name
        if g is not None:
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-7, err_msg=name)


def _two_norm(arrays: Iterable[np.ndarray]) -> float:
    return math.sqrt(sum(float(np.vdot(a.astype(np.float64), a)) for a in arrays))


def _mlp(nn: ModuleType) -> Any:
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))


def _copy_weights(source: Any, target: Any) -> None:
    with hookgrad.no_grad():
        for p, q in zip(source.parameters(), target.parameters()):
            q.copy_(hookgrad.tensor(p.detach().numpy()))


# ---------------------------------------------------------------------- config
def test_defaults() -> None:
    """Defaults: global 2-norm clipping to 1.0; the other modes' settings as documented."""
    config = GradClip.Config()
    assert (config.mode, config.max_norm, config.norm_type) == ("norm", 1.0, 2.0)
    assert (config.error_if_nonfinite, config.clip_value) == (False, 1.0)
    assert (config.agc_clipping, config.agc_eps) == (0.01, 1e-3)
    assert (config.percentile, config.history) == (10.0, 1000)


@pytest.mark.parametrize(
    ("table", "field", "message"),
    [
        (
            {"mode": "clamp"},
            "mode",
            "'norm', 'value', 'per_module', 'agc', 'autoclip' or 'grad_input'",
        ),
        ({"max_norm": 0.0}, "max_norm", "greater than 0"),
        ({"max_norm": math.inf}, "max_norm", "finite number"),
        ({"norm_type": math.nan}, "norm_type", 'norm_type must be a number or "inf", got nan'),
        ({"mode": "value", "clip_value": -1.0}, "clip_value", "greater than 0"),
        ({"mode": "agc", "agc_clipping": 0.0}, "agc_clipping", "greater than 0"),
        ({"mode": "agc", "agc_eps": 0.0}, "agc_eps", "greater than 0"),
        ({"mode": "autoclip", "percentile": 100.5}, "percentile", "less than or equal to 100"),
        ({"mode": "autoclip", "history": 0}, "history", "greater than or equal to 1"),
        ({"mode": "autoclip", "history": 10**9}, "history", "less than or equal to 100000"),
        ({"max_norm": True}, "max_norm", "Input should be a valid number"),
        ({"max_norm": "0.5"}, "max_norm", "Input should be a valid number"),
        ({"enabled": "no"}, "enabled", "Input should be a valid boolean"),
        ({"mode": "value", "max_norm": 2.0}, "max_norm", "applies to mode norm or per_module only"),
        ({"mode": "agc", "history": 5}, "history", "mode 'agc' uses agc_clipping, agc_eps"),
    ],
)
def test_bad_settings_fail_naming_the_field(table: dict[str, Any], field: str, message: str):
    """A bad value, or another mode's setting, fails validation naming the field and the rule."""
    with pytest.raises(ValidationError) as info:
        GradClip.Config.model_validate(table)
    [error] = info.value.errors()
    assert error["loc"] == (field,)
    assert message in str(info.value)


def test_norm_type_inf_from_toml(tmp_path: Path) -> None:
    """norm_type = inf (TOML's float) and "inf" (a string) both give the max-abs norm."""
    for value in ("inf", '"inf"'):
        path = tmp_path / "hookgrad.toml"
        path.write_text(f"[plugins.grad_clip]\nnorm_type = {value}\n")
        with hookgrad.Runtime(path, environ={}) as rt:
            config = rt.plugin_configs["grad_clip"]
        assert isinstance(config, GradClip.Config) and config.norm_type == math.inf


def test_a_config_file_error_names_the_table() -> None:
    """From config, another mode's setting is a ConfigError naming the key and the table."""
    table = {"plugins": {"grad_clip": {"mode": "value", "norm_type": 1.0}}}
    with pytest.raises(ConfigError, match=r"'norm_type' in \[plugins\.grad_clip\]"):
        hookgrad.Runtime(table, environ={})


def test_each_mode_implements_only_the_hook_it_uses() -> None:
    """Step modes leave the backward hook unimplemented, grad_input the step hook: no cost."""
    cases = {"norm": "hookgrad_optimizer_step_pre", "grad_input": "hookgrad_full_backward"}
    for mode, used in cases.items():
        plugin = GradClip(GradClip.Config.model_validate({"mode": mode}))
        with capture_events(("grad_clip", plugin)) as capture:
            for hook in ("hookgrad_optimizer_step_pre", "hookgrad_full_backward"):
                impls = call_order(capture.runtime.pm, hook)
                assert [i.plugin_name for i in impls] == (["grad_clip"] if hook == used else [])


# ---------------------------------------------------------------------- norm
@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf], ids=str)
@pytest.mark.parametrize("scale", [3.0, 0.01], ids=["clipped", "below_max"])
def test_norm_matches_torch_clip_grad_norm(torch: ModuleType, norm_type: float, scale: float):
    """Clipped grads equal torch's clip_grad_norm_; None grads are skipped; norms recorded."""
    weights, grads = _arrays(), _arrays(scale, seed=8)
    del grads["conv.weight"]  # a parameter without a gradient
    h, t = _parameters(hookgrad, weights, grads), _parameters(torch, weights, grads)
    [record] = _run({"max_norm": 1.5, "norm_type": norm_type}, h)
    total = float(torch.nn.utils.clip_grad_norm_(list(t.values()), 1.5, norm_type))
    _assert_grads_close(h, t)
    pre = _two_norm(grads.values())
    assert record["module_name"] is None
    assert record["data"] == {
        "mode": "norm",
        "pre_norm": pytest.approx(pre, rel=1e-6),
        "post_norm": pytest.approx(pre * min(1.5 / (total + 1e-6), 1.0), rel=1e-6),
        "threshold": 1.5,
        "clipped": total > 1.5,
    }
    assert record["data"]["clipped"] == (scale == 3.0)


def test_norm_error_if_nonfinite_raises_as_torch_does(torch: ModuleType) -> None:
    """error_if_nonfinite: an inf grad raises torch's RuntimeError and nothing is clipped."""
    weights, grads = _arrays(), _arrays(seed=8)
    grads["fc.bias"][2] = np.inf
    t = _parameters(torch, weights, grads)
    with pytest.raises(RuntimeError, match="is non-finite, so it cannot be clipped"):
        torch.nn.utils.clip_grad_norm_(list(t.values()), 1.0, error_if_nonfinite=True)
    h = _parameters(hookgrad, weights, grads)
    with pytest.raises(RuntimeError, match="is non-finite, so it cannot be clipped"):
        _run({"error_if_nonfinite": True}, h)
    for name, g in _grads_of(h).items():
        np.testing.assert_array_equal(g, grads[name])


def test_nonfinite_norm_is_recorded_as_none(torch: ModuleType) -> None:
    """A nan grad: grads become what torch makes of them; the record holds None, nonfinite."""
    weights, grads = _arrays(), _arrays(seed=8)
    grads["conv.weight"][0, 1, 0] = np.nan
    h, t = _parameters(hookgrad, weights, grads), _parameters(torch, weights, grads)
    [record] = _run({}, h)
    torch.nn.utils.clip_grad_norm_(list(t.values()), 1.0)
    _assert_grads_close(h, t)
    assert record["data"] == {
        "mode": "norm",
        "pre_norm": None,
        "post_norm": None,
        "threshold": 1.0,
        "clipped": True,
        "nonfinite": True,
    }
    json.dumps(record, allow_nan=False)  # JSON-safe


def test_global_modes_record_every_step_clipped_or_not() -> None:
    """One record per step with module_name None, also when the grads were under the limit."""
    params = _parameters(hookgrad, {"w": np.zeros(2, np.float32)}, {})
    steps = [{"w": np.array([3.0, 4.0], np.float32)}, {"w": np.array([0.3, 0.4], np.float32)}]
    records = _run({"max_norm": 1.0}, params, steps)
    assert [(r["step"], r["module_name"], r["kind"]) for r in records] == [
        (0, None, "clip"),
        (1, None, "clip"),
    ]
    assert [r["data"]["clipped"] for r in records] == [True, False]
    assert [r["data"]["pre_norm"] for r in records] == pytest.approx([5.0, 0.5])
    assert [r["data"]["post_norm"] for r in records] == pytest.approx([1.0, 0.5], rel=1e-5)


def test_norm_leaves_gradients_under_the_limit_untouched() -> None:
    """Under the limit the gradient keeps its values and its version (nothing to record for
    later stages); over it, it is scaled in place and its version moves."""
    params = _parameters(hookgrad, {"w": np.zeros(2, np.float32)}, {})
    versions = []
    for grad in ([0.3, 0.4], [3.0, 4.0]):
        params["w"].grad = hookgrad.tensor(grad)
        before = params["w"].grad._version
        _run({"max_norm": 1.0}, params)
        versions.append(params["w"].grad._version - before)
    assert versions == [0, 1]
    np.testing.assert_allclose(params["w"].grad.numpy(), [0.6, 0.8], rtol=1e-5)


def test_only_selected_modules_are_clipped() -> None:
    """exclude keeps a module's parameters out of the clip and out of the norm."""
    weights, grads = _arrays(), _arrays(10.0, seed=8)
    params = _parameters(hookgrad, weights, grads)
    [record] = _run({"exclude": ["conv"]}, params)
    after = _grads_of(params)
    np.testing.assert_array_equal(after["conv.weight"], grads["conv.weight"])
    kept = [g for name, g in after.items() if name != "conv.weight"]
    assert _two_norm(kept) == pytest.approx(1.0, rel=1e-5)
    selected = [g for name, g in grads.items() if name != "conv.weight"]
    assert record["data"]["pre_norm"] == pytest.approx(_two_norm(selected), rel=1e-6)


# ---------------------------------------------------------------------- value
@pytest.mark.parametrize("clip_value", [0.5, 10.0], ids=["clipped", "below_limit"])
def test_value_matches_torch_clip_grad_value(torch: ModuleType, clip_value: float) -> None:
    """Grads equal torch's clip_grad_value_; the record says whether an entry was clamped."""
    weights, grads = _arrays(), _arrays(seed=8)
    h, t = _parameters(hookgrad, weights, grads), _parameters(torch, weights, grads)
    [record] = _run({"mode": "value", "clip_value": clip_value}, h)
    torch.nn.utils.clip_grad_value_(list(t.values()), clip_value)
    _assert_grads_close(h, t)
    clamped = [np.clip(g, -clip_value, clip_value) for g in grads.values()]
    assert record["data"] == {
        "mode": "value",
        "pre_norm": pytest.approx(_two_norm(grads.values()), rel=1e-6),
        "post_norm": pytest.approx(_two_norm(clamped), rel=1e-6),
        "threshold": clip_value,
        "clipped": clip_value == 0.5,
    }


# ---------------------------------------------------------------------- per_module
def test_per_module_matches_torch_per_module(torch: ModuleType) -> None:
    """Each owning module (name before the last dot) is clipped alone, as torch per module."""
    weights, grads = _arrays(), _arrays(seed=8)
    grads["fc.weight"] *= 10.0  # fc over the limit, conv and the root's gain under it
    grads["conv.weight"] *= 0.1
    h, t = _parameters(hookgrad, weights, grads), _parameters(torch, weights, grads)
    records = _run({"mode": "per_module", "max_norm": 2.0}, h)
    owners = {"fc": ["fc.weight", "fc.bias"], "conv": ["conv.weight"], "": ["gain"]}
    for names in owners.values():
        torch.nn.utils.clip_grad_norm_([t[n] for n in names], 2.0)
    _assert_grads_close(h, t)
    assert [r["module_name"] for r in records] == ["fc", "conv", ""]
    for record, names in zip(records, owners.values()):
        pre = _two_norm(grads[n] for n in names)
        assert record["data"]["pre_norm"] == pytest.approx(pre, rel=1e-6)
        assert record["data"]["post_norm"] == pytest.approx(min(pre, 2.0), rel=1e-5)
        assert record["data"]["clipped"] == (pre > 2.0)
    assert [r["data"]["clipped"] for r in records] == [True, False, False]


# ---------------------------------------------------------------------- agc
def _agc_reference(w: np.ndarray, g: np.ndarray, clipping: float, eps: float) -> np.ndarray:
    """Brock et al. 2021 unit-wise clipping, written out directly in float64."""
    axes = tuple(range(1, w.ndim)) if w.ndim > 1 else None
    w_norm = np.sqrt(np.sum(w.astype(np.float64) ** 2, axis=axes, keepdims=w.ndim > 1))
    g_norm = np.sqrt(np.sum(g.astype(np.float64) ** 2, axis=axes, keepdims=w.ndim > 1))
    max_norm = clipping * np.maximum(w_norm, eps)
    return np.where(g_norm > max_norm, g * (max_norm / np.maximum(g_norm, 1e-6)), g)


def test_agc_matches_the_unitwise_rule() -> None:
    """Rows of a matrix, slices of a 3-d array, a vector and a scalar are clipped as units."""
    weights, grads = _arrays(), _arrays(0.02, seed=8)
    grads["fc.weight"][1] *= 0.01  # one row under its limit, the others over
    params = _parameters(hookgrad, weights, grads)
    [record] = _run({"mode": "agc", "agc_clipping": 0.01}, params)
    expected = {n: _agc_reference(weights[n], grads[n], 0.01, 1e-3) for n in SHAPES}
    for name, g in _grads_of(params).items():
        np.testing.assert_allclose(g, expected[name], rtol=1e-5, err_msg=name)
    np.testing.assert_array_equal(expected["fc.weight"][1], grads["fc.weight"][1])
    assert not np.allclose(expected["fc.weight"][0], grads["fc.weight"][0])
    assert record["data"] == {
        "mode": "agc",
        "pre_norm": pytest.approx(_two_norm(grads.values()), rel=1e-5),
        "post_norm": pytest.approx(_two_norm(expected.values()), rel=1e-5),
        "threshold": 0.01,
        "clipped": True,
    }


def test_agc_eps_floors_the_weight_norm() -> None:
    """A zero weight allows a gradient norm of clipping * eps, so it can still move."""
    params = _parameters(
        hookgrad, {"w": np.zeros(2, np.float32)}, {"w": np.array([3.0, 4.0], np.float32)}
    )
    [record] = _run({"mode": "agc", "agc_clipping": 0.1, "agc_eps": 0.01}, params)
    np.testing.assert_allclose(params["w"].grad.numpy(), [6e-4, 8e-4], rtol=1e-6)
    assert record["data"]["post_norm"] == pytest.approx(1e-3, rel=1e-6)


# ---------------------------------------------------------------------- autoclip
def _norm_steps(norms: Iterable[float]) -> list[Arrays]:
    """One step per norm: the gradient (0.6, 0.8) * norm."""
    return [{"w": np.array([0.6, 0.8], np.float32) * np.float32(n)} for n in norms]


def _thresholds(records: list[dict[str, Any]]) -> list[float | None]:
    return [r["data"]["threshold"] for r in records]


def test_autoclip_clips_to_a_percentile_of_the_norms_so_far() -> None:
    """The clip norm is the percentile of all norms up to this one: step 0 is unclipped."""
    params = _parameters(hookgrad, {"w": np.zeros(2, np.float32)}, {})
    norms = [5.0, 1.0, 3.0, 2.0, 4.0]
    records = _run({"mode": "autoclip", "percentile": 25.0}, params, _norm_steps(norms))
    assert _thresholds(records) == pytest.approx([5.0, 2.0, 2.0, 1.75, 2.0])
    assert [r["data"]["clipped"] for r in records] == [False, False, True, True, True]
    assert [r["data"]["pre_norm"] for r in records] == pytest.approx(norms)
    post = [r["data"]["post_norm"] for r in records]
    assert post == pytest.approx([5.0, 1.0, 2.0, 1.75, 2.0], rel=1e-5)
    np.testing.assert_allclose(params["w"].grad.numpy(), [1.2, 1.6], rtol=1e-5)


def test_autoclip_history_is_bounded() -> None:
    """Only the last ``history`` norms count: a large early norm falls out of the window."""
    params = _parameters(hookgrad, {"w": np.zeros(2, np.float32)}, {})
    settings = {"mode": "autoclip", "percentile": 100.0, "history": 2}
    records = _run(settings, params, _norm_steps([10.0, 1.0, 1.0, 2.0]))
    assert _thresholds(records) == pytest.approx([10.0, 10.0, 1.0, 2.0])


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # SGD on nan
def test_autoclip_keeps_nonfinite_norms_out_of_the_history() -> None:
    """An inf or nan norm is not a percentile sample; with no sample yet nothing is clipped."""
    params = _parameters(hookgrad, {"w": np.zeros(2, np.float32)}, {})
    settings = {"mode": "autoclip", "percentile": 100.0}
    records = _run(settings, params, _norm_steps([np.inf, 2.0, np.nan, 4.0]))
    assert _thresholds(records) == [None, pytest.approx(2.0), pytest.approx(2.0), 4.0]
    assert [r["data"].get("nonfinite", False) for r in records] == [True, False, True, False]
    assert [r["data"]["clipped"] for r in records] == [False, False, True, False]


# ---------------------------------------------------------------------- grad_input
def test_grad_input_matches_torch_global_full_backward_hook(torch: ModuleType) -> None:
    """x.grad and every weight grad equal those under torch's global hook clamping grad_input."""
    limit = 0.05
    reference, model = _mlp(torch.nn), _mlp(hookgrad.nn)
    _copy_weights(reference, model)
    x = np.random.default_rng(3).standard_normal((5, 3)).astype(np.float32) * 3

    def clamp(module: Any, grad_input: Any, grad_output: Any) -> Any:
        return tuple(None if g is None else g.clamp(-limit, limit) for g in grad_input)

    tx = torch.tensor(x, requires_grad=True)
    handle = torch.nn.modules.module.register_module_full_backward_hook(clamp)
    try:
        (reference(tx) ** 2).sum().backward()
    finally:
        handle.remove()
    hx = hookgrad.tensor(x, requires_grad=True)
    plugin = GradClip(GradClip.Config(mode="grad_input", clip_value=limit))
    with capture_events(("grad_clip", plugin)) as capture:
        (model(hx) ** 2).sum().backward()
    np.testing.assert_allclose(hx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-7)
    assert np.abs(hx.grad.numpy()).max() <= limit
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        np.testing.assert_allclose(
            p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=name
        )
    records = capture.of_plugin("grad_clip")
    assert records and all(r["data"]["clipped"] and r["module_name"] for r in records)


def test_grad_input_clamping_reaches_earlier_layers() -> None:
    """Clamping at the last layer changes the first layer's weight gradient (upstream)."""
    model = _mlp(hookgrad.nn)
    x = (hookgrad.randn(5, 3) * 3).requires_grad_()

    def first_layer_grad(settings: Mapping[str, Any] | None) -> np.ndarray:
        model.zero_grad()
        plugins = [] if settings is None else [("grad_clip", GradClip(GradClip.Config(**settings)))]
        with capture_events(*plugins):
            (model(x) ** 2).sum().backward()
        return model[0].weight.grad.numpy().copy()

    clipped = first_layer_grad({"mode": "grad_input", "clip_value": 0.01, "modules": ["2"]})
    assert not np.allclose(clipped, first_layer_grad(None))


def test_grad_input_returns_none_within_the_limit() -> None:
    """Nothing outside [-limit, limit]: None (the engine does nothing); NaN does not count."""
    plugin = GradClip(GradClip.Config(mode="grad_input", clip_value=1.0))
    within = hookgrad.tensor([[0.5, -1.0, np.nan]])
    event = FullBackwardEvent(
        module_name="fc",
        module_type="Linear",
        call_index=0,
        step=0,
        grad_input=(None, within),
        grad_output=(within,),
    )
    assert plugin.hookgrad_full_backward(event=event) is None


def test_grad_input_clamps_and_keeps_none_entries() -> None:
    """None entries stay None; NaN stays NaN and does not hide the entries that exceed."""
    plugin = GradClip(GradClip.Config(mode="grad_input", clip_value=1.0))
    big = hookgrad.tensor([[np.nan, 3.0, -0.5]])
    event = FullBackwardEvent(
        module_name="fc",
        module_type="Linear",
        call_index=0,
        step=0,
        grad_input=(None, big),
        grad_output=(big,),
    )
    replaced = plugin.hookgrad_full_backward(event=event)
    assert replaced is not None and replaced[0] is None
    np.testing.assert_array_equal(replaced[1].numpy(), [[np.nan, 1.0, -0.5]])


def test_grad_input_records_each_clamped_call() -> None:
    """One record per clamped module call, named, with the norms of grad_input."""
    model = hookgrad.nn.Sequential(hookgrad.nn.Linear(2, 2))
    with hookgrad.no_grad():
        model[0].weight.copy_(hookgrad.tensor([[2.0, 0.0], [0.0, 0.1]]))
    x = hookgrad.tensor([[1.0, 1.0]], requires_grad=True)
    plugin = GradClip(GradClip.Config(mode="grad_input", clip_value=1.0, modules=("0",)))
    with capture_events(("grad_clip", plugin)) as capture:
        model(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[1.0, 0.1]])
    [record] = capture.of_plugin("grad_clip")
    assert record["module_name"] == "0" and record["step"] == 0
    assert record["data"] == {
        "mode": "grad_input",
        "pre_norm": pytest.approx(math.hypot(2.0, 0.1), rel=1e-6),
        "post_norm": pytest.approx(math.hypot(1.0, 0.1), rel=1e-6),
        "threshold": 1.0,
        "clipped": True,
    }


# ---------------------------------------------------------------------- pipeline
class _GradRecorder:
    """A step_pre plugin without a stage: keeps a copy of the grads it is shown."""

    def __init__(self) -> None:
        self.seen: list[dict[str, np.ndarray]] = []

    def record(self, event: OptimizerStepPreEvent) -> None:
        self.seen.append(
            {n: p.grad.numpy().copy() for n, p in event.parameters if p.grad is not None}
        )


class _UnmarkedRecorder(_GradRecorder):
    @hookimpl
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> None:
        self.record(event)


class _TrylastRecorder(_GradRecorder):
    @hookimpl(trylast=True)
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> None:
        self.record(event)


@pytest.mark.parametrize("recorder_type", [_UnmarkedRecorder, _TrylastRecorder])
@pytest.mark.parametrize("recorder_first", [True, False], ids=["before", "after"])
def test_clipping_runs_last_whatever_the_registration_order(
    recorder_type: type[_GradRecorder], recorder_first: bool
) -> None:
    """A plugin registered before or after grad_clip, even trylast, sees unclipped gradients."""
    weights, grads = _arrays(), _arrays(10.0, seed=8)
    params = _parameters(hookgrad, weights, grads)
    recorder = recorder_type()
    plugins: list[tuple[str, object]] = [
        ("recorder", recorder),
        ("grad_clip", GradClip(GradClip.Config(max_norm=1.0))),
    ]
    optimizer = hookgrad.optim.SGD(list(params.items()), lr=0.0)
    with capture_events(*(plugins if recorder_first else plugins[::-1])):
        optimizer.step()
    [seen] = recorder.seen
    for name, g in seen.items():
        np.testing.assert_array_equal(g, grads[name])
    clipped = [g for g in _grads_of(params).values() if g is not None]
    assert _two_norm(clipped) == pytest.approx(1.0, rel=1e-5)


def test_activated_by_entry_point_name_from_config() -> None:
    """[plugins.grad_clip] in a config loads the entry point; a training loop gets clipped."""
    model = _mlp(hookgrad.nn)
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    x = hookgrad.randn(8, 3) * 5
    config = {"plugins": {"grad_clip": {"max_norm": 0.5}}, "events": {"memory": True}}
    with hookgrad.Runtime(config, environ={}) as rt:
        assert isinstance(rt.plugins["grad_clip"], GradClip)
        for _ in range(3):
            optimizer.zero_grad()
            (model(x) ** 2).sum().backward()
            optimizer.step()
            grads = [p.grad.numpy() for p in model.parameters()]
            assert _two_norm(grads) <= 0.5 + 1e-5
    assert rt.memory is not None
    records = [r for r in rt.memory.records if r.get("plugin") == "grad_clip"]
    assert [r["step"] for r in records] == [0, 1, 2]
    assert all(r["data"]["clipped"] and r["data"]["pre_norm"] > 0.5 for r in records)
