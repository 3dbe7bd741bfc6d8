"""docs/plugins/grad_stats.md, promise by promise: settings, record fields, the per-layer table.

Expected numbers are numpy's (or torch's for the optimizer update), computed here.
"""

from __future__ import annotations

import json
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
from hookgrad.hookspecs import OptimizerStepPreEvent, Stage, hookimpl, stage
from hookgrad.plugins.grad_clip import GradClip
from hookgrad.plugins.grad_stats import GradStats, per_layer_table
from hookgrad.testing import capture_events

nn = hookgrad.nn
# SGD multiplies the non-finite test gradients by lr = 0: numpy warns, as intended.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
NASTY = np.array([[0.0, -3.0, np.nan, 2.0], [np.inf, 0.0, 0.5, -np.inf]], np.float32)


def _params(
    grads: Mapping[str, np.ndarray | None], weights: Mapping[str, np.ndarray] | None = None
):
    params = {}
    for name, g in grads.items():
        w = (weights or {}).get(name)
        shape = (2,) if g is None else g.shape
        dtype = np.float32 if g is None else g.dtype
        p = nn.Parameter(hookgrad.tensor(np.ones(shape, dtype) if w is None else w))
        p.grad = None if g is None else hookgrad.tensor(g.copy())
        params[name] = p
    return params


def _run(
    settings: Mapping[str, Any],
    params: Mapping[str, Any],
    steps: int = 1,
    *others: tuple[str, object],
    optimizer: Any = None,
) -> tuple[GradStats, list[dict[str, Any]]]:
    """``steps`` optimizer steps with grad_stats (summary off unless set) and ``others``."""
    optimizer = optimizer or hookgrad.optim.SGD(list(params.items()), lr=0.0)
    plugin = GradStats(GradStats.Config(**{"summary": False, **settings}))
    with capture_events(("grad_stats", plugin), *others) as capture:
        for _ in range(steps):
            optimizer.step()
    return plugin, capture.of_plugin("grad_stats")


def _of(records: Sequence[Mapping[str, Any]], kind: str, stage_name: str | None = None) -> list:
    return [
        r
        for r in records
        if r["kind"] == kind and (stage_name is None or r["data"]["stage"] == stage_name)
    ]


def _finite_stats(g: np.ndarray) -> dict[str, Any]:
    finite = g[np.isfinite(g)].astype(np.float64)
    return {
        "norm": float(np.sqrt(np.sum(finite**2))),
        "mean": float(finite.mean()),
        "std": float(finite.std()),
        "min": float(finite.min()),
        "max": float(finite.max()),
        "max_abs": float(np.abs(finite).max()),
        "nonfinite": int(np.sum(~np.isfinite(g))),
        "zero_fraction": float(np.sum(g == 0) / g.size),
        "numel": int(g.size),
    }


# ---------------------------------------------------------------------- configuration
@pytest.mark.parametrize(
    ("table", "field"),
    [
        ({"every_n_steps": 0}, "every_n_steps"),
        ({"every_n_steps": -5}, "every_n_steps"),
        ({"histogram_bins": -1}, "histogram_bins"),
        ({"histogram_bins": 4, "per_parameter": False}, "histogram_bins"),
        ({"every_n_step": 10}, "every_n_step"),
        ({"summary": "sometimes"}, "summary"),
    ],
)
def test_bad_settings_fail_naming_the_field(table: dict[str, Any], field: str) -> None:
    """'every_n_steps (at least 1)', 'histogram_bins ... needs per_parameter', unknown keys."""
    with pytest.raises(ValidationError) as info:
        GradStats.Config.model_validate(table)
    assert [e["loc"] for e in info.value.errors()] == [(field,)]


def test_defaults_are_the_documented_ones() -> None:
    """The configuration table's defaults: 1, true, true, 0, false, true."""
    c = GradStats.Config()
    got = (c.every_n_steps, c.per_parameter, c.update_ratio, c.histogram_bins)
    assert (*got, c.grad_output, c.summary) == (1, True, True, 0, False, True)


