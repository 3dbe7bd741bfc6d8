"""event_log: one record per chosen hook event, the event's summary; unchosen hooks cost nothing."""

from __future__ import annotations

import contextlib
import io
import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pydantic
import pytest

import hookgrad
from hookgrad import nn
from hookgrad.hookspecs import HOOK_EVENTS, ForwardEvent, FullBackwardEvent, PluginConfig, hookimpl
from hookgrad.plugins.event_log import ENVELOPE, HOOK_OF_PHASE, EventLog
from hookgrad.runtime import ConfigError
from hookgrad.testing import capture_events, global_hook_counts

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugins" / "event_log.md"
LR = 0.1
ALL_PHASES = list(HOOK_OF_PHASE)
MODULE_HOOK_KINDS = ("forward_pre", "forward", "backward_pre", "backward")


def module_hook_counts() -> list[int]:
    """Global forward pre, forward, backward pre and full backward hooks registered now."""
    counts = global_hook_counts()
    return [counts[kind] for kind in MODULE_HOOK_KINDS]


# ---------------------------------------------------------------------- helpers
@dataclass
class Setup:
    """A 3-4-2 tanh MLP, its SGD optimizer, an input that requires grad and a loss weight."""

    model: nn.Sequential
    optimizer: hookgrad.optim.SGD
    x: hookgrad.Tensor
    target: hookgrad.Tensor

    def step(self) -> None:
        """One training step on loss = sum(model(x) * target)."""
        self.optimizer.zero_grad()
        (self.model(self.x) * self.target).sum().backward()
        self.optimizer.step()


def setup(like: Setup | None = None) -> Setup:
    """A fresh setup; ``like``: with the same weights and data as that one."""
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=LR)
    if like is None:
        return Setup(
            model, optimizer, hookgrad.randn(5, 3, requires_grad=True), hookgrad.randn(5, 2)
        )
    model.load_state_dict(like.model.state_dict())
    x = like.x.detach().clone().requires_grad_(True)
    return Setup(model, optimizer, x, like.target)


@dataclass
class Reference:
    """The same step computed in float64 numpy."""

    loss: float
    backward: list[tuple[str, str, float, float]]  # name, class, |grad_input|, |grad_output|
    params: dict[str, np.ndarray]
    grads: dict[str, np.ndarray]


def reference(s: Setup) -> Reference:
    """Forward and backward of ``s`` by hand: the numbers the records must hold."""
    w0, b0, w2, b2 = (p.detach().numpy().astype(np.float64) for p in s.model.parameters())
    x, t = s.x.detach().numpy().astype(np.float64), s.target.numpy().astype(np.float64)
    a = np.tanh(x @ w0.T + b0)
    loss = float(((a @ w2.T + b2) * t).sum())
    g_a = t @ w2  # leaves Linear "2", enters Tanh "1"
    g_h = g_a * (1 - a**2)  # leaves Tanh "1", enters Linear "0"
    g_x = g_h @ w0  # leaves Linear "0" and the whole model
    norm = np.linalg.norm
    backward = [
        ("2", "Linear", norm(g_a), norm(t)),
        ("1", "Tanh", norm(g_h), norm(g_a)),
        ("0", "Linear", norm(g_x), norm(g_h)),
        ("", "Sequential", norm(g_x), norm(t)),
    ]
    params = {"0.weight": w0, "0.bias": b0, "2.weight": w2, "2.bias": b2}
    grads = {"0.weight": g_h.T @ x, "0.bias": g_h.sum(0), "2.weight": t.T @ a, "2.bias": t.sum(0)}
    return Reference(loss, [(n, c, float(i), float(o)) for n, c, i, o in backward], params, grads)


def runtime(tmp_path: Path | None = None, **table: Any) -> hookgrad.Runtime:
    """A runtime activating event_log by its entry-point name, to a JSONL file or to memory."""
    events = {"jsonl": str(tmp_path / "events.jsonl")} if tmp_path else {"memory": True}
    return hookgrad.Runtime({"plugins": {"event_log": table}, "events": events}, environ={})


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def norms(summaries: list[dict[str, Any] | None]) -> list[float]:
    return [s["norm"] for s in summaries if s is not None]


# ---------------------------------------------------------------------- config
def test_defaults_log_full_backward_every_step() -> None:
    """By default only the full backward hook is logged, on every step."""
    config = EventLog.Config()
    assert (config.hooks, config.every_n_steps) == (("backward",), 1)


def test_unknown_hook_lists_the_eight_phases() -> None:
    """A hook that is no phase fails naming the field and every valid choice."""
    with pytest.raises(pydantic.ValidationError) as info:
        EventLog.Config(hooks=("full_backward",))  # type: ignore[arg-type]
    text = str(info.value)
    assert "hooks.0" in text
    assert all(f"'{phase}'" in text for phase in ALL_PHASES)


