"""The hookgrad command: --version, plugins, config check/show, demo (click's CliRunner)."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pluggy
import pytest
from click.testing import CliRunner, Result

from hookgrad.cli import CliState, main
from hookgrad.runtime import PluginCatalog, Runtime

PLUGINS = """
from hookgrad.hookspecs import PluginConfig, hookimpl

class Scaler:
    class Config(PluginConfig):
        factor: float = 2.0

    def __init__(self, config):
        self.config = config

    @hookimpl
    def hookgrad_full_backward(self, event):
        return None

    @hookimpl(specname="hookgrad_backward_end")
    def finish(self, event):
        return None

    def hookgrad_forward(self, event):  # no @hookimpl: pluggy would not register it
        return None

@hookimpl
def hookgrad_optimizer_step_pre(event):
    return None

class Misspelled:
    Config = PluginConfig

    def __init__(self, config):
        self.config = config

    @hookimpl
    def hookgrad_forwrd(self, event):
        return None

class Optional:
    Config = PluginConfig

    def __init__(self, config):
        self.config = config

    @hookimpl(optionalhook=True)
    def hookgrad_future_hook(self, event):
        return None
"""


pytestmark = pytest.mark.usefixtures("in_empty_folder")


@pytest.fixture
def plugin_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry_point: Any
) -> Iterator[list[Any]]:
    """Entry points of three plugins: a third-party class, a built-in module, a broken one."""
    modules = tmp_path / "plugin_src"
    modules.mkdir()
    name = f"cli_plugins_{tmp_path.name.replace('-', '_')}"
    (modules / f"{name}.py").write_text(textwrap.dedent(PLUGINS))
    (modules / "cli_broken.py").write_text("raise ImportError('missing dependency: scipy')\n")
    monkeypatch.syspath_prepend(str(modules))
    entries = [
        entry_point("scaler", f"{name}:Scaler", "gradtools", "1.4"),
        entry_point("steps", name, "hookgrad", "0.1.0"),
        entry_point("broken", "cli_broken:Plugin", "brokentools", "0.2"),
    ]
    yield entries
    sys.modules.pop(name, None)
    sys.modules.pop("cli_broken", None)


@pytest.fixture
def catalog(plugin_entries: list[Any]) -> PluginCatalog:
    """The catalog of ``plugin_entries``."""
    return PluginCatalog(lambda: plugin_entries)


def _run(args: list[str], catalog: PluginCatalog | None = None) -> Result:
    state = CliState() if catalog is None else CliState(catalog=catalog)
    return CliRunner().invoke(main, args, obj=state)


def _rows(output: str) -> dict[str, list[str]]:
    """The plugin table's rows by name, cells split on runs of two or more spaces."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("NAME "))
    rows = [re.split(r"\s{2,}", line) for line in lines[start + 1 :] if line[:1].isalnum()]
    return {row[0]: row[1:] for row in rows}


# --------------------------------------------------------------------------------------------
# --version, python -m hookgrad, the console script
# --------------------------------------------------------------------------------------------


def test_version_names_the_installed_distribution() -> None:
    """hookgrad --version prints 'hookgrad <version>', the version pip installed."""
    result = _run(["--version"])
    assert result.exit_code == 0
    assert result.output == f"hookgrad {metadata.version('hookgrad')}\n"


def test_python_dash_m_and_console_script_run(tmp_path: Path) -> None:
    """python -m hookgrad and the installed hookgrad script (beside sys.executable) both run."""
    script = Path(sys.executable).parent / "hookgrad"
    for command in ([sys.executable, "-m", "hookgrad"], [str(script)]):
        done = subprocess.run(
            [*command, "--version"], capture_output=True, text=True, cwd=tmp_path, check=False
        )
        assert (done.returncode, done.stdout) == (0, f"hookgrad {metadata.version('hookgrad')}\n")


# --------------------------------------------------------------------------------------------
# hookgrad plugins
# --------------------------------------------------------------------------------------------