# ---------------------------------------------------------------------- record fields
def test_param_grad_statistics_are_over_finite_entries() -> None:
    """norm, mean, std (population), min, max, max_abs over finite entries; counts over all."""
    _, records = _run({}, _params({"fc.weight": NASTY}))
    [pre] = _of(records, "param_grad", "pre_clip")
    expected = _finite_stats(NASTY)
    for key, value in expected.items():
        assert pre["data"][key] == pytest.approx(value, rel=1e-6), key
    assert pre["module_name"] == "fc" and pre["data"]["param"] == "fc.weight"


def test_records_are_strict_json_even_for_nonfinite_gradients() -> None:
    """'Numbers are plain JSON: a value that ... is not finite is null, never NaN.'"""
    all_bad = np.array([np.nan, np.inf, -np.inf], np.float32)
    _, records = _run({"histogram_bins": 3}, _params({"a.w": NASTY, "b.w": all_bad}))
    text = json.dumps(records, allow_nan=False)  # raises on NaN or Infinity
    [bad] = [r for r in _of(records, "param_grad", "pre_clip") if r["data"]["param"] == "b.w"]
    for key in ("mean", "std", "min", "max", "max_abs", "histogram"):
        assert bad["data"][key] is None, key
    assert bad["data"]["nonfinite"] == 3 and "NaN" not in text


def test_module_grad_treats_its_parameters_as_one_vector() -> None:
    """module_grad: norm = sqrt(sum of squared norms), max_abs the largest, counts over all."""
    w = np.array([[3.0, 0.0], [0.0, -4.0]], np.float32)
    b = np.array([0.0, 12.0, np.nan], np.float32)
    _, records = _run({}, _params({"fc.weight": w, "fc.bias": b}))
    [module] = _of(records, "module_grad", "pre_clip")
    assert module["module_name"] == "fc"
    data = module["data"]
    assert data["norm"] == pytest.approx(13.0)
    assert data["max_abs"] == 12.0
    assert data["nonfinite"] == 1
    assert data["zero_fraction"] == pytest.approx(3 / 7)
    assert data["numel"] == 7


def test_a_parameter_without_a_dot_is_owned_by_the_root() -> None:
    """'The owning module is the parameter's qualified name up to its last dot, "" for root.'"""
    _, records = _run(
        {}, _params({"gain": np.ones(2, np.float32), "a.b.c": np.ones(1, np.float32)})
    )
    owners = {r["data"]["param"]: r["module_name"] for r in _of(records, "param_grad")}
    assert owners == {"gain": "", "a.b.c": "a.b"}


def test_pre_clip_records_of_a_step_come_before_its_post_clip_records() -> None:
    """'a step's pre_clip records come before its post_clip records'; both twice per step."""
    _, records = _run(
        {}, _params({"a.w": np.ones(2, np.float32), "b.w": np.ones(3, np.float32)}), 2
    )
    stages = [(r["step"], r["data"]["stage"]) for r in records]
    assert stages == sorted(stages, key=lambda s: (s[0], s[1] != "pre_clip"))
    assert len(_of(records, "param_grad")) == 2 * 2 * 2 and len(_of(records, "module_grad")) == 8


@pytest.mark.parametrize(("every", "steps", "expected"), [(3, 7, [0, 3, 6]), (1, 3, [0, 1, 2])])
def test_every_n_steps_samples_0_n_2n(every: int, steps: int, expected: list[int]) -> None:
    """'every_n_steps: record on steps 0, N, 2N, ... only'."""
    _, records = _run({"every_n_steps": every}, _params({"a.w": np.ones(2, np.float32)}), steps)
    assert sorted({r["step"] for r in records}) == expected


def test_per_parameter_off_keeps_module_records() -> None:
    """'per_parameter ... module_grad records are always emitted'."""
    _, records = _run({"per_parameter": False}, _params({"a.w": NASTY}))
    assert {r["kind"] for r in records} == {"module_grad"}


def test_a_parameter_without_a_gradient_has_no_record() -> None:
    """param_grad is 'per parameter with a gradient'; a grad-less module has no module_grad."""
    _, records = _run({}, _params({"a.w": np.ones(2, np.float32), "b.w": None}))
    assert {r["module_name"] for r in records} == {"a"}