def test_empty_hooks_are_rejected() -> None:
    """hooks = [] would log nothing: an error pointing at enabled = false instead."""
    with pytest.raises(pydantic.ValidationError, match="hooks must name at least one of"):
        EventLog.Config(hooks=())


def test_every_n_steps_below_one_is_rejected() -> None:
    """every_n_steps = 0 fails naming the field."""
    with pytest.raises(pydantic.ValidationError, match="every_n_steps"):
        EventLog.Config(every_n_steps=0)


def test_typo_in_the_config_table_suggests_the_key() -> None:
    """Through the runtime, a misspelled key gets a did-you-mean naming the plugin table."""
    with pytest.raises(ConfigError, match=r"unknown key 'hook' in \[plugins.event_log\]; did"):
        runtime(hook=["backward"])


def test_no_event_field_clashes_with_the_record_envelope() -> None:
    """plugin, kind and hook are no payload field, so a summary never overwrites them."""
    for model in HOOK_EVENTS.values():
        assert not set(model.model_fields) & set(ENVELOPE), model.__name__


# ---------------------------------------------------------------------- what gets implemented
def test_unchosen_hooks_are_not_implemented() -> None:
    """A hook left out of ``hooks`` is None on the instance, so pluggy registers nothing."""
    plugin = EventLog(EventLog.Config(hooks=("forward", "optimizer_step_pre")))
    with capture_events(("event_log", plugin)) as capture:
        pm = capture.runtime.pm
        implemented = sorted(
            h for h in HOOK_OF_PHASE.values() if getattr(pm.hook, h).get_hookimpls()
        )
    assert implemented == ["hookgrad_forward", "hookgrad_optimizer_step_pre"]
    assert plugin.hookgrad_full_backward is None


def test_run_hooks_only_install_no_module_hook() -> None:
    """Logging optimizer steps only: the runtime spots the model during the first step (a
    forward pre-hook and forward hook), then every global module hook table is empty."""
    model = hookgrad.nn.Linear(2, 1)
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    with runtime(hooks=["optimizer_step_post"]):
        assert module_hook_counts() == [1, 1, 0, 0]
        model(hookgrad.ones(1, 2)).sum().backward()
        optimizer.step()
        assert module_hook_counts() == [0, 0, 0, 0]


def test_backward_only_installs_no_backward_pre_hook() -> None:
    """hooks = ["backward"]: the full backward hook (and the forward pair that names calls)."""
    with runtime(hooks=["backward"]):
        counts = module_hook_counts()
    assert counts == [1, 1, 0, 1]  # forward_pre, forward, backward_pre, backward


# ---------------------------------------------------------------------- records
def test_jsonl_holds_one_record_per_module_backward_with_numpy_norms(tmp_path: Path) -> None:
    """Two steps, default hooks: 4 modules x 2 steps, in backward order, numpy's norms."""
    s = setup()
    expected = []
    with runtime(tmp_path):
        for step in range(2):
            expected += [(step, *row) for row in reference(s).backward]
            s.step()
    records = read_jsonl(tmp_path / "events.jsonl")
    assert [r["plugin"] for r in records] == ["event_log"] * 8  # nothing else, nothing lost
    got = [
        (r["kind"], r["hook"], r["phase"], r["step"], r["module_name"], r["module_type"])
        for r in records
    ]
    assert got == [("event", "hookgrad_full_backward", "backward", *e[:3]) for e in expected]
    assert [r["call_index"] for r in records] == [0] * 8
    assert [norms(r["grad_input"]) for r in records] == [[pytest.approx(e[3])] for e in expected]
    assert [norms(r["grad_output"]) for r in records] == [[pytest.approx(e[4])] for e in expected]


def test_record_is_the_event_summary_behind_the_envelope() -> None:
    """Each record is plugin, kind, hook, then exactly event.summary()."""
    s = setup()
    events: list[FullBackwardEvent] = []

    class Keep:
        @hookgrad.hookspecs.hookimpl
        def hookgrad_full_backward(self, event: FullBackwardEvent) -> None:
            events.append(event)

    with runtime() as rt:
        rt.register(Keep(), name="keep")
        s.step()
    assert rt.memory is not None
    envelope = {"plugin": "event_log", "kind": "event", "hook": "hookgrad_full_backward"}
    assert rt.memory.records == [{**envelope, **e.summary()} for e in events]
    assert list(rt.memory.records[0])[:4] == [*ENVELOPE, "module_name"]


