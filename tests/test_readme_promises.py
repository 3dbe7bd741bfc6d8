"""README.md and docs/getting-started.md, promise by promise: torch's API, what differs, the CLI.

Programs written against ``lib`` run on hookgrad and on torch 2.13 with the same expectations;
what hookgrad deliberately does differently ("What differs") is checked on hookgrad alone.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hookgrad

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
HOOKGRAD = Path(sys.executable).with_name("hookgrad")


# ---------------------------------------------------------------------- what is the same as torch
@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda lib: lib.tensor(1.5), "float32"),
        (lambda lib: lib.tensor([1, 2]), "int64"),
        (lambda lib: lib.tensor([1, 2.0]), "float32"),
        (lambda lib: lib.tensor([True]), "bool"),
        (lambda lib: lib.arange(3), "int64"),
        (lambda lib: lib.arange(0.0, 1.0, 0.5), "float32"),
        (lambda lib: lib.zeros(2), "float32"),
        (lambda lib: lib.randn(2), "float32"),
        (lambda lib: lib.full((2,), 3), "int64"),
        (lambda lib: lib.tensor(np.array([1.0])), "float64"),
        (lambda lib: lib.ones(2, dtype=lib.float64) + lib.ones(2), "float64"),
        (lambda lib: lib.ones(2, dtype=lib.int64) * 1.5, "float32"),
        (lambda lib: lib.ones(2, dtype=lib.int64) / 2, "float32"),
    ],
)
def test_dtype_defaults_are_torchs(lib: Any, make: Any, expected: str) -> None:
    """'torch's dtype defaults (Python floats become float32, ints int64)'."""
    assert str(make(lib).dtype).removeprefix("torch.") == expected


def test_dtype_is_a_numpy_dtype() -> None:
    """'x.dtype is a numpy dtype (hookgrad.float32 == numpy.float32)'."""
    assert hookgrad.float32 == np.float32 and hookgrad.int64 == np.int64
    assert isinstance(hookgrad.ones(1).dtype, np.dtype)


def test_item_tolist_numpy_behave_as_torch(lib: Any) -> None:
    """item(), tolist(), numpy(): Python scalars and lists; numpy() refuses a grad tensor."""
    assert lib.tensor([2.5]).item() == 2.5 and isinstance(lib.tensor(3).item(), int)
    assert lib.tensor([[1, 2]]).tolist() == [[1, 2]]
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        lib.tensor([1.0, 2.0]).item()
    with pytest.raises(RuntimeError, match=r"Use tensor.detach\(\).numpy\(\) instead"):
        lib.tensor([1.0], requires_grad=True).numpy()


def test_integer_tensors_cannot_require_grad(lib: Any) -> None:
    """Only floating point tensors can require gradients (torch's RuntimeError)."""
    with pytest.raises(RuntimeError, match=r"(?i)only Tensors of floating point"):
        lib.tensor([1, 2], requires_grad=True)


def test_backward_of_a_non_scalar_needs_a_gradient(lib: Any) -> None:
    """backward: 'grad can be implicitly created only for scalar outputs'."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="only for scalar outputs"):
        (x * 2).backward()
    (x * 2).backward(lib.tensor([1.0, 10.0]))
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 20.0])


def test_retain_graph_and_grad_accumulation(lib: Any) -> None:
    """retain_graph allows a second backward; .grad accumulates; without it, an error."""
    x = lib.tensor([3.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [12.0])
    z = (x * x).sum()
    z.backward()
    with pytest.raises(RuntimeError, match="second time"):
        z.backward()


def test_version_counter_catches_a_modified_saved_tensor(lib: Any) -> None:
    """In-place ops have version counters: changing a tensor saved for backward is an error."""
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = a * 1
    c = b * b  # saves b
    b.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        c.sum().backward()


def test_in_place_on_a_leaf_that_requires_grad_is_an_error(lib: Any) -> None:
    """A leaf that requires grad takes no in-place op outside no_grad()."""
    a = lib.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        a.mul_(2)
    with lib.no_grad():
        a.mul_(2)
    np.testing.assert_array_equal(a.detach().numpy(), [2.0])


def test_grad_mode_switches(lib: Any) -> None:
    """no_grad, enable_grad, set_grad_enabled nest as in torch."""
    x = lib.ones(1, requires_grad=True)
    with lib.no_grad():
        assert not (x * 2).requires_grad
        with lib.enable_grad():
            assert (x * 2).requires_grad
    lib.set_grad_enabled(False)
    try:
        assert not (x * 2).requires_grad
    finally:
        lib.set_grad_enabled(True)
    assert (x * 2).requires_grad


def test_next_functions_have_torchs_node_names(lib: Any) -> None:
    """'grad_fn.next_functions with torch's node names'."""
    w = lib.tensor([1.0], requires_grad=True)
    y = (w * 2 + 1).sum()
    names = []
    node = y.grad_fn
    while node is not None:
        names.append(type(node).__name__)
        nxt = [f for f, _ in node.next_functions if f is not None]
        node = nxt[0] if nxt else None
    assert names == ["SumBackward0", "AddBackward0", "MulBackward0", "AccumulateGrad"]


