"""Where the event log may go: ``~`` expanded, no folder, no file that is not a hookgrad log."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from hookgrad.runtime import ConfigError, Runtime
from hookgrad.runtime._runtime import EventLogPathWarning


def runtime(tmp_path: Path, jsonl: object) -> Runtime:
    (tmp_path / "hookgrad.toml").write_text(f"[events]\njsonl = {json.dumps(jsonl)}\n")
    return Runtime(cwd=tmp_path, environ={})


def test_tilde_is_the_home_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``jsonl = "~/runs/e.jsonl"`` writes under $HOME, not into a folder named "~"."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    project = tmp_path / "project"
    project.mkdir()
    with runtime(project, "~/runs/e.jsonl") as rt:
        rt.emit({"plugin": "p", "kind": "k", "data": {}})
    assert (home / "runs" / "e.jsonl").is_file()
    assert not (project / "~").exists()


def test_a_relative_path_leaving_the_folder_says_where_it_goes(tmp_path: Path) -> None:
    """``../e.jsonl`` is allowed, with a warning naming the resolved file."""
    project = tmp_path / "project"
    project.mkdir()
    with pytest.warns(EventLogPathWarning, match=str(tmp_path / "e.jsonl")):
        runtime(project, "../e.jsonl").close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        runtime(project, "runs/e.jsonl").close()  # inside: no warning
        runtime(project, str(tmp_path / "abs.jsonl")).close()  # absolute: chosen on purpose


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("train.py", "import torch\nprint('hello')\n"),
        ("data.csv", "x,y\n1,2\n"),
        ("config.json", '{"lr": 0.1}\n'),
        ("blob.bin", "\udcff\udcfe".encode("utf-8", "surrogateescape").decode("latin-1")),
    ],
)
def test_a_file_that_is_not_a_hookgrad_log_is_refused_untouched(
    tmp_path: Path, name: str, content: str
) -> None:
    """An existing non-log file: ConfigError naming the key, the file and why; file unchanged."""
    target = tmp_path / name
    target.write_text(content, encoding="latin-1")
    before = target.read_bytes()
    with pytest.raises(ConfigError) as caught:
        runtime(tmp_path, name)
    message = str(caught.value)
    assert message.startswith("hookgrad.toml: events.jsonl = ")
    assert name in message and "not" in message
    assert (caught.value.table, caught.value.key) == ("events", "jsonl")
    assert target.read_bytes() == before


@pytest.mark.parametrize(
    ("jsonl", "reason"),
    [
        (".", "it is a folder"),
        ("sub", "it is a folder"),
        ("afile/e.jsonl", "is not a folder"),
    ],
)
def test_a_path_hookgrad_cannot_write_is_a_config_error(
    tmp_path: Path, jsonl: str, reason: str
) -> None:
    """A folder, or a path under a file: ConfigError naming key and file, nothing created."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ConfigError, match=reason) as caught:
        runtime(tmp_path, jsonl)
    assert caught.value.path == tmp_path / "hookgrad.toml"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "hookgrad.toml", "sub"]


def test_an_empty_log_path_is_a_config_error(tmp_path: Path) -> None:
    """``jsonl = ""`` is refused by the config model, naming the key."""
    with pytest.raises(ConfigError, match=r"'jsonl' in \[events\]"):
        runtime(tmp_path, "")


def test_an_existing_hookgrad_log_is_appended_to(tmp_path: Path) -> None:
    """A log written by an earlier run gets the new run's records after its own."""
    for run in range(2):
        with runtime(tmp_path, "e.jsonl") as rt:
            rt.emit({"plugin": "p", "kind": "run", "data": {"run": run}})
    lines = (tmp_path / "e.jsonl").read_text().splitlines()
    assert [json.loads(line)["data"]["run"] for line in lines] == [0, 1]


@pytest.mark.parametrize(
    ("jsonl", "rank", "world", "written"),
    [
        ("events.jsonl", "1", "2", "events.rank1.jsonl"),
        ("runs/{rank}/events.jsonl", "3", "4", "runs/3/events.jsonl"),
        ("log", "0", "2", "log.rank0"),
        ("events.jsonl", "0", "1", "events.jsonl"),
    ],
)
def test_each_rank_of_a_distributed_run_writes_its_own_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jsonl: str, rank: str, world: str, written: str
) -> None:
    """torchrun's RANK/WORLD_SIZE: {rank} is replaced, else .rankN goes before the suffix."""
    monkeypatch.setenv("RANK", rank)
    monkeypatch.setenv("WORLD_SIZE", world)
    with runtime(tmp_path, jsonl) as rt:
        rt.emit({"plugin": "p", "kind": "k", "data": {}})
    assert (tmp_path / written).is_file()
    assert [p.name for p in tmp_path.rglob("*") if p.is_file() and p.name != "hookgrad.toml"] == [
        Path(written).name
    ]