def test_forward_records_name_each_call_of_a_shared_module() -> None:
    """A module called twice in one forward gets call_index 0 and 1, with its own args/output."""
    lin = nn.Linear(3, 3)
    model = nn.Sequential(lin, nn.Tanh(), lin)
    x = hookgrad.randn(2, 3)
    w, b = lin.weight.detach().numpy().astype(np.float64), lin.bias.detach().numpy()
    first = x.numpy() @ w.T + b
    second = np.tanh(first) @ w.T + b
    with runtime(hooks=["forward_pre", "forward"], module_types=["Linear"]) as rt:
        model(x)
    assert rt.memory is not None
    got = [(r["phase"], r["module_name"], r["call_index"]) for r in rt.memory.records]
    assert got == [(phase, "0", i) for i in (0, 1) for phase in ("forward_pre", "forward")]
    pre0, post0, pre1, post1 = rt.memory.records
    assert norms(pre0["args"]) == [pytest.approx(np.linalg.norm(x.numpy()))]
    assert post0["output"]["norm"] == pytest.approx(np.linalg.norm(first))
    assert norms(pre1["args"]) == [pytest.approx(np.linalg.norm(np.tanh(first)))]
    assert post1["output"]["norm"] == pytest.approx(np.linalg.norm(second))


def test_training_loop_records_match_numpy() -> None:
    """backward begin/end and the step: loss, gradients before and parameters after the step."""
    s = setup()
    ref = reference(s)
    with runtime(hooks=ALL_PHASES[4:]) as rt:
        rt.watch(s.model)  # no module hook logged: parameters are named after a watched model
        s.step()
    assert rt.memory is not None
    begin, end, pre, post = rt.memory.records
    assert [r["hook"] for r in (begin, end, pre, post)] == list(HOOK_OF_PHASE.values())[4:]
    assert begin["loss"]["norm"] == pytest.approx(abs(ref.loss))
    assert begin["gradient"] is None and end["loss"] == begin["loss"]
    assert pre["optimizer_type"] == post["optimizer_type"] == "SGD"
    assert list(pre["parameters"]) == list(ref.grads)
    for name, grad in ref.grads.items():
        assert pre["parameters"][name]["grad"]["norm"] == pytest.approx(np.linalg.norm(grad))
        after = np.linalg.norm(ref.params[name] - LR * grad)
        assert post["parameters"][name]["param"]["norm"] == pytest.approx(after)
    assert (post["skipped"], post["vetoed_by"]) == (False, None)


def test_every_n_steps_samples_steps() -> None:
    """every_n_steps = 3 over 7 steps writes steps 0, 3 and 6 only."""
    s = setup()
    plugin = EventLog(EventLog.Config(hooks=("optimizer_step_post",), every_n_steps=3))
    with capture_events(("event_log", plugin)) as capture:
        for _ in range(7):
            s.step()
    assert [r["step"] for r in capture.of_plugin("event_log")] == [0, 3, 6]


def test_selectors_choose_modules_and_parameters() -> None:
    """module_types and exclude narrow module events and the step's parameters alike."""
    s = setup()
    hooks = ["backward", "optimizer_step_pre"]
    with runtime(hooks=hooks, module_types=["Linear"], exclude=["2"]) as rt:
        s.step()
    assert rt.memory is not None
    backward, pre = rt.memory.records
    assert (backward["module_name"], backward["module_type"]) == ("0", "Linear")
    assert list(pre["parameters"]) == ["0.weight", "0.bias"]


class _Doubler:
    """Doubles every module's output: an unmarked plugin that replaces values."""

    class Config(PluginConfig):
        pass

    @hookimpl
    def hookgrad_forward(self, event: ForwardEvent) -> Any:
        return event.output * 2


def test_records_show_later_registered_plugins_replacements() -> None:
    """event_log runs trylast: it logs the output another plugin, registered after it, made."""
    lin = nn.Linear(3, 2)
    x = hookgrad.randn(4, 3)
    raw = x.numpy() @ lin.weight.detach().numpy().T + lin.bias.detach().numpy()
    with runtime(hooks=["forward"]) as rt:
        rt.register(_Doubler(), name="doubler")
        lin(x)
    assert rt.memory is not None
    assert rt.memory.records[0]["output"]["norm"] == pytest.approx(2 * np.linalg.norm(raw))


