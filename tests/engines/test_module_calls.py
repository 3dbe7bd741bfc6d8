"""Engine.observe_module_calls and Engine.unwrap, the same on both adapters."""

from __future__ import annotations

from typing import Any

import pytest

from hookgrad.engines import engine_named


def _engine_of(lib: Any) -> Any:
    return engine_named("hookgrad" if lib.__name__ == "hookgrad" else "torch")


def test_begin_and_end_bracket_every_call_even_a_failing_one(lib: Any) -> None:
    """begin(module) before and end(module) after each call, nested, a raising one included."""
    inner, outer = lib.nn.Linear(2, 2), lib.nn.Sequential()
    outer.add_module("inner", inner)
    seen: list[tuple[str, Any]] = []
    handle = _engine_of(lib).observe_module_calls(
        lambda m: seen.append(("begin", m)), lambda m: seen.append(("end", m))
    )
    try:
        outer(lib.ones(1, 2))
        outer.append(lib.nn.Linear(3, 3))  # a wrong shape: the second layer raises
        with pytest.raises(RuntimeError):
            outer(lib.ones(1, 2))
    finally:
        handle.remove()
    first = [("begin", outer), ("begin", inner), ("end", inner), ("end", outer)]
    failing = outer[1]
    assert seen == [
        *first,
        ("begin", outer),
        ("begin", inner),
        ("end", inner),
        ("begin", failing),
        ("end", failing),
        ("end", outer),
    ]


def test_removing_stops_the_calls(lib: Any) -> None:
    """After remove() neither begin nor end is called."""
    seen: list[Any] = []
    handle = _engine_of(lib).observe_module_calls(seen.append, seen.append)
    handle.remove()
    lib.nn.Linear(2, 2)(lib.ones(1, 2))
    assert seen == []


def test_unwrap_gives_the_wrapped_model() -> None:
    """torch: DataParallel (and DDP) unwrap to the model; others, and hookgrad's, stay."""
    torch = pytest.importorskip("torch")
    import hookgrad

    net = torch.nn.Linear(2, 2)
    engine = engine_named("torch")
    assert engine.unwrap(torch.nn.DataParallel(net)) is net
    assert engine.unwrap(net) is net
    mine = hookgrad.nn.Linear(2, 2)
    assert engine_named("hookgrad").unwrap(mine) is mine
