"""grad_stats: gradient statistics per parameter and per layer, checked against numpy and torch."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from pydantic import ValidationError

import hookgrad
from hookgrad.engines.numpy import _grad_stats as kernels
from hookgrad.hookspecs import OptimizerStepPreEvent, PluginRecord, Stage, hookimpl, stage
from hookgrad.plugins.grad_stats import GradStats, per_layer_table
from hookgrad.testing import EventCapture, capture_events, global_hook_counts

W0 = np.array([[1.0, -2.0, 0.0], [2.0, 0.5, -1.0]], dtype=np.float32)
B0 = np.array([0.5, -0.5], dtype=np.float32)
GW = np.array([[0.5, 0.0, -1.5], [2.0, -0.25, 0.0]], dtype=np.float32)
GB = np.array([0.0, 3.0], dtype=np.float32)


# ---------------------------------------------------------------------- helpers
class Halve:
    """A test-only clipper: halves every gradient in place at the CLIP stage, like grad_clip."""

    @hookimpl(trylast=True)
    @stage(Stage.CLIP)
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> None:
        for _, p in event.parameters:
            if p.grad is not None:
                p.grad.mul_(0.5)  # in place through the tensor: bumps its version


class VetoBeforeStats:
    """Vetoes every step at the GUARD stage, as nan_guard does: grad_stats' step_pre never runs."""

    @hookimpl(tryfirst=True)
    @stage(Stage.GUARD)
    def hookgrad_optimizer_step_pre(self) -> bool:
        return False


class VetoAfterStats:
    """Vetoes every step after the pre-clip statistics were taken."""

    @hookimpl(trylast=True)
    @stage(Stage.CLIP)
    def hookgrad_optimizer_step_pre(self) -> bool:
        return False


def linear_model() -> hookgrad.nn.Sequential:
    """``Sequential(Linear(3, 2))`` with the weights W0, B0: parameters 0.weight and 0.bias."""
    model = hookgrad.nn.Sequential(hookgrad.nn.Linear(3, 2))
    with hookgrad.no_grad():
        model[0].weight.copy_(hookgrad.tensor(W0))
        model[0].bias.copy_(hookgrad.tensor(B0))
    return model


def step_with(
    model: hookgrad.nn.Module, optimizer: hookgrad.optim.Optimizer, *grads: np.ndarray
) -> None:
    """One optimizer step with the parameters' gradients set by hand to ``grads``."""
    for p, g in zip(model.parameters(), grads, strict=True):
        p.grad = hookgrad.tensor(g)
    optimizer.step()


def run_linear(
    *others: object,
    steps: int = 1,
    lr: float = 0.1,
    grads: tuple[np.ndarray, np.ndarray] = (GW, GB),
    model: hookgrad.nn.Sequential | None = None,
    **config: Any,
) -> tuple[EventCapture, hookgrad.nn.Sequential, GradStats]:
    """GradStats (after ``others``) over ``steps`` SGD steps of the linear model with ``grads``."""
    model = linear_model() if model is None else model
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=lr)
    plugin = GradStats(GradStats.Config(summary=False, **config))
    with capture_events(*others, ("grad_stats", plugin)) as capture:
        capture.runtime.watch(model)
        for _ in range(steps):
            step_with(model, optimizer, *grads)
    return capture, model, plugin


def only(records: Sequence[Mapping[str, Any]], **match: Any) -> list[Mapping[str, Any]]:
    """The records whose top-level fields or data fields equal ``match``."""

    def field(record: Mapping[str, Any], key: str) -> Any:
        return record[key] if key in record else record["data"].get(key)

    return [r for r in records if all(field(r, k) == v for k, v in match.items())]


