"""Runtime callbacks that ``torch.compile`` must run, never trace.

The runtime's loop-point callbacks (the ``torch.autograd.backward`` wrapper, the optimizer step
gate and post hook) call plugins: Python with side effects, pydantic events, host syncs. Called
from a function being compiled (``torch.compile(train_step)`` with ``loss.backward()`` or
``optimizer.step()`` inside), dynamo would try to trace them into the graph, and fails deep in
pydantic, or worse, would run a plugin once at tracing instead of at every step. Wrapped with
:func:`eager_only`, such a callback tells dynamo to leave it out of the graph
(``torch.compiler.disable``: a graph break), so it runs eagerly, at every call, as without
compile. Outside compilation the wrapper costs one ``torch.compiler.is_compiling()`` call (about
0.1 µs) per backward or step.

Module hooks are not wrapped (they run at every module call, where that cost would count):
dynamo breaks the graph at their first call, ``threading.get_ident`` (see
:func:`._private.compiled_original`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import torch

__all__ = ["eager_only"]

F = TypeVar("F", bound=Callable[..., Any])


def eager_only(function: F) -> F:
    """``function``, run eagerly even when called from code that ``torch.compile`` traces."""

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling():
            return torch.compiler.disable(function)(*args, **kwargs)
        return function(*args, **kwargs)

    return call  # type: ignore[return-value]