def test_the_getting_started_loop_trains(lib: Any) -> None:
    """The getting-started loop, unchanged after 'import hookgrad as torch', lowers the loss."""
    lib.manual_seed(0)
    nn = lib.nn
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = lib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.MSELoss()
    x, y = lib.randn(64, 8), lib.randn(64, 1)
    losses = []
    for _ in range(100):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_watching_gradients_with_a_global_hook(lib: Any) -> None:
    """The 'Watching gradients' snippet: the global hook works as a context manager."""
    nn = lib.nn
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    seen: list[str] = []

    def log_norm(module: Any, grad_input: Any, grad_output: Any) -> None:
        seen.append(type(module).__name__)

    x = lib.randn(4, 2, requires_grad=True)
    with nn.modules.module.register_module_full_backward_hook(log_norm):
        nn.MSELoss()(model(x), lib.zeros(4, 1)).backward()
    model(x).sum().backward()  # removed on exit
    assert seen == ["MSELoss", "Linear", "ReLU", "Linear", "Sequential"]


# ---------------------------------------------------------------------- what differs


@pytest.mark.parametrize(
    "call",
    [
        lambda: hookgrad.ones(2).to("cuda"),
        lambda: hookgrad.ones(2).to(device="cuda:0"),
        lambda: hookgrad.nn.Linear(2, 2).to("cuda"),
        lambda: hookgrad.device("mps"),
    ],
    ids=["tensor_to", "tensor_to_kw", "module_to", "device"],
)
def test_a_device_other_than_cpu_raises(call: Any) -> None:
    """'No GPU and no device other than "cpu"; .to("cuda") raises.'"""
    with pytest.raises(RuntimeError, match="CPU only"):
        call()


@pytest.mark.parametrize(
    "name",
    [
        "tensor",
        "as_tensor",
        "zeros",
        "ones",
        "empty",
        "full",
        "zeros_like",
        "ones_like",
        "empty_like",
        "full_like",
        "rand_like",
        "randn_like",
        "arange",
        "linspace",
        "eye",
        "rand",
        "randn",
        "randint",
        "randperm",
    ],
)
def test_creation_functions_refuse_a_device_other_than_cpu(name: str) -> None:
    """'no device other than "cpu"': device="cuda" raises, "cpu" and device("cpu") work."""
    t = hookgrad.ones(2)
    args = {
        "tensor": ([1.0],),
        "as_tensor": ([1.0],),
        "full": ((2,), 1.0),
        "full_like": (t, 1.0),
        "arange": (3,),
        "linspace": (0.0, 1.0, 3),
        "eye": (2,),
        "randint": (5, (2,)),
        "randperm": (3,),
    }.get(name, (t,) if name.endswith("_like") else (2,))
    function = getattr(hookgrad, name)
    hookgrad.manual_seed(5)
    with pytest.raises(RuntimeError, match="CPU only"):
        function(*args, device="cuda")
    after_refusal = hookgrad.randn(3).numpy()
    hookgrad.manual_seed(5)
    np.testing.assert_array_equal(after_refusal, hookgrad.randn(3).numpy())  # no draw taken
    for device in ("cpu", "cpu:0", hookgrad.device("cpu"), None):
        assert function(*args, device=device).shape == function(*args).shape


@pytest.mark.parametrize(
    "build",
    [
        lambda nn: nn.Linear(2, 2, device="cuda"),
        lambda nn: nn.Conv2d(1, 1, 3, device="cuda"),
        lambda nn: nn.LayerNorm(4, device="cuda"),
        lambda nn: nn.Embedding(4, 2, device="cuda"),
    ],
    ids=["Linear", "Conv2d", "LayerNorm", "Embedding"],
)
def test_layers_refuse_a_device_other_than_cpu(build: Any) -> None:
    """Layers take torch's device argument; any device but the CPU raises."""
    with pytest.raises(RuntimeError, match="CPU only"):
        build(hookgrad.nn)