def as_written(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What the sinks get of records a plugin emits outside a distributed run: with rank 0."""
    return [{**r, "rank": 0} for r in records]


def numpy_stats(g: np.ndarray) -> dict[str, Any]:
    """The statistics grad_stats promises, computed directly in float64 over finite entries."""
    finite = g[np.isfinite(g)].astype(np.float64)
    return {
        "norm": pytest.approx(float(np.sqrt((finite**2).sum())), rel=1e-6),
        "mean": pytest.approx(float(finite.mean()), rel=1e-6),
        "std": pytest.approx(float(finite.std()), rel=1e-6),
        "max_abs": float(np.abs(finite).max()),
        "min": float(finite.min()),
        "max": float(finite.max()),
        "zero_fraction": float((g == 0).sum() / g.size),
        "nonfinite": int((~np.isfinite(g)).sum()),
        "numel": g.size,
    }


# ---------------------------------------------------------------------- pre-clip statistics
def test_param_grad_stats_equal_numpy() -> None:
    """Each parameter's pre-clip record holds numpy's norm, mean, std, min, max, |g|, counts."""
    _, _, plugin = run_linear()
    pre = only(plugin.records, kind="param_grad", stage="pre_clip")
    assert [(r["data"]["param"], r["module_name"], r["step"]) for r in pre] == [
        ("0.weight", "0", 0),
        ("0.bias", "0", 0),
    ]
    for record, grad in zip(pre, (GW, GB), strict=True):
        stats = {k: v for k, v in record["data"].items() if k not in ("param", "stage")}
        assert stats == numpy_stats(grad)


def test_module_grad_aggregates_its_parameters() -> None:
    """module_grad: the norm of all entries together, the largest |g|, zeros over all entries."""
    _, _, plugin = run_linear()
    (record,) = only(plugin.records, kind="module_grad", stage="pre_clip")
    everything = np.concatenate([GW.ravel(), GB.ravel()]).astype(np.float64)
    assert record["module_name"] == "0"
    assert record["data"] == {
        "stage": "pre_clip",
        "norm": pytest.approx(float(np.linalg.norm(everything)), rel=1e-6),
        "max_abs": 3.0,
        "nonfinite": 0,
        "zero_fraction": 3 / 8,
        "numel": 8,
    }


def test_nonfinite_entries_are_counted_and_left_out_of_the_moments() -> None:
    """NaN and Inf are counted in nonfinite; the moments cover the finite rest; no NaN leaks."""
    bad = GW.copy()
    bad[0, 0], bad[1, 2] = np.nan, -np.inf
    capture, _, plugin = run_linear(grads=(bad, GB))
    weight, _ = only(plugin.records, kind="param_grad", stage="pre_clip")
    stats = {k: v for k, v in weight["data"].items() if k not in ("param", "stage")}
    assert stats == numpy_stats(bad)
    (module,) = only(plugin.records, kind="module_grad", stage="pre_clip")
    assert module["data"]["nonfinite"] == 2
    weight_post, _ = only(plugin.records, kind="param_grad", stage="post_clip")
    assert weight_post["data"]["update_ratio"] is None  # the step wrote NaN into the weight
    assert capture.of_plugin("grad_stats") == as_written(plugin.records)  # JSON-safe


def _assert_plain_json(value: Any, where: str) -> None:
    """Only the exact types json writes as they are: no numpy scalars, no tuples."""
    if isinstance(value, dict):
        for key, item in value.items():
            assert type(key) is str, where
            _assert_plain_json(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _assert_plain_json(item, f"{where}[{i}]")
    else:
        assert type(value) in (str, int, float, bool, type(None)), (where, type(value))


def test_without_a_sink_or_table_no_record_is_built_until_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Records are built from the kept numbers only when read: none for steps nobody looks
    at, each step's once when plugin.records is read, equal to what a sink would have got."""
    from hookgrad.plugins import grad_stats

    built: list[int] = []
    real = grad_stats._StepRecords.records

    def counting(self: Any) -> Any:
        if self._built is None:
            built.append(self._step)
        return real(self)

    monkeypatch.setattr(grad_stats._StepRecords, "records", counting)
    model = hookgrad.nn.Sequential(hookgrad.nn.Linear(3, 4), hookgrad.nn.Linear(4, 1))
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.01)
    plugin = GradStats(GradStats.Config(summary=False))
    with hookgrad.Runtime({}, environ={}) as runtime:
        runtime.register(plugin, name="grad_stats")
        runtime.watch(model)
        for _ in range(3):
            optimizer.zero_grad()
            model(hookgrad.ones(2, 3)).sum().backward()
            optimizer.step()
        assert built == []
        records = list(plugin.records)
        assert built == [0, 0, 1, 1, 2, 2] and len(records) == 3 * 2 * (4 + 2)
        assert list(plugin.records) == records and len(built) == 6  # built once
    assert [r["step"] for r in records if r["kind"] == "module_grad"] == [0] * 4 + [1] * 4 + [2] * 4


def test_records_are_json_form_and_reach_the_sinks() -> None:
    """The records are emitted unchecked (trusted), so each must already be a valid
    PluginRecord in its JSON form, of plain JSON values: with histograms, update ratios,
    non-finite entries and grad_output records all present."""
    model = hookgrad.nn.Sequential(hookgrad.nn.Linear(3, 2), hookgrad.nn.Tanh())
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    plugin = GradStats(GradStats.Config(summary=False, histogram_bins=3, grad_output=True))
    with capture_events(("grad_stats", plugin)) as capture:
        for bad in (False, True):
            model(hookgrad.ones(4, 3, requires_grad=True)).sum().backward()
            if bad:
                model[0].weight.grad.data[0, 0] = float("nan")
            optimizer.step()
            optimizer.zero_grad()
    assert as_written(plugin.records) == capture.of_plugin("grad_stats")
    kinds = {r["kind"] for r in plugin.records}
    assert kinds == {"param_grad", "module_grad", "grad_output"}
    assert any(r["data"].get("nonfinite") for r in plugin.records)
    for record in plugin.records:
        assert list(record) == ["plugin", "kind", "step", "module_name", "data"]
        assert PluginRecord.json_of(record, step=0) == {**record, "rank": 0}
        _assert_plain_json(record, record["kind"])


