"""Module forward hooks: SEMANTICS.md F-1..F-11 (fired order, arguments, replacements)."""

from __future__ import annotations

import os

import pytest


def _adder(lib):
    class Adder(lib.nn.Module):
        def forward(self, a, b=None, *, scale=1.0):
            out = a if b is None else a + b
            return out * scale

    return Adder()


def test_pre_hook_gets_positional_args_only(lib):
    """F-1: hook(module, args) with the positional tuple; forward still gets the kwargs."""
    m = _adder(lib)
    seen = []
    m.register_forward_pre_hook(lambda mod, args: seen.append((mod is m, len(args))))
    out = m(lib.tensor([1.0]), lib.tensor([2.0]), scale=10.0)
    assert seen == [(True, 2)]
    assert out.tolist() == [30.0]


def test_pre_hook_single_value_replaces_all_args(lib):
    """F-2: a non-tuple return is wrapped into (value,) and replaces every positional arg."""
    m = _adder(lib)
    m.register_forward_pre_hook(lambda mod, args: args[0] * 5)
    out = m(lib.tensor([1.0]), lib.tensor([2.0]))
    assert out.tolist() == [5.0]


def test_pre_hooks_chain_and_forward_hooks_see_final_args(lib):
    """F-3: each pre-hook sees the previous result; forward hooks get the final args."""
    m = _adder(lib)
    m.register_forward_pre_hook(lambda mod, args: (args[0] + 1, args[1]))
    m.register_forward_pre_hook(lambda mod, args: (args[0] * 2, args[1]))
    seen = []
    m.register_forward_hook(lambda mod, args, out: seen.append(args[0].tolist()))
    out = m(lib.tensor([1.0]), lib.tensor([10.0]))
    assert (seen, out.tolist()) == ([[4.0]], [14.0])


def test_pre_hook_with_kwargs_returns_pair(lib):
    """F-4: a with_kwargs pre-hook gets kwargs and its (args, kwargs) replace both."""
    m = _adder(lib)
    m.register_forward_pre_hook(
        lambda mod, args, kwargs: ((args[0],), {"scale": kwargs["scale"] * 3}), with_kwargs=True
    )
    out = m(lib.tensor([2.0]), lib.tensor([5.0]), scale=2.0)
    assert out.tolist() == [12.0]


@pytest.mark.parametrize("bad", [lambda a, k: a, lambda a, k: (a, k, 1)])
def test_pre_hook_with_kwargs_bad_return(lib, bad):
    """F-4: a bare (one-element) args tuple or a 3-tuple raises RuntimeError."""
    m = _adder(lib)
    m.register_forward_pre_hook(lambda mod, args, kwargs: bad(args, kwargs), with_kwargs=True)
    with pytest.raises(RuntimeError, match="forward pre-hook must return None or a tuple"):
        m(lib.tensor([1.0]), scale=1.0)


def test_forward_hook_replaces_output_for_later_hooks(lib, global_hooks):
    """F-5: a non-None return replaces the output; later hooks and the caller see it."""
    m = _adder(lib)
    seen = []
    global_hooks("forward", lambda mod, args, out: out + 100)
    m.register_forward_hook(lambda mod, args, out: seen.append(out.tolist()) or out * 2)
    out = m(lib.tensor([1.0]))
    assert (seen, out.tolist()) == ([[101.0]], [202.0])


def test_forward_hook_with_kwargs(lib):
    """F-6: with_kwargs forward hooks get (module, args, kwargs, output), kwargs {} when none."""
    m = _adder(lib)
    seen = []
    m.register_forward_hook(
        lambda mod, args, kwargs, out: seen.append(dict(kwargs)), with_kwargs=True
    )
    m(lib.tensor([1.0]))
    m(lib.tensor([1.0]), scale=3.0)
    assert seen == [{}, {"scale": 3.0}]


def test_call_order_with_prepend_and_globals(lib, global_hooks):
    """F-7/G-1: global pre, local pre (prepend first), forward, global fwd, local fwd."""
    order = []

    class Probe(lib.nn.Module):
        def forward(self, x):
            order.append("forward")
            return x

    m = Probe()
    m.register_forward_pre_hook(lambda mod, a: order.append("pre1"))
    m.register_forward_pre_hook(lambda mod, a: order.append("pre2-prepend"), prepend=True)
    m.register_forward_pre_hook(lambda mod, a: order.append("pre3-prepend"), prepend=True)
    global_hooks("forward_pre", lambda mod, a: order.append("global-pre"))
    m.register_forward_hook(lambda mod, a, o: order.append("fwd1"))
    m.register_forward_hook(lambda mod, a, o: order.append("fwd2-prepend"), prepend=True)
    global_hooks("forward", lambda mod, a, o: order.append("global-fwd"))
    m(lib.tensor([1.0]))
    assert order == [
        "global-pre",
        "pre3-prepend",
        "pre2-prepend",
        "pre1",
        "forward",
        "global-fwd",
        "fwd2-prepend",
        "fwd1",
    ]