def test_step_records_bracket_grad_clip() -> None:
    """At the step event_log sees the gradients grad_clip has not clipped yet; after it, clipped."""
    pytest.importorskip("hookgrad.plugins.grad_clip")
    s = setup()
    total = np.sqrt(sum(np.sum(g**2) for g in reference(s).grads.values()))
    assert total > 0.5  # so the clip below bites
    plugins: dict[str, dict[str, Any]] = {
        "event_log": {"hooks": ["optimizer_step_pre", "optimizer_step_post"]},
        "grad_clip": {"max_norm": 0.5},  # listed after event_log: the order does not matter
    }
    with hookgrad.Runtime({"plugins": plugins, "events": {"memory": True}}, environ={}) as rt:
        rt.watch(s.model)
        s.step()
    assert rt.memory is not None
    pre, post = (r for r in rt.memory.records if r["plugin"] == "event_log")

    def grad_norm(record: dict[str, Any]) -> float:
        return float(np.sqrt(sum(p["grad"]["norm"] ** 2 for p in record["parameters"].values())))

    assert grad_norm(pre) == pytest.approx(total, rel=1e-5)
    assert grad_norm(post) == pytest.approx(0.5, rel=1e-5)


def test_logging_never_changes_training() -> None:
    """With all eight hooks logged, three steps end at bit-identical parameters."""
    plain = setup()
    logged = setup(like=plain)
    with runtime(hooks=ALL_PHASES):
        for _ in range(3):
            logged.step()
    for _ in range(3):
        plain.step()
    for a, b in zip(plain.model.parameters(), logged.model.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_records_before_an_error_are_in_the_file(tmp_path: Path) -> None:
    """Training that raises inside the with-block loses none of the records written before."""
    s = setup()
    with (
        pytest.raises(RuntimeError, match="cannot be multiplied"),
        runtime(tmp_path, hooks=["forward_pre", "backward"]),
    ):
        s.step()
        s.model(hookgrad.randn(5, 7))  # wrong width: Linear "0" raises
    records = read_jsonl(tmp_path / "events.jsonl")
    logged = [(r["step"], r["phase"], r["module_name"]) for r in records if "plugin" in r]
    step0 = [(0, "forward_pre", n) for n in ("", "0", "1", "2")]
    step0 += [(0, "backward", n) for n in ("2", "1", "0", "")]
    assert logged == [*step0, (1, "forward_pre", ""), (1, "forward_pre", "0")]
    assert records[-1]["event"] == "exception"  # the runtime's own log entry comes last


def test_unconfigured_plugin_refuses_to_drop_events() -> None:
    """Called outside a runtime, a hook says so instead of silently writing nothing."""
    plugin = EventLog(EventLog.Config())
    g = hookgrad.ones(1, 2)
    event = FullBackwardEvent(
        module_name="",
        module_type="Linear",
        call_index=0,
        step=0,
        grad_input=(g,),
        grad_output=(g,),
    )
    with pytest.raises(RuntimeError, match="hookgrad_configure"):
        plugin.hookgrad_full_backward(event)


def test_backward_norms_match_torch_full_backward_hooks() -> None:
    """The logged grad norms are those torch's own full backward hooks see for the same net."""
    torch = pytest.importorskip("torch")
    s = setup()
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    net.load_state_dict({k: torch.tensor(v.numpy()) for k, v in s.model.state_dict().items()})
    seen: list[tuple[float, float]] = []
    for module in (*net, net):
        module.register_full_backward_hook(
            lambda m, gi, go: seen.append((float(gi[0].norm()), float(go[0].norm())))
        )
    x = torch.tensor(s.x.detach().numpy(), requires_grad=True)
    (net(x) * torch.tensor(s.target.numpy())).sum().backward()
    with runtime() as rt:
        s.step()
    assert rt.memory is not None
    logged = [(norms(r["grad_input"])[0], norms(r["grad_output"])[0]) for r in rt.memory.records]
    assert logged == [(pytest.approx(i, rel=1e-5), pytest.approx(o, rel=1e-5)) for i, o in seen]


def test_doc_example_prints_what_its_comments_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/plugins/event_log.md: the example runs as-is and prints what it promises."""
    (block,) = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    promised: list[str] = []
    for line in block.splitlines():  # a print's comment, maybe continued on the next lines
        if line.startswith("print("):
            promised.append(line.partition("  # ")[2])
        elif line.startswith("#"):
            promised[-1] = f"{promised[-1]} {line[1:].strip()}".lstrip()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # its mkdtemp() lands here
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, str(DOC), "exec"), {})
    assert out.getvalue().splitlines() == promised


def test_doc_toml_block_activates_the_plugin(tmp_path: Path) -> None:
    """docs/plugins/event_log.md: its config example activates event_log with those settings."""
    (block,) = re.findall(r"```toml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    (tmp_path / "hookgrad.toml").write_text(block, encoding="utf-8")
    with hookgrad.Runtime(environ={}, cwd=tmp_path) as rt:
        config = rt.plugin_configs["event_log"]
    assert isinstance(config, EventLog.Config)
    assert (config.hooks, config.every_n_steps) == (("backward", "optimizer_step_post"), 10)