# ---------------------------------------------------------------------- pre vs post clip
def test_pre_clip_is_taken_before_clipping_and_post_clip_after() -> None:
    """A CLIP-stage plugin registered first still runs after the pre-clip statistics."""
    _, _, plugin = run_linear(Halve())
    pre = only(plugin.records, kind="param_grad", stage="pre_clip")
    post = only(plugin.records, kind="param_grad", stage="post_clip")
    assert [r["data"]["max"] for r in pre] == [2.0, 3.0]
    assert [r["data"]["max"] for r in post] == [1.0, 1.5]
    for before, after in zip(pre, post, strict=True):
        assert after["data"]["norm"] == pytest.approx(before["data"]["norm"] / 2, rel=1e-7)
        assert after["data"]["skipped"] is False
    module_pre, module_post = only(plugin.records, kind="module_grad")
    assert module_post["data"]["norm"] == pytest.approx(module_pre["data"]["norm"] / 2)


# ---------------------------------------------------------------------- update ratio
def test_update_ratio_after_sgd_is_lr_times_grad_norm_over_weight_norm() -> None:
    """Plain SGD moves W by lr * g: the ratio is lr * ||g|| / ||W||, per parameter and layer."""
    _, _, plugin = run_linear(lr=0.1)
    weight, bias = only(plugin.records, kind="param_grad", stage="post_clip")
    norm = np.linalg.norm
    assert weight["data"]["update_ratio"] == pytest.approx(0.1 * norm(GW) / norm(W0), rel=1e-5)
    assert bias["data"]["update_ratio"] == pytest.approx(0.1 * norm(GB) / norm(B0), rel=1e-5)
    (module,) = only(plugin.records, kind="module_grad", stage="post_clip")
    grads = np.concatenate([GW.ravel(), GB.ravel()])
    weights = np.concatenate([W0.ravel(), B0.ravel()])
    expected = 0.1 * norm(grads) / norm(weights)
    assert module["data"]["update_ratio"] == pytest.approx(expected, rel=1e-5)
    assert all("update_ratio" not in r["data"] for r in only(plugin.records, stage="pre_clip"))


def test_update_ratio_is_none_for_a_zero_weight() -> None:
    """||W_before|| = 0 has no ratio: None, never a NaN or Inf in a record."""
    model = linear_model()
    with hookgrad.no_grad():
        model[0].bias.zero_()
    _, _, plugin = run_linear(model=model)
    weight, bias = only(plugin.records, kind="param_grad", stage="post_clip")
    assert bias["data"]["update_ratio"] is None
    assert weight["data"]["update_ratio"] == pytest.approx(
        0.1 * np.linalg.norm(GW) / np.linalg.norm(W0), rel=1e-5
    )


def test_update_ratio_off_keeps_no_weights() -> None:
    """update_ratio = false: no update_ratio key and no weight copies."""
    _, _, plugin = run_linear(update_ratio=False)
    assert all("update_ratio" not in r["data"] for r in plugin.records)
    assert plugin._before == {}


# ---------------------------------------------------------------------- sampling and options
def test_every_n_steps_samples_steps_0_n_2n() -> None:
    """every_n_steps = 3 over 7 steps records steps 0, 3 and 6, pre and post."""
    _, _, plugin = run_linear(steps=7, every_n_steps=3)
    assert sorted({r["step"] for r in plugin.records}) == [0, 3, 6]
    assert len(only(plugin.records, kind="module_grad")) == 6


def test_per_parameter_off_emits_module_records_only() -> None:
    """per_parameter = false: one module_grad record per stage, no param_grad."""
    _, _, plugin = run_linear(per_parameter=False)
    assert [(r["kind"], r["data"]["stage"]) for r in plugin.records] == [
        ("module_grad", "pre_clip"),
        ("module_grad", "post_clip"),
    ]


def _poked(values: np.ndarray, index: tuple[int, int], value: float) -> np.ndarray:
    """A copy of ``values`` with ``values[index] = value``."""
    out = values.copy()
    out[index] = value
    return out


@pytest.mark.parametrize(
    "grad",
    [
        GW,
        _poked(GW, (1, 1), np.nan),
        _poked(GW, (0, 0), -np.inf),
        np.full((2, 3), 0.25, dtype=np.float32),
    ],
    ids=["finite", "nan", "inf", "constant"],
)
def test_histogram_equals_numpy_over_finite_entries(grad: np.ndarray) -> None:
    """histogram_bins: np.histogram of the finite entries, to the bit; counts sum to them."""
    _, _, plugin = run_linear(grads=(grad, GB), histogram_bins=4)
    weight, _ = only(plugin.records, kind="param_grad", stage="pre_clip")
    finite = grad[np.isfinite(grad)]
    counts, edges = np.histogram(finite, bins=4)
    assert weight["data"]["histogram"] == {"counts": counts.tolist(), "edges": edges.tolist()}
    assert sum(weight["data"]["histogram"]["counts"]) == finite.size


@pytest.mark.parametrize(
    "bias_grad",
    [np.array([np.inf, np.nan], np.float32), np.array([-3e38, 3e38], np.float32)],
    ids=["nothing-finite", "range-overflows"],
)
def test_histogram_is_none_when_numpy_cannot_bin(bias_grad: np.ndarray) -> None:
    """No finite entry, or max - min overflows: histogram null, not an error; none on modules."""
    _, _, plugin = run_linear(grads=(GW, bias_grad), histogram_bins=4)
    _, bias = only(plugin.records, kind="param_grad", stage="pre_clip")
    assert bias["data"]["histogram"] is None
    assert all("histogram" not in r["data"] for r in only(plugin.records, kind="module_grad"))