def test_plugins_lists_source_kind_status_and_hooks(catalog: PluginCatalog, tmp_path: Path) -> None:
    """Each plugin's row: distribution and version, built-in or not, status, pluggy's hooks."""
    (tmp_path / "hookgrad.toml").write_text("[plugins.scaler]\nfactor = 0.5\n")
    result = _run(["plugins"], catalog)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == "hookgrad 0.1.0; config: hookgrad.toml"
    assert _rows(result.output) == {
        "broken": [
            "brokentools 0.2",
            "third-party",
            "off (no [plugins.broken] table)",
            "import failed: ImportError('missing dependency: scipy')",
        ],
        "scaler": [
            "gradtools 1.4",
            "third-party",
            "enabled",
            "hookgrad_backward_end, hookgrad_full_backward",
        ],
        "steps": [
            "hookgrad 0.1.0",
            "built-in",
            "off (no [plugins.steps] table)",
            "hookgrad_optimizer_step_pre",
        ],
    }


def test_plugins_status_follows_disable_enabled_and_autoload(
    catalog: PluginCatalog, tmp_path: Path
) -> None:
    """disable and enabled = false switch plugins off; autoload = false blocks third-party only."""
    config = tmp_path / "custom.toml"
    config.write_text(
        textwrap.dedent(
            """
            autoload = false
            disable = ["broken"]
            [plugins.scaler]
            [plugins.steps]
            enabled = false
            """
        )
    )
    result = _run(["plugins", "--config", str(config)], catalog)
    assert result.exit_code == 0, result.output
    status = {name: cells[2] for name, cells in _rows(result.output).items()}
    assert status == {
        "broken": "disabled (listed in disable)",
        "scaler": "blocked (autoload off)",
        "steps": "disabled (enabled = false)",
    }