# ---------------------------------------------------------------------- command line
def _hookgrad(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HOOKGRAD_")}
    environ.update(env or {})
    return subprocess.run(
        [str(HOOKGRAD), *args], cwd=cwd, env=environ, capture_output=True, text=True, timeout=120
    )


def test_readme_config_check_example_is_what_the_command_prints(tmp_path: Path) -> None:
    """The README's `hookgrad config check run.toml` example: status 2 and exactly that line."""
    block = re.search(r"```text\n\$ hookgrad config check run.toml\n(.+?)\n```", README, re.S)
    assert block is not None
    (tmp_path / "run.toml").write_text('[events]\njsnol = "events.jsonl"\n')
    result = _hookgrad("config", "check", "run.toml", cwd=tmp_path)
    assert result.returncode == 2
    assert (result.stdout + result.stderr).strip() == block.group(1).strip()


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("this is = not toml [\n", ["bad.toml", "TOML"]),
        ("[plugins.grad_clip]\nmax_norm = -1\n", ["bad.toml", "max_norm", "[plugins.grad_clip]"]),
        ('[plugins.nan_guard]\nactoin = "warn"\n', ["actoin", "did you mean 'action'"]),
        ("[plugins.nosuch]\n", ["nosuch", "grad_clip"]),
        ("[plugins]\ngrad_clip = 3\n", ["[plugins.grad_clip]"]),
        ("[plugins.grad_stats]\nevery_n_steps = 0\n", ["every_n_steps", "[plugins.grad_stats]"]),
    ],
    ids=["not_toml", "range", "typo", "unknown_plugin", "not_a_table", "plugin_field"],
)
def test_config_check_exits_2_with_one_line_naming_the_culprit(
    tmp_path: Path, text: str, names: list[str]
) -> None:
    """'A config hookgrad cannot use exits with status 2 and one line naming the file, table
    and key'; config check validates each enabled plugin's table."""
    (tmp_path / "bad.toml").write_text(text)
    result = _hookgrad("config", "check", "bad.toml", cwd=tmp_path)
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 2 and len(output.splitlines()) == 1, output
    for name in names:
        assert name in output