def test_grad_output_records_equal_numpy_and_need_the_option() -> None:
    """grad_output = true: each module call's grad_output summarised (dloss/dy of a Linear)."""
    model = hookgrad.nn.Sequential(hookgrad.nn.Linear(3, 2), hookgrad.nn.Tanh())
    x = hookgrad.tensor(W0, requires_grad=True)
    c = np.array([[1.0, -2.0], [0.0, 4.0]], dtype=np.float32)
    plugin = GradStats(GradStats.Config(summary=False, grad_output=True))
    with capture_events(("grad_stats", plugin)):
        assert global_hook_counts()["backward"] == 1
        y = model(x)
        (y * hookgrad.tensor(c)).sum().backward()
    by_module = {r["module_name"]: r["data"] for r in only(plugin.records, kind="grad_output")}
    assert set(by_module) == {"", "0", "1"}
    assert by_module["1"] == {
        "call_index": 0,
        "norm": pytest.approx(float(np.linalg.norm(c)), rel=1e-6),
        "max_abs": 4.0,
        "nonfinite": 0,
        "zero_fraction": 1 / 4,
        "numel": 4,
    }
    linear_grad_output = c * (1 - y.detach().numpy() ** 2)  # through tanh
    assert by_module["0"]["norm"] == pytest.approx(np.linalg.norm(linear_grad_output), rel=1e-6)
    assert by_module[""]["norm"] == by_module["1"]["norm"]


def test_default_config_installs_no_module_hook() -> None:
    """grad_output = false: no hookgrad_full_backward implementation, no global module hook."""
    plugin = GradStats(GradStats.Config(summary=False))
    assert plugin.hookgrad_full_backward is None
    model = linear_model()
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    with capture_events(("grad_stats", plugin)) as capture:
        capture.runtime.watch(model)
        assert set(global_hook_counts().values()) == {0}
        model(hookgrad.randn(4, 3)).sum().backward()
        optimizer.step()
        assert set(global_hook_counts().values()) == {0}
    assert only(plugin.records, kind="module_grad")
    assert not only(plugin.records, kind="grad_output")


# ---------------------------------------------------------------------- skipped steps
def test_step_vetoed_after_stats_has_pre_clip_and_skipped_post_clip() -> None:
    """A veto after the STATS stage: pre_clip records, then post_clip skipped without a ratio."""
    _, model, plugin = run_linear(VetoAfterStats())
    assert np.array_equal(model[0].weight.detach().numpy(), W0)
    post = only(plugin.records, stage="post_clip")
    assert len(only(plugin.records, stage="pre_clip")) == len(post) == 3
    assert all(r["data"]["skipped"] is True and r["data"]["update_ratio"] is None for r in post)
    assert plugin._before == {}


def test_step_vetoed_before_stats_has_skipped_post_clip_only() -> None:
    """A veto at the GUARD stage: no pre_clip records; the post_clip ones say skipped."""
    _, _, plugin = run_linear(VetoBeforeStats(), steps=2)
    assert not only(plugin.records, stage="pre_clip")
    post = only(plugin.records, kind="module_grad", stage="post_clip")
    assert [(r["step"], r["data"]["skipped"], r["data"]["update_ratio"]) for r in post] == [
        (0, True, None),
        (1, True, None),
    ]


# ---------------------------------------------------------------------- selection and config
def test_selectors_choose_the_owning_modules() -> None:
    """modules / exclude / module_types select parameters by their owning module."""
    model = hookgrad.nn.Sequential(
        hookgrad.nn.Linear(3, 4), hookgrad.nn.Tanh(), hookgrad.nn.Linear(4, 2)
    )
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)

    def params_seen(**selection: Any) -> list[str]:
        plugin = GradStats(GradStats.Config(summary=False, **selection))
        with capture_events(("grad_stats", plugin)) as capture:
            capture.runtime.watch(model)
            optimizer.zero_grad()
            model(hookgrad.randn(5, 3)).sum().backward()
            optimizer.step()
        return [
            r["data"]["param"] for r in only(plugin.records, kind="param_grad", stage="pre_clip")
        ]

    assert params_seen() == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert params_seen(modules=["2"]) == ["2.weight", "2.bias"]
    assert params_seen(exclude=["0"]) == ["2.weight", "2.bias"]
    assert params_seen(module_types=["Tanh"]) == []


def test_activated_by_entry_point_name_from_config(capsys: pytest.CaptureFixture[str]) -> None:
    """[plugins.grad_stats] activates GradStats; records reach the memory sink; table printed."""
    model = linear_model()
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    config = {"plugins": {"grad_stats": {"every_n_steps": 2}}, "events": {"memory": True}}
    with hookgrad.Runtime(config, environ={}) as rt:
        rt.watch(model)
        for _ in range(3):
            step_with(model, optimizer, GW, GB)
    plugin = rt.plugins["grad_stats"]
    assert isinstance(plugin, GradStats) and plugin.config.every_n_steps == 2
    assert rt.memory is not None
    written = [r for r in rt.memory.records if r.get("plugin") == "grad_stats"]
    assert written == as_written(plugin.records)
    assert sorted({r["step"] for r in plugin.records}) == [0, 2]
    assert capsys.readouterr().out == per_layer_table(plugin.records) + "\n"