def test_plugins_env_var_enables_a_plugin(
    catalog: PluginCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HOOKGRAD_PLUGINS=steps enables the built-in steps with no config file."""
    monkeypatch.setenv("HOOKGRAD_PLUGINS", "steps")
    result = _run(["plugins"], catalog)
    assert _rows(result.output)["steps"][2] == "enabled"
    assert "config: no config file (defaults)" in result.output


def test_plugins_names_tables_without_an_installed_plugin(
    catalog: PluginCatalog, tmp_path: Path
) -> None:
    """A [plugins.NAME] table with no entry point gets a line: class_path, or not installed."""
    (tmp_path / "hookgrad.toml").write_text(
        '[plugins.mine]\nclass_path = "pkg.mod:Mine"\n[plugins.scalr]\n'
    )
    lines = _run(["plugins"], catalog).output.splitlines()
    assert lines[-2:] == [
        "hookgrad.toml: [plugins.mine] has no entry point; loaded from class_path pkg.mod:Mine",
        "hookgrad.toml: [plugins.scalr] names no installed plugin "
        "(available: broken, scaler, steps)",
    ]


def test_plugins_with_none_installed_says_how_to_install() -> None:
    """An empty entry-point group prints one line saying so and how a plugin declares itself."""
    result = _run(["plugins"], PluginCatalog(lambda: []))
    assert result.exit_code == 0
    assert result.output.splitlines()[1].startswith(
        "no plugins installed: the entry-point group 'hookgrad.plugins' is empty."
    )
    assert '[project.entry-points."hookgrad.plugins"]' in result.output


def test_plugins_with_a_broken_config_exits_2() -> None:
    """plugins --config with a bad value prints the ConfigError and exits 2."""
    Path("bad.toml").write_text('autoload = "yes"\n')
    result = _run(["plugins", "--config", "bad.toml"], PluginCatalog(lambda: []))
    assert result.exit_code == 2
    assert "bad.toml: invalid value for 'autoload' at the top level" in result.stderr


# --------------------------------------------------------------------------------------------
# hookgrad config check
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"[events]\njsonl = '\xff'\n", "hookgrad.toml: not UTF-8 text"),
        (b"log_level = " + b"[" * 5000 + b"]" * 5000 + b"\n", "hookgrad.toml: nested too deeply"),
    ],
    ids=["not_utf8", "deep"],
)
def test_config_check_unreadable_toml_is_one_error_line(content: bytes, message: str) -> None:
    """A non-UTF-8 or absurdly nested file: exit 2 and one Error line, no traceback."""
    Path("hookgrad.toml").write_bytes(content)
    result = _run(["config", "check"], PluginCatalog(lambda: []))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {message}")
    assert len(result.stderr.splitlines()) == 1


def test_config_check_ok_names_the_file(catalog: PluginCatalog, tmp_path: Path) -> None:
    """A valid file (its plugin tables included) gives exit 0 and one OK line naming it."""
    (tmp_path / "hookgrad.toml").write_text("[plugins.scaler]\nfactor = 0.5\n")
    result = _run(["config", "check", "--import"], catalog)
    assert (result.exit_code, result.output) == (
        0,
        "OK: hookgrad.toml is a valid hookgrad config\n",
    )


def test_config_check_without_a_file_says_defaults_apply(catalog: PluginCatalog) -> None:
    """No config in the directory: exit 0, and the line says the defaults apply."""
    result = _run(["config", "check"], catalog)
    assert result.exit_code == 0
    assert result.output == f"OK: no config file found in {Path.cwd()}; defaults apply\n"


def test_config_check_typo_key_exits_2_with_did_you_mean(catalog: PluginCatalog) -> None:
    """A typo in a key: exit 2, stderr names the file, the table, the key and the right key."""
    Path("run.toml").write_text('[events]\njsnol = "events.jsonl"\n')
    result = _run(["config", "check", "run.toml"], catalog)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        "Error: run.toml: unknown key 'jsnol' in [events]; did you mean 'jsonl'? "
        "valid keys: jsonl, durability, memory, tensorboard, histogram_every\n"
    )


def test_config_check_validates_plugin_tables(catalog: PluginCatalog) -> None:
    """A typo in an enabled plugin's table is checked against that plugin's Config model."""
    Path("hookgrad.toml").write_text("[plugins.scaler]\nfactr = 0.5\n")
    result = _run(["config", "check", "--import"], catalog)
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "Error: hookgrad.toml: unknown key 'factr' in [plugins.scaler]; did you mean 'factor'?"
    )


def test_config_check_unknown_plugin_lists_the_available_ones(
    catalog: PluginCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An enabled plugin that is not installed: exit 2, naming the env var and the choices."""
    monkeypatch.setenv("HOOKGRAD_PLUGINS", "scalr")
    result = _run(["config", "check"], catalog)
    assert result.exit_code == 2
    assert result.stderr == (
        "Error: HOOKGRAD_PLUGINS: unknown plugin 'scalr' ([plugins.scalr]); did you mean "
        "'scaler'? available plugins: broken, scaler, steps (a plugin without entry point "
        "needs a class_path)\n"
    )


@pytest.mark.parametrize(
    "text",
    [
        "[plugins.scaler]\nfactor = 0.5\n",
        "[plugins.misspelled]\n",
        "[plugins.optional]\n",
        "[plugins.steps]\nfactr = 0.5\n",
        '[plugins.steps]\nenabled = "no"\n',
        'disable = ["scalr"]\n',
        '[plugins.lost]\nclass_path = "nowhere.at_all:Thing"\n',
        'strict = true\n[plugins.lost]\nclass_path = "nowhere.at_all:Thing"\n',
        "autoload = false\n[plugins.scaler]\n",
        "autoload = false\nstrict = true\n[plugins.scaler]\n",
        "[plugins.broken]\n",
        "strict = true\n[plugins.broken]\n",
        '[events]\njsonl = "."\n',
        '[events]\njsonl = "hookgrad.toml"\n',
        '[events]\njsonl = "runs/e.jsonl"\n',
    ],
    ids=lambda text: text.replace("\n", " ").strip(),
)
@pytest.mark.parametrize("execute", [False, True], ids=["no_import", "import"])
def test_config_check_accepts_what_runtime_accepts(
    plugin_entries: list[Any], entry_point: Any, tmp_path: Path, text: str, execute: bool
) -> None:
    """config check --import fails exactly when building a Runtime fails; without --import
    too, except where only running the plugin's code shows the failure: a note says so."""
    module = plugin_entries[0].value.partition(":")[0]
    entries = [
        *plugin_entries,
        entry_point("misspelled", f"{module}:Misspelled", "hookgrad", "0"),
        entry_point("optional", f"{module}:Optional", "hookgrad", "0"),
    ]
    (tmp_path / "hookgrad.toml").write_text(text)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Runtime(environ={}, catalog=PluginCatalog(lambda: entries)).close()
    except (ValueError, RuntimeError, pluggy.PluginValidationError):
        runtime_accepts = False
    else:
        runtime_accepts = True
    args = ["config", "check", *(["--import"] if execute else [])]
    result = _run(args, PluginCatalog(lambda: entries))
    if "optional" in text:  # an optionalhook may name a hook this hookgrad lacks
        assert runtime_accepts
    unchecked = not execute and "not checked without --import" in result.output
    assert (result.exit_code == 0) == runtime_accepts or (unchecked and result.exit_code == 0)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception


def test_config_check_import_failure_warns_unless_strict(catalog: PluginCatalog) -> None:
    """An enabled plugin that fails to import is a warning (exit 0), an error with strict."""
    Path("hookgrad.toml").write_text("[plugins.broken]\n")
    result = _run(["config", "check", "--import"], catalog)
    assert result.exit_code == 0
    assert result.stderr.startswith("warning: plugin 'broken' (entry point broken = cli_broken")
    Path("hookgrad.toml").write_text("strict = true\n[plugins.broken]\n")
    result = _run(["config", "check", "--import"], catalog)
    assert result.exit_code == 2
    assert "ImportError('missing dependency: scipy') (strict = true)" in result.stderr


# --------------------------------------------------------------------------------------------
# hookgrad config show
# --------------------------------------------------------------------------------------------


def test_config_show_gives_each_value_its_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    """config show: one line per value with its layer; file < env order on the first line."""
    Path("hookgrad.toml").write_text("log_level = 'info'\n[plugins.scaler]\nfactor = 0.5\n")
    monkeypatch.setenv("HOOKGRAD_PLUGINS", "steps")
    result = _run(["config", "show"])
    assert result.exit_code == 0, result.output
    lines = [line.split() for line in result.output.splitlines()]
    assert result.output.splitlines()[0] == (
        "layers, lowest first: default < file hookgrad.toml < env HOOKGRAD_PLUGINS"
    )
    assert lines[1] == ["KEY", "VALUE", "FROM"]
    assert lines[2:] == [
        ["autoload", "True", "default"],
        ["strict", "False", "default"],
        ["disable", "[]", "default"],
        ["plugins.scaler.factor", "0.5", "file", "hookgrad.toml"],
        ["plugins.steps.enabled", "True", "env", "HOOKGRAD_PLUGINS"],
        ["events.jsonl", "None", "default"],
        ["events.durability", "'step'", "default"],
        ["events.memory", "False", "default"],
        ["events.tensorboard", "None", "default"],
        ["events.histogram_every", "100", "default"],
        ["log_level", "'info'", "file", "hookgrad.toml"],
        ["engine", "'auto'", "default"],
    ]


def test_config_show_env_overrides_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin switched off in the file and on by HOOKGRAD_PLUGINS shows the env layer."""
    Path("run.toml").write_text("[plugins.steps]\nenabled = false\n")
    monkeypatch.setenv("HOOKGRAD_PLUGINS", "steps")
    result = _run(["config", "show", "run.toml"])
    assert ["plugins.steps.enabled", "True", "env", "HOOKGRAD_PLUGINS"] in [
        line.split() for line in result.output.splitlines()
    ]


def test_config_show_missing_file_exits_2() -> None:
    """A config file that does not exist: exit 2 and a message naming it, no traceback."""
    result = _run(["config", "show", "nope.toml"])
    assert result.exit_code == 2
    assert result.stderr == "Error: nope.toml: cannot read config file: No such file or directory\n"


# --------------------------------------------------------------------------------------------
# hookgrad demo
# --------------------------------------------------------------------------------------------


def test_demo_trains_and_writes_loss_csv(tmp_path: Path) -> None:
    """demo --steps 30 --out DIR logs every 10 steps and writes 30 rows with falling loss.

    No config is found, so it trains without plugins; the accuracy is measured on the logged
    steps only.
    """
    result = _run(["demo", "--steps", "30", "--log-every", "10", "--out", "run"])
    assert result.exit_code == 0, result.output
    assert [line.split()[1] for line in result.output.splitlines() if line.startswith("step")] == [
        "10/30",
        "20/30",
        "30/30",
    ]
    assert result.output.splitlines()[-1] == f"wrote {Path('run', 'loss.csv')}"
    with (tmp_path / "run" / "loss.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(row["step"]) for row in rows] == list(range(1, 31))
    losses = [float(row["loss"]) for row in rows]
    assert losses[-1] < 0.6 * losses[0], losses
    measured = {int(row["step"]): float(row["accuracy"]) for row in rows if row["accuracy"]}
    assert sorted(measured) == [10, 20, 30]
    assert all(0.0 <= accuracy <= 1.0 for accuracy in measured.values())


def test_demo_with_a_broken_config_fails_before_training() -> None:
    """demo --config with a typo exits 2 with the ConfigError and trains nothing."""
    Path("bad.toml").write_text("autolaod = false\n")
    result = _run(["demo", "--config", "bad.toml", "--steps", "5"])
    assert result.exit_code == 2
    assert "bad.toml: unknown key 'autolaod' at the top level; did you mean 'autoload'?" in (
        result.stderr
    )
    assert "two spirals" not in result.stdout


def test_demo_rejects_a_non_positive_step_count() -> None:
    """--steps 0 is a usage error naming the option (exit 2)."""
    result = _run(["demo", "--steps", "0"])
    assert result.exit_code == 2
    assert "Invalid value for '--steps': 0 is not in the range x>=1." in result.stderr


SKIPPER = """
from hookgrad.hookspecs import PluginConfig, hookimpl

class Skipper:
    class Config(PluginConfig):
        pass

    def __init__(self, config):
        self.runtime = None

    @hookimpl
    def hookgrad_configure(self, runtime):
        self.runtime = runtime

    @hookimpl
    def hookgrad_optimizer_step_post(self, event):
        record = {"kind": "skip_step", "step": event.step, "data": {"reason": 5}}
        self.runtime.emit({"plugin": "skipper", **record})
"""


def test_demo_with_a_record_it_cannot_draw_fails_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin's skip_step with a non-string reason: exit 1 naming record and key, no traceback."""
    (tmp_path / "cli_skipper.py").write_text(SKIPPER)
    monkeypatch.syspath_prepend(str(tmp_path))
    Path("hookgrad.toml").write_text('[plugins.skipper]\nclass_path = "cli_skipper:Skipper"\n')
    try:
        result = _run(["demo", "--steps", "2", "--out", "run"])
    finally:
        sys.modules.pop("cli_skipper", None)
    assert result.exit_code == 1, result.output + result.stderr
    assert result.stderr.splitlines()[-1] == (
        "Error: cannot summarise the run: skipper skip_step record: data.reason: "
        "Input should be a valid string, got 5"
    )
    assert isinstance(result.exception, SystemExit)


# --------------------------------------------------------------------------------------------
# Checking runs no code (real subprocesses: python -m hookgrad)
# --------------------------------------------------------------------------------------------

_MARKING_PLUGIN = """
from pathlib import Path

Path({marker!r}).write_text("imported")

from hookgrad.hookspecs import PluginConfig


class Plugin:
    class Config(PluginConfig):
        level: int = 1

    def __init__(self, config):
        self.config = config
"""


def _hookgrad(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m hookgrad ARGS`` in ``cwd`` with no HOOKGRAD_* variable but ``env``."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HOOKGRAD_")}
    return subprocess.run(
        [sys.executable, "-m", "hookgrad", *args],
        cwd=cwd,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_config_check_does_not_import_a_class_path_unless_asked(tmp_path: Path) -> None:
    """config check finds a class_path module without running it; --import runs it."""
    marker = tmp_path / "imported.txt"
    work = tmp_path / "repo"
    work.mkdir()
    (work / "their_plugin.py").write_text(_MARKING_PLUGIN.format(marker=str(marker)))
    (work / "hookgrad.toml").write_text(
        '[plugins.theirs]\nclass_path = "their_plugin:Plugin"\nlevel = 2\n'
    )
    done = _hookgrad(["config", "check"], work)
    assert (done.returncode, marker.exists()) == (0, False), done.stderr
    assert (
        "not checked without --import: [plugins.theirs] (class_path their_plugin:Plugin, "
        f"module found at {work / 'their_plugin.py'})"
    ) in done.stdout
    done = _hookgrad(["config", "check", "--import"], work)
    assert (done.returncode, marker.exists()) == (0, True), done.stderr
    assert "not checked" not in done.stdout


def test_autoload_off_imports_no_third_party_plugin(
    tmp_path: Path, install_distribution: Any
) -> None:
    """HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD=1: plugins and config check leave an installed one unrun."""
    marker = tmp_path / "imported.txt"
    site = install_distribution(
        "markertools", "1.0", {"marker": "marker_plugin:Plugin"},
        {"marker_plugin.py": _MARKING_PLUGIN.format(marker=str(marker))},
    )  # fmt: skip
    work = tmp_path / "repo"
    work.mkdir()
    (work / "hookgrad.toml").write_text("[plugins.marker]\nlevel = 2\n")
    off = {"PYTHONPATH": str(site), "HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD": "1"}
    for args in (["plugins"], ["config", "check"], ["config", "check", "--import"]):
        done = _hookgrad(args, work, **off)
        assert (done.returncode, marker.exists()) == (0, False), (args, done.stderr)
    assert "autoload is off" in done.stderr
    done = _hookgrad(["plugins"], work, PYTHONPATH=str(site))
    assert (done.returncode, marker.exists()) == (0, True), done.stderr


@pytest.mark.parametrize("blocker", ["events.jsonl", "loss.csv", "gradient_flow.svg"])
def test_demo_out_names_the_file_it_cannot_write(blocker: str) -> None:
    """A folder standing where demo --out writes a file: the error names that file."""
    (Path("run") / blocker).mkdir(parents=True)
    Path("hookgrad.toml").write_text("[plugins.grad_stats]\nsummary = false\n")
    result = _run(["demo", "--steps", "2", "--out", "run"])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: cannot write {Path('run', blocker)}: ")
    assert "Traceback" not in result.output


def test_plugins_survives_a_plugin_that_exits_at_import(
    tmp_path: Path, install_distribution: Any
) -> None:
    """An installed plugin calling sys.exit(4) at import is one failed row, not the end."""
    site = install_distribution(
        "exittools", "0.3", {"quitter": "quitter_plugin:Plugin"},
        {"quitter_plugin.py": "import sys\nsys.exit(4)\n"},
    )  # fmt: skip
    done = _hookgrad(["plugins"], tmp_path, PYTHONPATH=str(site))
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if line.startswith("quitter "))
    assert row.split()[1:4] == ["exittools", "0.3", "third-party"]
    assert row.endswith("import failed: SystemExit(4)")
    assert "grad_clip " in done.stdout  # the listing went on


def test_plugins_shows_a_name_two_distributions_register(
    tmp_path: Path, install_distribution: Any
) -> None:
    """Both distributions of an ambiguous name get a row saying so; neither is imported."""
    install_distribution("cliptools", "1.0", {"clip": "cliptools_plugin:Clip"}, {})
    install_distribution("otherclip", "2.1", {"clip": "otherclip_plugin:Clip"}, {})
    Path("hookgrad.toml").write_text("[plugins.clip]\n")
    result = _run(["plugins"], PluginCatalog())
    assert result.exit_code == 0, result.output
    rows = [re.split(r"\s{2,}", line) for line in result.output.splitlines()]
    assert [row for row in rows if row[0] == "clip"] == [
        ["clip", "cliptools 1.0", "third-party", "ambiguous (also registered by otherclip)",
         "(not imported: the name is ambiguous)"],
        ["clip", "otherclip 2.1", "third-party", "ambiguous (also registered by cliptools)",
         "(not imported: the name is ambiguous)"],
    ]  # fmt: skip
    result = _run(["config", "check"], PluginCatalog())
    assert result.exit_code == 2
    assert "is ambiguous: 2 distributions register it" in result.stderr