def test_config_check_ok_and_lookup_order(tmp_path: Path) -> None:
    """'exit 0 with "OK: FILE ..."'; without FILE, hookgrad.toml beats pyproject.toml."""
    (tmp_path / "hookgrad.toml").write_text("[plugins.grad_clip]\nmax_norm = 2.0\n")
    (tmp_path / "pyproject.toml").write_text("[tool.hookgrad]\nbogus = 1\n")
    result = _hookgrad("config", "check", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.startswith("OK: ")
    assert "hookgrad.toml" in result.stdout
    (tmp_path / "hookgrad.toml").unlink()
    result = _hookgrad("config", "check", cwd=tmp_path)
    assert result.returncode == 2 and "bogus" in result.stdout + result.stderr


def test_version_and_python_dash_m_agree(tmp_path: Path) -> None:
    """'hookgrad (also python -m hookgrad)': both print the installed version."""
    from importlib import metadata

    script = _hookgrad("--version", cwd=tmp_path)
    module = subprocess.run(
        [sys.executable, "-m", "hookgrad", "--version"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    version = metadata.version("hookgrad")
    assert script.returncode == module.returncode == 0
    assert version in script.stdout and script.stdout == module.stdout


# ---------------------------------------------------------------------- custom autograd.Function
def _custom(lib: Any, gradient: Any) -> Any:
    """A Function doubling its input whose backward returns ``gradient(lib, g)``."""

    class Double(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, factor: float) -> Any:
            return x * factor

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return gradient(lib, g), None

    return Double


def test_a_custom_backward_of_a_broadcast_shape_is_summed_down(lib: Any) -> None:
    """As torch: a gradient whose shape the input expands to is summed to the input's shape."""
    x = lib.ones(2, requires_grad=True)
    _custom(lib, lambda lib, g: lib.ones(3, 2)).apply(x, 2.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_a_custom_backward_of_an_incompatible_shape_raises(lib: Any) -> None:
    """torch's RuntimeError: 'returned an invalid gradient at index 0 - got [5] but ...'."""
    x = lib.ones(2, requires_grad=True)
    op = _custom(lib, lambda lib, g: lib.ones(5))
    with pytest.raises(RuntimeError, match=r"Backward returned an invalid gradient at index 0 - "):
        op.apply(x, 2.0).sum().backward()
    assert x.grad is None


def test_a_custom_backward_returning_a_number_is_a_runtime_error(lib: Any) -> None:
    """torch: 'expected Variable or None (got int)', a RuntimeError."""
    x = lib.ones(2, requires_grad=True)
    op = _custom(lib, lambda lib, g: 3)
    with pytest.raises(RuntimeError, match=r"expected Variable or None \(got int\)"):
        op.apply(x, 2.0).sum().backward()


def test_a_custom_backward_of_another_dtype_is_cast_to_the_inputs(lib: Any) -> None:
    """torch casts a Function's gradient to its input's dtype."""
    x = lib.ones(2, requires_grad=True)
    _custom(lib, lambda lib, g: g.double() * 3).apply(x, 2.0).sum().backward()
    assert str(x.grad.dtype).removeprefix("torch.") == "float32"
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def _rows(output: str) -> dict[str, list[str]]:
    """The table rows of `hookgrad plugins` / `config show`, by their first cell."""
    return {line.split()[0]: line.split() for line in output.splitlines()[2:] if line.strip()}


def test_plugins_lists_the_six_built_ins_with_their_status(tmp_path: Path) -> None:
    """'hookgrad plugins': installed plugins, built-in?, enabled? (file and environment)."""
    (tmp_path / "hookgrad.toml").write_text(
        "[plugins.grad_clip]\nmax_norm = 2.0\n\n[plugins.nan_guard]\nenabled = false\n"
    )
    result = _hookgrad("plugins", cwd=tmp_path, env={"HOOKGRAD_PLUGINS": "grad_stats"})
    assert result.returncode == 0, result.stderr
    rows = _rows(result.stdout)
    builtins = {"event_log", "grad_clip", "grad_scale", "grad_stats", "nan_guard", "spike_guard"}
    assert builtins <= set(rows)
    assert all(rows[name][3] == "built-in" for name in builtins)
    status = {name: rows[name][4] for name in builtins}
    assert status == {
        "event_log": "off",
        "grad_clip": "enabled",
        "grad_scale": "off",
        "grad_stats": "enabled",
        "nan_guard": "disabled",
        "spike_guard": "off",
    }
    assert "hookgrad_optimizer_step_pre" in " ".join(rows["grad_clip"])


def test_config_show_names_the_layer_of_each_setting(tmp_path: Path) -> None:
    """'config show': every effective setting and the layer (default, file, env) that set it."""
    (tmp_path / "hookgrad.toml").write_text("[plugins.grad_clip]\nmax_norm = 2.0\n")
    env = {"HOOKGRAD_PLUGINS": "grad_stats", "HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD": "1"}
    result = _hookgrad("config", "show", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    lines = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}
    assert lines["plugins.grad_clip.max_norm"].split()[1:] == ["2.0", "file", "hookgrad.toml"]
    assert lines["plugins.grad_stats.enabled"].split()[1:] == ["True", "env", "HOOKGRAD_PLUGINS"]
    assert lines["autoload"].split()[1:] == ["False", "env", "HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD"]
    assert lines["log_level"].split()[-1] == "default"


@pytest.mark.parametrize("command", ["demo", "report", "plugins", "config"])
def test_every_command_has_help(tmp_path: Path, command: str) -> None:
    """'hookgrad COMMAND --help lists each command's options'."""
    result = _hookgrad(command, "--help", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.startswith(f"Usage: hookgrad {command}")


# ---------------------------------------------------------------------- autograd.gradcheck
def _f64(lib: Any, values: list[float], grad: bool = True) -> Any:
    return lib.tensor(values, dtype=lib.float64, requires_grad=grad)


def test_gradcheck_needs_an_input_that_requires_grad(lib: Any) -> None:
    """torch's ValueError when no input requires grad (nothing would be checked)."""
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        lib.autograd.gradcheck(lambda a: a * 2, (_f64(lib, [1.0], grad=False),))


def test_gradcheck_of_a_non_differentiable_output_expects_a_zero_numerical_gradient(
    lib: Any,
) -> None:
    """No output requires grad: the numerical gradient must be zero, else GradcheckError."""
    x = _f64(lib, [1.0, 2.0])
    with pytest.raises(RuntimeError, match="Numerical gradient for function expected to be zero"):
        lib.autograd.gradcheck(lambda a: a.detach() * 2, (x,))
    assert lib.autograd.gradcheck(lambda a: (a > 5).double(), (x,))
    assert not lib.autograd.gradcheck(lambda a: a.detach() * 2, (x,), raise_exception=False)


def test_gradcheck_checks_only_the_differentiable_outputs(lib: Any) -> None:
    """A detached output beside a differentiable one is left out, as torch does."""
    x = _f64(lib, [1.0, 2.0])
    assert lib.autograd.gradcheck(lambda a: (a * 2, a.detach()), (x,))
    assert lib.autograd.gradcheck(lambda a: (a.detach() + 1, a * 3), (x,))


# ---------------------------------------------------------------------- autograd.grad / backward
def test_grad_names_the_unused_input_as_torch() -> None:
    """autograd.grad without allow_unused: torch 2.13's text naming the input's index."""
    texts = []
    for lib in (torch_or_skip(), hookgrad):
        a, b = lib.ones(2, requires_grad=True), lib.ones(2, requires_grad=True)
        with pytest.raises(RuntimeError) as info:
            lib.autograd.grad((a * 2).sum(), (a, b))
        texts.append(str(info.value))
    assert texts[1] == texts[0]
    assert "index 1" in texts[1]


@pytest.mark.parametrize("where", ["grad", "backward"])
def test_empty_inputs_are_refused(lib: Any, where: str) -> None:
    """An empty `inputs` list is torch's RuntimeError, not a silent no-op."""
    a = lib.ones(2, requires_grad=True)
    y = (a * 2).sum()
    with pytest.raises(RuntimeError, match=rf"`inputs` argument to `{where}\(\)` cannot be empty"):
        if where == "grad":
            lib.autograd.grad(y, [])
        else:
            y.backward(inputs=[])
    assert a.grad is None


@pytest.mark.parametrize("where", ["grad", "backward"])
def test_a_seed_of_the_wrong_shape_is_torchs_mismatch_error(lib: Any, where: str) -> None:
    """'Mismatch in shape: grad_output[0] has a shape of ...Size([3]) and output[0] ...'."""
    a = lib.ones(2, requires_grad=True)
    pattern = r"grad_output\[0\] has a shape of (torch|hookgrad)\.Size\(\[3\]\) and output\[0\]"
    with pytest.raises(RuntimeError, match=pattern):
        if where == "grad":
            lib.autograd.grad(a * 2, a, lib.ones(3))
        else:
            (a * 2).backward(lib.ones(3))


@pytest.mark.parametrize("where", ["grad", "backward"])
def test_a_later_seed_of_the_wrong_shape_names_its_own_index(where: str) -> None:
    """The mismatch names the seed at fault (torch's own index lookup compares tensors
    elementwise and fails with a broadcast error instead, so torch is no oracle here)."""
    a = hookgrad.ones(2, requires_grad=True)
    outputs, seeds = (a * 2, a * 3), (hookgrad.ones(2), hookgrad.ones(3))
    with pytest.raises(RuntimeError, match=r"grad_output\[1\] has a shape of hookgrad\.Size"):
        if where == "grad":
            hookgrad.autograd.grad(outputs, a, seeds)
        else:
            hookgrad.autograd.backward(outputs, seeds)


def torch_or_skip() -> Any:
    """torch 2.13, for a test that compares texts directly."""
    return pytest.importorskip("torch")


# ---------------------------------------------------------------------- creation on bad input
@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda lib: lib.tensor([1], dtype=float), "float64"),
        (lambda lib: lib.zeros(2, dtype=float), "float64"),
        (lambda lib: lib.ones(1).to(float), "float64"),
        (lambda lib: lib.nn.Linear(1, 1).to(float).weight, "float64"),
        (lambda lib: lib.tensor([1.5], dtype=int), "int64"),
        (lambda lib: lib.tensor([1], dtype=bool), "bool"),
    ],
)
def test_python_types_as_dtypes_mean_what_they_mean_in_torch(lib: Any, make: Any, expected: str):
    """`dtype=float` is float64 in torch (a Python float is a double); int int64; bool bool."""
    assert str(make(lib).dtype).removeprefix("torch.") == expected


@pytest.mark.parametrize(
    ("data", "error", "text"),
    [
        (None, RuntimeError, "Could not infer dtype of NoneType"),
        ([1.0, None], RuntimeError, "Could not infer dtype of NoneType"),
        ({1: 2}, RuntimeError, "Could not infer dtype of dict"),
        ([2**63], ValueError, "Overflow when unpacking long long"),
        ([-(2**64)], ValueError, "Overflow when unpacking long long"),
        ("text", TypeError, "new(): invalid data type 'str'"),
        ([1.0, "x"], TypeError, "new(): invalid data type 'str'"),
    ],
    ids=["none", "none_inside", "dict", "int_past_int64", "int_below_int64", "str", "str_inside"],
)
def test_data_torch_cannot_hold_is_refused(lib: Any, data: Any, error: type, text: str) -> None:
    """`tensor()` refuses what torch refuses (no object, string or wrapped-around int64 tensor)."""
    with pytest.raises(error, match=re.escape(text)):
        lib.tensor(data)


@pytest.mark.parametrize(
    ("call", "error", "text"),
    [
        (lambda lib: lib.empty(-1), RuntimeError, "negative dimension -1: [-1]"),
        (lambda lib: lib.ones(2, -3), RuntimeError, "negative dimension -3: [2, -3]"),
        (lambda lib: lib.zeros(2.0), TypeError, "(position 1) must be tuple of ints, not float"),
        (lambda lib: lib.arange(0, 5, 0), RuntimeError, "step must be nonzero"),
        (lambda lib: int(lib.tensor([1, 2])), ValueError, "only one element tensors can be"),
        (lambda lib: float(lib.tensor([1.0, 2.0])), ValueError, "only one element tensors can be"),
    ],
    ids=[
        "negative_size",
        "negative_size_later",
        "float_size",
        "zero_step",
        "int_of_2",
        "float_of_2",
    ],
)
def test_bad_sizes_and_conversions_fail_as_in_torch(lib: Any, call: Any, error: type, text: str):
    """Negative or float sizes, a zero arange step and int()/float() of several entries."""
    with pytest.raises(error, match=re.escape(text)):
        call(lib)


def _record_line(step: int) -> str:
    data = {"stage": "pre_clip", "norm": 1.5, "max_abs": 1.0, "nonfinite": 0}
    record = {"plugin": "grad_stats", "kind": "module_grad", "step": step, "data": data}
    return json.dumps({**record, "module_name": "0"})


def test_report_stops_on_a_record_it_reads_that_is_malformed(tmp_path: Path) -> None:
    """README: a record the report reads with a key missing or of the wrong type is one error
    naming the line (exit 1, no traceback)."""
    lines = [_record_line(0), '{"plugin": "grad_stats", "kind": "module_grad", "step": 1}']
    (tmp_path / "events.jsonl").write_text("\n".join(lines) + "\n")
    result = _hookgrad("report", "events.jsonl", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "Error: events.jsonl:2: grad_stats module_grad record" in result.stderr


def test_report_stops_on_a_line_that_is_not_text_unless_it_is_the_last(tmp_path: Path) -> None:
    """README: a line that is not UTF-8 stops the report naming it; as the last line (cut by a
    kill) it is skipped with a warning naming it."""
    bad = b"\xff\xfe not text"
    (tmp_path / "middle.jsonl").write_bytes(
        _record_line(0).encode() + b"\n" + bad + b"\n" + _record_line(1).encode() + b"\n"
    )
    result = _hookgrad("report", "middle.jsonl", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "Error: middle.jsonl:2: not UTF-8" in result.stderr
    (tmp_path / "last.jsonl").write_bytes(_record_line(0).encode() + b"\n" + bad)
    result = _hookgrad("report", "last.jsonl", cwd=tmp_path)
    assert result.returncode == 0 and "last.jsonl:2" in result.stderr


def test_distributions_are_the_three_listed_and_there_is_no_default_dtype_setter() -> None:
    """'torch.distributions has Categorical, Bernoulli and Normal'; 'There is no
    torch.set_default_dtype': the getting-started page lists what is there and what is not."""
    assert {"Bernoulli", "Categorical", "Normal"} <= set(hookgrad.distributions.__all__)
    assert not hasattr(hookgrad.distributions, "kl_divergence")
    assert not hasattr(hookgrad, "set_default_dtype")
    assert hookgrad.tensor([1.0]).dtype == hookgrad.float32
    assert hookgrad.accelerator.current_accelerator() is None