def test_summary_off_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    """summary = false: nothing on stdout at the end of the run."""
    run_linear()
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"every_n_steps": 0}, "every_n_steps\n  Input should be greater than or equal to 1"),
        ({"histogram_bins": -1}, "histogram_bins\n  Input should be greater than or equal to 0"),
        ({"histogram_bins": 10**9}, "histogram_bins\n  Input should be less than or equal to 1024"),
        (
            {"histogram_bins": 8, "per_parameter": False},
            "histogram_bins\n  Value error, histogram_bins = 8 needs per_parameter = true",
        ),
        ({"every_n_step": 2}, "every_n_step\n  Extra inputs are not permitted"),
        ({"stats": []}, "stats\n  Tuple should have at least 1 item"),
        ({"stats": ["nrom"]}, "stats.0\n  Input should be 'norm', 'mean', 'std'"),
    ],
)
def test_bad_config_names_the_field(settings: dict[str, Any], message: str) -> None:
    """A bad value fails validation with a message naming the field and what is valid."""
    with pytest.raises(ValidationError, match=message):
        GradStats.Config(**settings)


# ---------------------------------------------------------------------- batched statistics
# Small gradients are summarised together (one float64 copy, one reduceat per statistic);
# these tests pin that a batch gives array_stats' numbers: the extremes and counts exactly,
# norm, mean and std to within the rounding of the two computations.

FAST = settings(max_examples=150, deadline=None)
SUMMARY_KEYS = [
    "norm",
    "mean",
    "std",
    "max_abs",
    "min",
    "max",
    "zero_fraction",
    "nonfinite",
    "numel",
]
EXACT_KEYS = ("max_abs", "min", "max", "zero_fraction", "nonfinite", "numel")
NONFINITE = (math.nan, math.inf, -math.inf)


def _work_eps(dtype: np.dtype[Any]) -> tuple[float, float]:
    """Machine epsilon and smallest subnormal of the dtype array_stats computes ``dtype`` in."""
    if dtype.kind != "f":
        work: Any = np.float64
    elif dtype.itemsize < 4:
        work = np.float32
    else:
        work = dtype
    info = np.finfo(work)
    return float(info.eps), float(info.smallest_subnormal)


def assert_equals_array_stats(got: Mapping[str, Any], array: np.ndarray) -> None:
    """``got`` is ``_grad_summary(array)``: the same keys in the same order, exact extremes and
    counts, and norm, mean and std within both sides' summation error.

    Bounds, with eps and the subnormal step of array_stats' working dtype and the float64
    finite entries x (n of them): a sum of squares is off by at most n eps sum(x**2) per side,
    plus n subnormal steps where float32 squares underflow; a mean by eps sum(|x|) per side;
    the variance by what those two do to ``ss / n - mean**2``. Arrays with non-finite entries
    or squares overflowing float64 must take array_stats' own path: equal to the bit.
    """
    want = kernels._grad_summary(array)
    assert list(got) == list(want) == SUMMARY_KEYS
    assert {k: got[k] for k in EXACT_KEYS} == {k: want[k] for k in EXACT_KEYS}
    x = array.astype(np.float64).ravel()
    x = x[np.isfinite(x)]
    with np.errstate(over="ignore"):
        ss = float(np.sum(x * x))
    if want["nonfinite"] or not math.isfinite(ss) or x.size == 0:
        assert got == want
        return
    eps, subnormal = _work_eps(array.dtype)
    n, mean = x.size, want["mean"]
    ss_err = 2 * n * eps * ss + n * subnormal + 4e-16 * ss
    mean_err = 2 * eps * float(np.abs(x).sum()) + 4e-16 * abs(mean)
    var_err = ss_err / n + 2 * abs(mean) * mean_err + mean_err**2 + 4e-16 * ss / n
    assert abs(got["norm"] ** 2 - want["norm"] ** 2) <= ss_err
    assert abs(got["mean"] - mean) <= mean_err
    spread = got["std"] + want["std"]
    std_err = min(math.sqrt(var_err), var_err / spread) if spread else 0.0
    assert abs(got["std"] - want["std"]) <= std_err


@st.composite
def gradient(draw: st.DrawFn) -> np.ndarray:
    """One gradient: float32 or float64, 0 to 3 dims of 0 to 5 (so empty and 1-entry ones),
    with moderate values, values of any size (subnormals, huge ones whose squares overflow),
    those and NaN/±Inf, one repeated value (variance cancels), or an offset plus noise."""
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    width: Literal[32, 64] = 32 if dtype is np.float32 else 64
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5))
    # Below 2**1023: array_stats cannot rescale larger entries (see the xfail test below).
    largest = float(np.finfo(np.float32).max) if width == 32 else 2.0**1022
    wide = st.floats(-largest, largest, width=width)
    kind = draw(
        st.sampled_from(["moderate", "moderate", "wide", "nonfinite", "constant", "offset"])
    )
    if kind == "constant":
        return np.full(shape, draw(wide | st.sampled_from(NONFINITE)), dtype=dtype)
    elements = {
        "moderate": st.floats(-1e3, 1e3, width=width),
        "wide": wide,
        "nonfinite": wide | st.sampled_from(NONFINITE),
        "offset": st.floats(1e4, 1e4 + 2**-6, width=width),
    }[kind]
    return draw(hnp.arrays(dtype, shape, elements=elements))