@pytest.mark.parametrize("bins", [1, 5])
def test_histogram_is_numpys_over_the_finite_entries(bins: int) -> None:
    """'histogram is np.histogram of the finite entries ... counts sum to the finite entries'."""
    _, records = _run({"histogram_bins": bins}, _params({"a.w": NASTY}))
    for record in _of(records, "param_grad"):
        counts, edges = np.histogram(NASTY[np.isfinite(NASTY)], bins=bins)
        assert record["data"]["histogram"] == {"counts": counts.tolist(), "edges": edges.tolist()}
        assert sum(record["data"]["histogram"]["counts"]) == np.isfinite(NASTY).sum() == 5


def test_histogram_of_a_constant_gradient_is_numpys() -> None:
    """A gradient with one distinct value: numpy's widened one-bin range, to the last bit."""
    g = np.full(5, 0.25, np.float32)
    _, records = _run({"histogram_bins": 2}, _params({"a.w": g}))
    counts, edges = np.histogram(g, bins=2)
    hist = _of(records, "param_grad", "pre_clip")[0]["data"]["histogram"]
    assert hist == {"counts": counts.tolist(), "edges": edges.tolist()}


# ---------------------------------------------------------------------- update ratio
def test_update_ratio_equals_torch_adams_move(torch_module: ModuleType) -> None:
    """update_ratio = ||W_after - W_before|| / ||W_before||, measured (Adam's scaling too)."""
    torch = torch_module
    rng = np.random.default_rng(5)
    w, g = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4))
    g = g.astype(np.float32)
    params = _params({"fc.weight": g}, {"fc.weight": w.copy()})
    optimizer = hookgrad.optim.Adam(list(params.items()), lr=0.01)
    _, records = _run({}, params, optimizer=optimizer)
    tw = torch.nn.Parameter(torch.tensor(w.copy()))
    tw.grad = torch.tensor(g)
    torch.optim.Adam([tw], lr=0.01).step()
    after = tw.detach().numpy().astype(np.float64)
    expected = np.linalg.norm(after - w) / np.linalg.norm(w.astype(np.float64))
    for record in _of(records, "param_grad", "post_clip") + _of(
        records, "module_grad", "post_clip"
    ):
        assert record["data"]["update_ratio"] == pytest.approx(expected, rel=1e-4)
        assert record["data"]["skipped"] is False


@pytest.fixture
def torch_module() -> ModuleType:
    """torch 2.13, the oracle for Adam's update."""
    return pytest.importorskip("torch")


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_update_ratio_is_null_when_the_step_wrote_nan_into_a_weight() -> None:
    """'It is null when a step wrote NaN into a weight' (and the record stays strict JSON)."""
    params = _params({"fc.weight": np.array([np.nan, 1.0], np.float32)})
    optimizer = hookgrad.optim.SGD(list(params.items()), lr=0.1)
    _, records = _run({}, params, optimizer=optimizer)
    for record in _of(records, "param_grad", "post_clip") + _of(
        records, "module_grad", "post_clip"
    ):
        assert record["data"]["update_ratio"] is None
    json.dumps(records, allow_nan=False)


def test_update_ratio_key_is_absent_when_off_and_on_pre_clip() -> None:
    """'The key is present only when update_ratio is on' (and only on post_clip records)."""
    for on in (True, False):
        _, records = _run({"update_ratio": on}, _params({"a.w": np.ones(2, np.float32)}))
        post = _of(records, "param_grad", "post_clip") + _of(records, "module_grad", "post_clip")
        assert all(("update_ratio" in r["data"]) is on for r in post)
        assert all("update_ratio" not in r["data"] for r in _of(records, "param_grad", "pre_clip"))


class _LateVeto:
    """Vetoes after the statistics stage (staged at CLIP, so pre_clip records exist)."""

    @hookimpl(trylast=True)
    @stage(Stage.CLIP)
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> bool:
        return False


def test_a_vetoed_step_is_skipped_with_a_null_update_ratio() -> None:
    """'skipped is true when a plugin vetoed the step ... no update_ratio is given'."""
    params = _params({"a.w": np.ones(2, np.float32)})
    optimizer = hookgrad.optim.SGD(list(params.items()), lr=1.0)
    _, records = _run({}, params, 1, ("veto", _LateVeto()), optimizer=optimizer)
    post = _of(records, "param_grad", "post_clip") + _of(records, "module_grad", "post_clip")
    assert post and all(r["data"]["skipped"] is True for r in post)
    assert all(r["data"]["update_ratio"] is None for r in post)
    np.testing.assert_array_equal(params["a.w"].detach().numpy(), [1.0, 1.0])