def test_direct_forward_call_skips_hooks(lib, global_hooks):
    """F-8: module.forward(...) runs no hook, local or global."""
    m = _adder(lib)
    calls = []
    m.register_forward_hook(lambda *a: calls.append("local"))
    global_hooks("forward", lambda *a: calls.append("global"))
    m.forward(lib.tensor([1.0]))
    assert calls == []


class _Boom(Exception):
    pass


def _failing(lib, where):
    class Failing(lib.nn.Module):
        def forward(self, x):
            if where == "forward":
                raise _Boom("forward")
            return x * 2

    return Failing()


def test_always_call_hooks_run_when_forward_raises(lib, global_hooks):
    """F-9: after an exception, unrun always_call hooks run (global, then local) with output None."""
    m = _failing(lib, "forward")
    seen = []
    global_hooks("forward", lambda mod, a, o: seen.append(("global", o)), always_call=True)
    m.register_forward_hook(lambda mod, a, o: seen.append(("plain", o)))
    m.register_forward_hook(lambda mod, a, o: seen.append(("local", o)), always_call=True)
    m.register_forward_hook(
        lambda mod, a, k, o: seen.append(("local-kw", k, o)), always_call=True, with_kwargs=True
    )
    with pytest.raises(_Boom):
        m(lib.tensor([1.0]))
    assert seen == [("global", None), ("local", None), ("local-kw", {}, None)]


def test_always_call_hooks_run_when_pre_hook_raises(lib):
    """F-9: a raising pre-hook still triggers always_call hooks, with the args as changed so far."""
    m = _failing(lib, "none")
    seen = []

    def raising_pre(mod, args):
        raise _Boom("pre")

    m.register_forward_pre_hook(lambda mod, args: (args[0] + 1,))
    m.register_forward_pre_hook(raising_pre)
    m.register_forward_hook(lambda mod, a, o: seen.append((a[0].tolist(), o)), always_call=True)
    with pytest.raises(_Boom):
        m(lib.tensor([1.0]))
    assert seen == [([2.0], None)]


def test_always_call_not_rerun_after_forward_hook_raises(lib):
    """F-9: an always_call hook that already ran is not run again; it saw the real output."""
    m = _failing(lib, "none")
    seen = []
    m.register_forward_hook(lambda mod, a, o: seen.append(("first", o.tolist())), always_call=True)

    def raising(mod, a, o):
        raise _Boom("hook")

    m.register_forward_hook(raising)
    m.register_forward_hook(lambda mod, a, o: seen.append(("last", o.tolist())), always_call=True)
    with pytest.raises(_Boom):
        m(lib.tensor([1.0]))
    assert seen == [("first", [2.0]), ("last", [2.0])]


def test_always_call_hook_error_becomes_warning(lib):
    """F-10: an always_call hook raising during exception handling only warns."""
    m = _failing(lib, "forward")
    seen = []

    def bad(mod, a, o):
        raise ValueError("secondary")

    m.register_forward_hook(bad, always_call=True)
    m.register_forward_hook(lambda mod, a, o: seen.append("still ran"), always_call=True)
    with pytest.warns(UserWarning, match="always_call") as caught, pytest.raises(_Boom):
        m(lib.tensor([1.0]))
    assert seen == ["still ran"]
    # Both libraries point the warning at their Module call, in nn/modules/module.py.
    assert caught[0].filename.endswith(os.path.join("nn", "modules", "module.py"))


def test_global_always_call_with_kwargs_quirk(lib, global_hooks):
    """F-11: in the exception path a global with_kwargs always_call hook gets 3 args."""
    m = _failing(lib, "forward")
    arities = []
    global_hooks("forward", lambda *a: arities.append(len(a)), with_kwargs=True, always_call=True)
    with pytest.raises(_Boom):
        m(lib.tensor([1.0]))
    ok = _failing(lib, "none")
    ok(lib.tensor([1.0]))
    assert arities == [3, 4]


def test_forward_hooks_fire_under_no_grad(lib):
    """N-3: forward pre-hooks and forward hooks still fire under no_grad."""
    m = _adder(lib)
    calls = []
    m.register_forward_pre_hook(lambda *a: calls.append("pre"))
    m.register_forward_hook(lambda *a: calls.append("fwd"))
    with lib.no_grad():
        out = m(lib.tensor([1.0], requires_grad=True))
    assert calls == ["pre", "fwd"] and not out.requires_grad


def test_hook_added_or_removed_during_forward_hooks(lib):
    """H-5: changing the hook dict from inside a hook affects only the next call."""
    m = _adder(lib)
    log = []
    handles = {}

    def first(mod, a, o):
        log.append("first")
        handles["second"].remove()
        mod.register_forward_hook(lambda *x: log.append("added"))

    handles["first"] = m.register_forward_hook(first)
    handles["second"] = m.register_forward_hook(lambda *x: log.append("second"))
    m(lib.tensor([1.0]))
    handles["first"].remove()
    m(lib.tensor([1.0]))
    assert log == ["first", "second", "added"]