@FAST
@given(st.lists(gradient(), min_size=3, max_size=8))
def test_batched_summaries_equal_array_stats(grads: list[np.ndarray]) -> None:
    """Any mix of gradients: each summary equals array_stats' (see assert_equals_array_stats)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the batch's NaN/Inf/overflow arithmetic stays silent
        summaries = kernels.grad_summaries(grads)
    assert len(summaries) == len(grads)
    for summary, grad in zip(summaries, grads, strict=True):
        assert_equals_array_stats(summary, grad)


def test_entries_past_2_pow_1023_are_summarised() -> None:
    """A float64 entry of 2**1023 or more: array_stats' rescaling overflows (a known bug in
    hookspecs/_stats.py, not the batch's: the gradient goes to array_stats either way)."""
    kernels.grad_summaries([np.array([2.0**1023, 1.0])] * 3)


@pytest.mark.parametrize(
    "dtype", [np.float16, np.int32, np.uint8, np.bool_], ids=lambda d: np.dtype(d).name
)
def test_batched_summaries_cast_as_array_stats_does(dtype: Any) -> None:
    """float16 (squares past 65504), integers and bools: batched, with array_stats' numbers."""
    values = np.array([300.0, -2.0, 0.0, 1.0, 7.0, 0.0], dtype=np.float64)
    if dtype is np.uint8:
        values = np.abs(values) % 256
    grads = [values.astype(dtype).reshape(2, 3), values[:4].astype(dtype), values.astype(dtype)]
    assert kernels._plan(grads, [g.dtype in kernels._REAL for g in grads], 4096, 3)[0] == []
    for summary, grad in zip(kernels.grad_summaries(grads), grads, strict=True):
        assert_equals_array_stats(summary, grad)


def test_batch_hands_nonfinite_and_cancelling_arrays_to_array_stats() -> None:
    """NaN/Inf, float64 squares overflowing, constant arrays: array_stats' own numbers, exactly."""
    finite = np.linspace(-1.0, 2.0, 12, dtype=np.float32).reshape(3, 4)
    grads = [
        finite,
        _poked(finite, (0, 1), np.nan),
        np.array([np.inf, -1.0, 0.0], dtype=np.float32),
        np.array([1e200, -3e250, 2.0]),  # float64 squares overflow: array_stats rescales
        np.array([1e200, -1e200, 2.0]),  # the same, with a mean whose square is finite
        np.full(7, 0.1, dtype=np.float32),  # variance cancels: array_stats takes two passes
        np.zeros((0, 3), dtype=np.float32),
        np.array([np.nan, np.nan]),
    ]
    summaries = kernels.grad_summaries(grads)
    for summary, grad in zip(summaries[1:], grads[1:], strict=True):
        assert summary == kernels._grad_summary(grad)
    assert_equals_array_stats(summaries[0], finite)
    assert summaries[5]["std"] == 0.0 and summaries[6]["numel"] == 0


def test_batched_float32_statistics_are_float64_accurate() -> None:
    """The batch sums float32 gradients in float64: mean and norm match a float64 reference."""
    rng = np.random.default_rng(0)
    grads = [(rng.standard_normal(s) + 3.0).astype(np.float32) for s in (4096, 640, 64, 10)]
    for summary, grad in zip(kernels.grad_summaries(grads), grads, strict=True):
        x = grad.astype(np.float64)
        assert summary["mean"] == pytest.approx(x.mean(), rel=1e-13)
        assert summary["norm"] == pytest.approx(np.linalg.norm(x), rel=1e-13)
        assert summary["std"] == pytest.approx(x.std(), rel=1e-12)


def test_plan_batches_small_real_arrays_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Empty, large, complex arrays and batches of too few arrays go alone; batches are cut at
    _BATCH_ENTRIES entries, their bounds are where each array starts, then the total."""
    arrays = [np.zeros(3), np.zeros(0), np.zeros(5), np.zeros(2, complex), np.zeros(2), np.ones(2)]
    ok = [a.dtype in kernels._REAL for a in arrays]
    assert kernels._plan(arrays, ok, largest=4, fewest=3) == (
        [1, 2, 3],
        [([0, 4, 5], [0, 3, 5, 7])],
    )
    assert kernels._plan(arrays, ok, largest=4, fewest=4) == ([1, 2, 3, 0, 4, 5], [])
    monkeypatch.setattr(kernels, "_BATCH_ENTRIES", 5)
    assert kernels._plan(arrays, ok, largest=4, fewest=2) == ([1, 2, 3, 5], [([0, 4], [0, 3, 5])])


def test_chunked_batches_give_the_same_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cutting the batch into smaller ones changes no number: each array is reduced alone."""
    rng = np.random.default_rng(1)
    grads = [rng.standard_normal(size).astype(np.float32) for size in (5, 9, 1, 7, 8, 3)]
    whole = kernels.grad_summaries(grads)
    monkeypatch.setattr(kernels, "_BATCH_ENTRIES", 10)
    monkeypatch.setattr(kernels, "_BATCH_FEWEST", 1)
    assert kernels._plan(grads, [True] * 6, 4096, 1)[1][0] == ([0], [0, 5])  # really cut
    assert kernels.grad_summaries(grads) == whole