def test_post_clip_shows_the_clipped_gradients_pre_clip_the_raw_ones() -> None:
    """pre_clip is before grad_clip and post_clip after it, whatever the registration order."""
    g = np.array([3.0, 4.0], np.float32)
    clip = ("grad_clip", GradClip(GradClip.Config(max_norm=1.0)))
    params = _params({"a.w": g})
    optimizer = hookgrad.optim.SGD(list(params.items()), lr=0.0)
    plugin = GradStats(GradStats.Config(summary=False))
    with capture_events(clip, ("grad_stats", plugin)) as capture:
        optimizer.step()
    records = capture.of_plugin("grad_stats")
    [pre] = _of(records, "param_grad", "pre_clip")
    [post] = _of(records, "param_grad", "post_clip")
    assert pre["data"]["norm"] == pytest.approx(5.0)
    assert post["data"]["norm"] == pytest.approx(1.0, rel=1e-5)


# ---------------------------------------------------------------------- grad_output records
def test_grad_output_records_each_call_of_a_shared_module() -> None:
    """grad_output: per module call, call_index telling apart two calls of one module."""
    shared = nn.Linear(2, 2)
    model = nn.Sequential(shared, nn.Tanh(), shared)
    x = hookgrad.randn(3, 2, requires_grad=True)
    plugin = GradStats(GradStats.Config(grad_output=True, summary=False))
    upstream: list[np.ndarray] = []
    handle = nn.modules.module.register_module_full_backward_hook(
        lambda m, gi, go: upstream.append(go[0].numpy().copy()) if m is shared else None
    )
    try:
        with capture_events(("grad_stats", plugin)) as capture:
            (model(x) * 2.0).sum().backward()
    finally:
        handle.remove()
    records = [r for r in capture.of_plugin("grad_stats") if r["module_name"] == "0"]
    assert sorted(r["data"]["call_index"] for r in records) == [0, 1]
    norms = sorted(r["data"]["norm"] for r in records)
    assert norms == pytest.approx(sorted(float(np.linalg.norm(g)) for g in upstream), rel=1e-6)


# ---------------------------------------------------------------------- the per-layer table
def _module_record(step: int, module: str, stage_name: str, **data: Any) -> dict[str, Any]:
    return {
        "plugin": "grad_stats",
        "kind": "module_grad",
        "step": step,
        "module_name": module,
        "data": {"stage": stage_name, **data},
    }


def _row(table: str, name: str) -> list[str]:
    [line] = [line for line in table.splitlines()[1:] if line.split()[0] == name]
    return line.split()[1:]


def test_table_counts_each_step_once_and_averages_taken_steps() -> None:
    """Table columns: steps, pre-clip last/mean/max, post-clip last taken, max|g|, ratio mean."""
    stats = {"max_abs": 1.0, "nonfinite": 0}
    records = [
        _module_record(0, "fc", "pre_clip", norm=2.0, **stats),
        _module_record(0, "fc", "post_clip", norm=1.0, skipped=False, update_ratio=0.1, **stats),
        _module_record(1, "fc", "pre_clip", norm=4.0, max_abs=3.0, nonfinite=0),
        _module_record(1, "fc", "post_clip", norm=2.0, skipped=False, update_ratio=0.3, **stats),
        # step 2 vetoed before the statistics stage: only a skipped post_clip record
        _module_record(2, "fc", "post_clip", norm=9.0, skipped=True, max_abs=7.0, nonfinite=5),
        {"plugin": "other", "kind": "module_grad", "step": 0, "module_name": "x", "data": {}},
        {"event": "log entry", "level": "info"},
    ]
    table = per_layer_table(records)
    assert _row(table, "fc") == ["3", "4", "3", "4", "2", "7", "5", "0.2"]
    assert "x" not in [line.split()[0] for line in table.splitlines()]


