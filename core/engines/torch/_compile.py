"""Runtime hooks that ``torch.compile`` must run, never trace.

The runtime's loop-point callbacks (the ``torch.autograd.backward`` wrapper, the optimizer step
gate and post hook) call plugins: Python with side effects, pydantic events, host syncs. Called
from a function being compiled (``torch.compile(train_step)`` with ``loss.backward()`` or
``optimizer.step()`` inside), dynamo would try to trace them into the graph, and fails deep in
pydantic, or worse, would run a plugin once at tracing instead of at every step. Wrapped with
:func:`eager_only`, such a callback tells dynamo to leave it out of the graph
(``torch.compiler.disable``: a graph break), so it runs eagerly, at every call, as without
compile. Outside compilation the wrapper costs one ``torch.compiler.is_compiling()`` call (about
0.1 µs) per backward or step.

The module hooks (:mod:`._module_hooks`), which run at every module call, do the same without
the wrapper's extra call: each begins with ``if torch.compiler.is_compiling(): return
torch.compiler.disable(itself)(...)``. Dynamo does not guard compiled code on those global
hooks: see :func:`forget_compiled_code`.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import torch

__all__ = ["eager_only", "forget_compiled_code"]

F = TypeVar("F", bound=Callable[..., Any])


def eager_only(function: F) -> F:
    """``function``, run eagerly even when called from code that ``torch.compile`` traces."""

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling():
            return torch.compiler.disable(function)(*args, **kwargs)
        return function(*args, **kwargs)

    return call  # type: ignore[return-value]


def forget_compiled_code() -> None:
    """Make ``torch.compile`` compile every function and model again at its next call.

    Dynamo does not guard compiled code on torch's global module hooks: a model compiled (and
    called) before the runtime installed its module hooks would go on running the code compiled
    without them, and the runtime would silently miss the module events inside it. Called when
    the runtime installs its module hooks, so that code compiled from then on has them in
    place. A no-op until something compiled (dynamo is not imported before).
    """
    if "torch._dynamo" in sys.modules:
        torch.compiler.reset()