def test_batched_update_norms_equal_the_single_array_path() -> None:
    """(||W_after - W_before||, ||W_before||) from a batch equal the per-weight computation,
    with NaN weights, a weight whose dtype changed and float64 squares that overflow too."""
    rng = np.random.default_rng(2)
    before = {f"{i}.weight": rng.standard_normal((3, i + 1)).astype(np.float32) for i in range(8)}
    after = {
        name: w - np.float32(0.01) * rng.standard_normal(w.shape) for name, w in before.items()
    }
    after = {name: w.astype(np.float32) for name, w in after.items()}
    after["1.weight"][0, 0] = np.nan
    before["8.bias"], after["8.bias"] = np.zeros(4, np.float32), np.ones(4, np.float32)
    before["9.bias"], after["9.bias"] = np.ones((2, 3), np.float32), np.zeros((2, 3))
    before["10.bias"], after["10.bias"] = np.array([1e200, 1.0]), np.array([-1e200, 1.0])
    norms = kernels.diff_norms(list(after.values()), [before[name] for name in after])
    got = dict(zip(after, norms, strict=True))
    for name, (moved, base) in got.items():
        want = (kernels._l2_norm(after[name] - before[name]), kernels._l2_norm(before[name]))
        assert (moved, base) == pytest.approx(want, rel=1e-6, nan_ok=True)
    assert math.isnan(got["1.weight"][0])
    assert got["10.bias"][0] == math.inf