def test_table_rows_follow_first_appearance_and_survive_a_json_round_trip() -> None:
    """Rows 'in order of first appearance'; dicts read back from JSON give the same table."""
    params = _params({"z.w": np.ones(2, np.float32), "a.w": np.full(3, 2.0, np.float32)})
    plugin, records = _run({}, params, 3)
    table = per_layer_table(plugin.records)
    assert [line.split()[0] for line in table.splitlines()[1:]] == ["z", "a"]
    assert per_layer_table(json.loads(json.dumps(records))) == table
    assert _row(table, "a")[:4] == ["3", "3.464", "3.464", "3.464"]  # sqrt(3 * 2**2)


def test_summary_prints_the_table_when_the_run_ends(capsys: pytest.CaptureFixture[str]) -> None:
    """'summary: print the per-layer table to stdout when the run ends'."""
    params = _params({"fc.w": np.array([3.0, 4.0], np.float32)})
    optimizer = hookgrad.optim.SGD(list(params.items()), lr=0.0)
    plugin = GradStats(GradStats.Config())
    with capture_events(("grad_stats", plugin)):
        optimizer.step()
        assert capsys.readouterr().out == ""
    out = capsys.readouterr().out
    assert out.strip() == per_layer_table(plugin.records)
    assert _row(out, "fc")[:2] == ["1", "5"]


def test_selectors_pick_parameters_by_owning_module() -> None:
    """'modules = ["encoder.*"] keeps the statistics of the encoder's layers only'."""
    grads = {n: np.ones(2, np.float32) for n in ("encoder.0.w", "encoder.1.w", "decoder.0.w")}
    _, records = _run({"modules": ["encoder.*"], "exclude": ["*.1"]}, _params(grads))
    assert {r["module_name"] for r in records} == {"encoder.0"}


def test_module_types_select_nothing_named_only_by_named_parameters() -> None:
    """'A parameter named only through named_parameters() has no module class'."""
    model = nn.Sequential(nn.Linear(2, 2))
    optimizer = hookgrad.optim.SGD(model.named_parameters(), lr=0.0)
    for p in model.parameters():
        p.grad = hookgrad.ones(*p.shape)
    _, records = _run({"module_types": ["Linear"]}, {}, optimizer=optimizer)
    assert records == []
    _, records = _run({}, {}, optimizer=optimizer)
    assert {r["module_name"] for r in records} == {"0"}


def test_zero_fraction_counts_exact_zeros_among_all_entries() -> None:
    """'zero_fraction is the share of exact zeros among all entries' (-0.0 counts; 1e-45 not)."""
    g = np.array([0.0, -0.0, 1e-45, np.nan], np.float32)
    _, records = _run({}, _params({"a.w": g}))
    [pre] = _of(records, "param_grad", "pre_clip")
    assert pre["data"]["zero_fraction"] == 0.5
    assert math.isclose(pre["data"]["min"], float(np.float32(0.0)))


# ---------------------------------------------------------------------- any gradients at all
def _reference(g: np.ndarray) -> dict[str, Any]:
    """The documented param_grad numbers, from float64 numpy over the finite entries."""
    flat = g.reshape(-1)
    finite = flat[np.isfinite(flat)].astype(np.float64)
    out: dict[str, Any] = {
        "nonfinite": int(flat.size - finite.size),
        "zero_fraction": float(np.count_nonzero(flat == 0) / flat.size) if flat.size else None,
        "numel": int(flat.size),
    }
    if finite.size:
        out.update(
            norm=float(np.sqrt(np.sum(finite**2))),
            mean=float(finite.mean()),
            std=float(finite.std()),
            min=float(finite.min()),
            max=float(finite.max()),
            max_abs=float(np.abs(finite).max()),
        )
    else:
        out.update(mean=None, std=None, min=None, max=None, max_abs=None)
    return out


def _as(dtype: type, value: float) -> float:
    """``value`` rounded to ``dtype`` (3e38 becomes inf in float16, as a cast does)."""
    with np.errstate(over="ignore"):
        return float(np.asarray(value).astype(dtype))


_ELEMENTS = st.one_of(
    st.floats(-1e4, 1e4, width=32),
    st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan, 1e-40, 3e38, -3e38]),
)
_GRADIENT = st.sampled_from([np.float32, np.float64, np.float16]).flatmap(
    lambda dtype: hnp.arrays(
        dtype,
        hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6),
        elements=_ELEMENTS.map(lambda v: _as(dtype, v)),
    )
)


@settings(max_examples=60, deadline=None)
@given(grads=st.lists(_GRADIENT, min_size=1, max_size=9))
def test_any_gradients_are_summarised_as_the_page_says(grads: list[np.ndarray]) -> None:
    """param_grad statistics equal float64 numpy over the finite entries, for any gradients
    (mixed dtypes, 0-d, empty, non-finite, huge), alone or batched with others."""
    params = {f"m{i}.w": g for i, g in enumerate(grads)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _, records = _run({"update_ratio": False}, _params(params))
    got = {r["data"]["param"]: r["data"] for r in _of(records, "param_grad", "pre_clip")}
    for name, g in params.items():
        for key, value in _reference(g).items():
            if value is None or isinstance(value, int):
                assert got[name][key] == value, (name, key)
                continue
            scale = _reference(g)["max_abs"] or 0.0
            tolerance = 1e-6 * max(scale, 1e-30) if key in ("mean", "std") else 0.0
            assert got[name][key] == pytest.approx(value, rel=1e-5, abs=tolerance), (name, key)
    json.dumps(records, allow_nan=False)


def test_a_norm_past_the_largest_float_is_null_not_infinity() -> None:
    """'a value that ... is not finite is null': a float64 gradient whose norm overflows."""
    huge = np.full(4, 1.7e308)
    _, records = _run({}, _params({"a.w": huge, "b.w": np.ones(2)}))
    json.dumps(records, allow_nan=False)
    for record in [r for r in records if r["module_name"] == "a"]:
        assert record["data"]["norm"] is None
        assert record["data"]["max_abs"] == 1.7e308
    table = per_layer_table(records)
    assert _row(table, "a")[:2] == ["1", "-"] and _row(table, "b")[1] == "1.414"


def test_the_table_skips_malformed_records_read_back_from_a_file() -> None:
    """per_layer_table takes dicts read back from events.jsonl: a module_grad line without
    data or step, or with a step that is not a number, is left out instead of crashing."""
    good = _module_record(0, "fc", "pre_clip", norm=2.0, max_abs=1.0, nonfinite=0)
    broken = [
        {"plugin": "grad_stats", "kind": "module_grad", "step": 3},
        {"plugin": "grad_stats", "kind": "module_grad", "step": "x", "data": {"norm": 1.0}},
        {"plugin": "grad_stats", "kind": "module_grad", "step": 4, "data": [1, 2]},
        {"plugin": "grad_stats", "kind": "module_grad", "step": 5, "module_name": 7, "data": {}},
    ]
    assert per_layer_table([good, *broken]) == per_layer_table([good])


def test_the_table_reads_the_json_spellings_of_non_finite_numbers() -> None:
    """Log readers accept "NaN"/"Infinity"/"-Infinity" strings and the legacy bare tokens."""
    spelled = [
        _module_record(0, "fc", "pre_clip", norm="Infinity", max_abs="NaN", nonfinite=2),
        _module_record(1, "fc", "pre_clip", norm=3.0, max_abs=1.0, nonfinite=0),
    ]
    bare = json.loads(json.dumps(spelled).replace('"Infinity"', "Infinity").replace('"NaN"', "NaN"))
    assert per_layer_table(spelled) == per_layer_table(bare)
    assert _row(per_layer_table(spelled), "fc")[:4] == ["2", "3", "inf", "inf"]


def test_a_reused_instance_keeps_the_records_of_its_current_run_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """'plugin.records keeps every record of the run': an instance registered in a second
    runtime starts a new run, and its table at the end shows that run alone."""
    plugin = GradStats(GradStats.Config(per_parameter=False))
    for g in ([3.0, 4.0], [30.0, 40.0]):
        params = _params({"w.weight": np.array(g, np.float32)})
        optimizer = hookgrad.optim.SGD(list(params.items()), lr=0.0)
        with capture_events(("grad_stats", plugin)):
            optimizer.step()
    assert len(plugin.records) == 2  # one module_grad pre_clip and one post_clip
    last_table = capsys.readouterr().out.strip().split("\n\n")[-1].splitlines()[-2:]
    assert _row("\n".join(last_table), "w")[:5] == ["1", "50", "50", "50", "50"]