def spy(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """Count the calls of the numpy kernel ``name``: the batch paths must really run."""
    calls: list[int] = []
    real = getattr(kernels, name)

    def counted(*args: Any) -> Any:
        calls.append(len(args[0]))
        return real(*args)

    monkeypatch.setattr(kernels, name, counted)
    return calls


def test_many_parameters_records_equal_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the plugin, a batch of 8 gradients: records equal numpy, keys in their order."""
    batches = spy(monkeypatch, "_batch_summaries")
    model = hookgrad.nn.Sequential(*(hookgrad.nn.Linear(3, 3) for _ in range(4)))
    rng = np.random.default_rng(3)
    grads = [rng.standard_normal(p.shape).astype(np.float32) for p in model.parameters()]
    grads[2][1, 1], grads[5][:] = np.inf, 0.0
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    plugin = GradStats(GradStats.Config(summary=False))
    with capture_events(("grad_stats", plugin)) as capture:
        capture.runtime.watch(model)
        step_with(model, optimizer, *grads)
    assert batches == [8]  # pre_clip; post_clip reuses it: no plugin changed the gradients
    pre = only(plugin.records, kind="param_grad", stage="pre_clip")
    assert [list(r["data"]) for r in pre] == [["param", "stage", *SUMMARY_KEYS]] * 8
    for record, grad in zip(pre, grads, strict=True):
        stats = {k: v for k, v in record["data"].items() if k not in ("param", "stage")}
        assert stats == numpy_stats(grad)
    post = only(plugin.records, kind="param_grad", stage="post_clip")
    assert list(post[0]["data"]) == ["param", "stage", "skipped", *SUMMARY_KEYS, "update_ratio"]
    modules = only(plugin.records, kind="module_grad", stage="pre_clip")
    assert [r["data"]["nonfinite"] for r in modules] == [0, 1, 0, 0]
    assert modules[2]["data"]["zero_fraction"] == 3 / 12


def test_many_parameters_update_ratios_are_lr_times_grad_over_weight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """8 weights, so their norms come from one batch: plain SGD's ratio lr * ||g|| / ||W||."""
    batches = spy(monkeypatch, "_batch_moves")
    model = hookgrad.nn.Sequential(*(hookgrad.nn.Linear(3, 3) for _ in range(4)))
    weights = [p.detach().numpy().copy() for p in model.parameters()]
    rng = np.random.default_rng(4)
    grads = [rng.standard_normal(w.shape).astype(np.float32) for w in weights]
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    plugin = GradStats(GradStats.Config(summary=False))
    with capture_events(("grad_stats", plugin)) as capture:
        capture.runtime.watch(model)
        step_with(model, optimizer, *grads)
    assert batches == [8]
    post = only(plugin.records, kind="param_grad", stage="post_clip")
    norm = np.linalg.norm
    expected = [0.1 * norm(g) / norm(w) for g, w in zip(grads, weights, strict=True)]
    assert [r["data"]["update_ratio"] for r in post] == pytest.approx(expected, rel=1e-5)


# ---------------------------------------------------------------------- the per-layer table
def _pre(
    step: int, module: str, norm: float, max_abs: float | None, nonfinite: int = 0
) -> dict[str, Any]:
    """A pre_clip module_grad record in its JSON form (only the keys the table reads)."""
    data = {"stage": "pre_clip", "norm": norm, "max_abs": max_abs, "nonfinite": nonfinite}
    return {
        "plugin": "grad_stats",
        "kind": "module_grad",
        "step": step,
        "module_name": module,
        "data": data,
    }


def _post(
    step: int,
    module: str,
    norm: float,
    max_abs: float | None,
    ratio: float | None,
    skipped: bool = False,
    nonfinite: int = 0,
) -> dict[str, Any]:
    """A post_clip module_grad record in its JSON form."""
    record = _pre(step, module, norm, max_abs, nonfinite)
    record["data"] |= {"stage": "post_clip", "skipped": skipped, "update_ratio": ratio}
    return record


def test_per_layer_table_text() -> None:
    """One row per module from JSON records; a step vetoed before the stats still counts."""
    records: list[dict[str, Any]] = [
        {"event": "run_started", "level": "info"},  # a log entry: ignored
        {"plugin": "grad_clip", "kind": "clip", "step": 0, "module_name": None, "data": {}},
        _pre(0, "0", norm=2.0, max_abs=1.5),
        _post(0, "0", norm=1.0, max_abs=1.0, ratio=0.01),
        _pre(0, "", norm=0.5, max_abs=0.25),
        _post(0, "", norm=0.5, max_abs=0.25, ratio=None),
        _pre(1, "0", norm=4.0, max_abs=3.0),
        _post(1, "0", norm=1.0, max_abs=0.75, ratio=0.03),
        _post(2, "0", norm=0.0, max_abs=None, ratio=None, skipped=True, nonfinite=3),  # vetoed
    ]
    assert per_layer_table(records) == (
        "module  steps  pre-clip last  pre-clip mean  pre-clip max  post-clip last  max |g|"
        "  nonfinite  update ratio\n"
        "0           3              4              3             4               1        3"
        "          3          0.02\n"
        "(root)      1            0.5            0.5           0.5             0.5     0.25"
        "          0             -"
    )


def test_per_layer_table_without_module_records() -> None:
    """No module_grad records (or only other plugins'): a one-line note instead of a table."""
    assert per_layer_table([]) == "grad_stats: no module_grad records"
    other = _pre(0, "0", norm=1.0, max_abs=1.0) | {"plugin": "mine"}
    assert per_layer_table([other]) == "grad_stats: no module_grad records"


# ---------------------------------------------------------------------- torch as the oracle
def test_norms_and_update_ratios_match_torch_sgd_momentum() -> None:
    """Over 3 SGD steps with momentum, norms and update ratios equal torch's."""
    torch = pytest.importorskip("torch")
    model = hookgrad.nn.Sequential(
        hookgrad.nn.Linear(3, 4), hookgrad.nn.Tanh(), hookgrad.nn.Linear(4, 2)
    )
    reference = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    with torch.no_grad():
        for (_, ours), theirs in zip(model.named_parameters(), reference.parameters(), strict=True):
            theirs.copy_(torch.from_numpy(ours.detach().numpy().copy()))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    target = rng.standard_normal((5, 2)).astype(np.float32)
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    torch_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    expected: list[tuple[float, float]] = []
    plugin = GradStats(GradStats.Config(summary=False))
    with capture_events(("grad_stats", plugin), engine="hookgrad") as capture:
        capture.runtime.watch(model)
        for _ in range(3):
            optimizer.zero_grad()
            ((model(hookgrad.tensor(x)) - hookgrad.tensor(target)) ** 2).mean().backward()
            optimizer.step()
            torch_optimizer.zero_grad()
            ((reference(torch.from_numpy(x)) - torch.from_numpy(target)) ** 2).mean().backward()
            before = [p.detach().clone() for p in reference.parameters()]
            torch_optimizer.step()
            for p, w in zip(reference.parameters(), before, strict=True):
                ratio = float(
                    torch.linalg.vector_norm(p.detach() - w) / torch.linalg.vector_norm(w)
                )
                expected.append((float(torch.linalg.vector_norm(p.grad)), ratio))
    pre = only(plugin.records, kind="param_grad", stage="pre_clip")
    post = only(plugin.records, kind="param_grad", stage="post_clip")
    assert [r["data"]["norm"] for r in pre] == pytest.approx([n for n, _ in expected], rel=1e-5)
    assert [r["data"]["update_ratio"] for r in post] == pytest.approx(
        [r for _, r in expected], rel=1e-4
    )


def test_memory_stays_bounded_while_the_table_counts_every_step(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """keep_records bounds plugin.records to the latest records; the per-layer table printed
    at the end still counts every sampled step, equal to the table built from all the records
    the sinks got."""
    nn = hookgrad.nn
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.01)
    plugin = GradStats(GradStats.Config(keep_records=10))
    with capture_events(("grad_stats", plugin)) as capture:
        capture.runtime.watch(model)
        for _ in range(25):
            optimizer.zero_grad()
            model(hookgrad.ones(2, 3)).sum().backward()
            optimizer.step()
    emitted = capture.of_plugin("grad_stats")
    assert len(emitted) > 200 and as_written(plugin.records) == emitted[-10:]
    table = per_layer_table(emitted)
    assert capsys.readouterr().out == table + "\n"
    assert table.splitlines()[1].split()[:2] == ["0", "25"]  # 25 steps counted for layer 0
