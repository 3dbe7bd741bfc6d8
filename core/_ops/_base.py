"""Shared plumbing for ops: graph edges, result wrapping, broadcasting undone in one place."""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from .._dtype import opsum
from .._grad_mode import _state as grad_state
from .._tensor import Tensor, _wrap
from ..autograd._saved import pack_node
from ..autograd._saved import state as _saved_state
from ..autograd.graph import AccumulateGrad, Node

__all__ = [
    "Node",
    "Tensor",
    "as_array",
    "edge",
    "grad_state",
    "needs_grad",
    "not_a_tensor",
    "numpy_names",
    "public_op",
    "record",
    "sum_to",
    "wrap",
]

wrap = _wrap
_F = TypeVar("_F", bound=Callable[..., Any])
# hookgrad's short parameter names -> torch's, for messages
_TORCH_NAMES = {"x": "input", "a": "input", "b": "other"}
# torch's names of the tensor parameters that hookgrad's kernels call otherwise, which the
# public function forms take as keywords (``torch.add(input=x, other=y)``): the first
# parameter (when it has one of these names), then per-op overrides of the table above.
_FIRST_TENSOR_NAMES = frozenset({"x", "a", "t", "start", "array"})
_TORCH_KEYWORDS = {
    "bmm": {"b": "mat2"},
    "mm": {"b": "mat2"},
    "mv": {"v": "vec"},
    "from_numpy": {"array": "ndarray"},
    "split": {"x": "tensor"},
}
# numpy's spelling of torch's parameter names, which torch's argument parser also accepts
_NUMPY_NAMES = {"dim": "axis", "keepdim": "keepdims"}
_UNSET: Any = type("_Unset", (), {"__repr__": lambda self: "<unset>"})()


def edge(t: Tensor) -> tuple[Node, int] | None:
    """The graph edge a gradient for ``t`` travels along, or None if ``t`` needs none.

    A view reads its history through ``grad_fn``, which regenerates it if its base was
    written in place since (``autograd._view``); other tensors pay this one ``_base`` read,
    a view whose history is current (every module-hook wrapper's output) one version check."""
    fn = t._grad_fn if t._base is None or t._view_version == t._vbox[0] else t.grad_fn
    if fn is not None:
        return (fn, t._output_nr)
    if t._requires_grad:
        acc = t._acc
        if acc is None:
            acc = t._acc = AccumulateGrad(t)
        return (acc, 0)
    return None


def needs_grad(*tensors: Tensor) -> bool:
    """True when grad mode is on and some input requires grad: the op must record a node.

    A view requires grad whenever its base does (torch's), even one made under no_grad or
    before the base came to require grad: ``edge`` then gives it a history or none."""
    if not grad_state.enabled:
        return False
    for t in tensors:
        if t._requires_grad:
            return True
        base = t._base
        if base is not None and base._requires_grad:
            return True
    return False


def record(data: np.ndarray, node: Node) -> Tensor:
    """Wrap ``data`` as the (only) output of ``node``; hand what ``node`` saved to the
    saved-tensor hooks if any are pushed (one check when none is)."""
    out = _wrap(data)
    out._requires_grad = True
    out._grad_fn = node
    if _saved_state.active:
        pack_node(node, out)
    return out


def sum_to(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Undo broadcasting: sum ``grad`` down to ``shape``. The one place this happens."""
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, size in enumerate(shape) if size == 1 and grad.shape[lead + i] != 1
    )
    if not axes:
        return grad.reshape(shape)
    if grad.dtype.itemsize > 2:  # the fast path: float32/float64 (and wide ints)
        return grad.sum(axis=axes, keepdims=True).reshape(shape)
    summed = opsum(grad, axes, keepdims=True)  # float16/bfloat16: accumulated in float32
    return summed.reshape(shape)


def as_array(value: Any, like: np.ndarray | None = None) -> np.ndarray:
    """Turn a Tensor, array or Python number into an array (for non-differentiable operands)."""
    if isinstance(value, Tensor):
        return value._data
    if like is not None and isinstance(value, (int, float, bool)):
        return np.asarray(value, dtype=like.dtype if like.dtype.kind == "f" else None)
    return np.asarray(value)


def not_a_tensor(op: str, name: str, value: Any, position: int | None = None) -> TypeError:
    """torch's argument-parser error: ``op`` needs a Tensor for ``name``, got ``value``.

    A plain TypeError, as torch's, whose ``argument`` attribute names the argument, so that
    :func:`public_op` leaves an error that already names it as it is.
    """
    where = f" (position {position})" if position is not None else ""
    kind = type(value).__name__
    error = TypeError(f"{op}(): argument {name!r}{where} must be Tensor, not {kind}")
    error.argument = name  # type: ignore[attr-defined]
    return error


def public_op(fn: _F, *, numpy_names: bool = False) -> _F:
    """``fn`` as a public function form (``hookgrad.relu``, ``F.linear``): the one place that
    turns a first argument that is not a Tensor into torch's TypeError.

    Ops read ``x._data`` straight away, so ``relu(None)`` fails inside with AttributeError
    (or numpy's ValueError); the argument is checked only after such a failure. The wrapper
    has ``fn``'s own signature (generated once), so a call costs one plain Python frame and no
    check: no argument packing, and a ``try`` is free until something raises. A sequence
    argument (``cat``, ``stack``) names its first non-Tensor element, as torch does. Tensor
    methods need no such wrapper: ``self`` is a Tensor. With ``numpy_names`` the wrapper also
    takes numpy's ``axis``/``keepdims`` (see :func:`numpy_names`).
    """
    signature = inspect.signature(fn)
    rename = _torch_keywords(fn.__name__, signature)
    first = next(iter(signature.parameters))
    params, args, prologue = _forwarding(fn.__qualname__, signature, numpy_names, rename)
    first = rename.get(first, first)
    source = (
        f"def {fn.__name__}({params}):\n"
        f"{prologue}"
        "    try:\n"
        f"        return _fn({args})\n"
        "    except (AttributeError, TypeError, ValueError) as error:\n"
        "        if not hasattr(error, 'argument'):  # else the op named the argument itself\n"
        f"            _check({first})\n"
        "        raise\n"
    )
    return _generate(fn, source, _check=_first_argument_check(fn.__name__, first))


def _torch_keywords(op: str, signature: inspect.Signature) -> dict[str, str]:
    """``{kernel parameter: torch's name}`` for ``op``'s tensor parameters named otherwise."""
    names = list(signature.parameters)
    rename = {}
    if names and names[0] in _FIRST_TENSOR_NAMES:
        rename[names[0]] = "input"
    if len(names) > 1 and names[1] == "b":
        rename["b"] = "other"
    rename.update(_TORCH_KEYWORDS.get(op, {}))
    return {k: v for k, v in rename.items() if k in signature.parameters}


def numpy_names(fn: _F) -> _F:
    """``fn`` also taking numpy's spelling of its ``dim``/``keepdim`` parameters (``axis``,
    ``keepdims``), as torch's argument parser does: ``x.argmax(axis=1)``.

    The wrapper's signature is ``fn``'s plus the aliases as keyword-only parameters (generated
    once), so a call without them costs one identity test per alias. Giving both spellings is
    torch's TypeError naming the alias. ``fn`` is returned as it is if it has neither name.
    """
    signature = inspect.signature(fn)
    if not _NUMPY_NAMES.keys() & signature.parameters.keys():
        return fn
    params, args, prologue = _forwarding(fn.__qualname__, signature, True)
    source = f"def {fn.__name__}({params}):\n{prologue}    return _fn({args})\n"
    return _generate(fn, source)


def _generate(fn: _F, source: str, **names: Any) -> _F:
    """Compile ``source``, a wrapper of ``fn`` made of ``fn``'s own parameter names.

    Its file name lies in hookgrad's folder, so that a warning raised under it points past
    it at the user's line (see ``user_stacklevel``), as past any other frame of hookgrad's.
    """
    namespace: dict[str, Any] = {"_fn": fn, "_unset": _UNSET, "_both": _both_given, **names}
    for name, p in inspect.signature(fn).parameters.items():
        namespace[f"_default_{name}"] = p.default
    filename = os.path.join(os.path.dirname(__file__), f"<wrapper of {fn.__qualname__}>")
    exec(compile(source, filename, "exec"), namespace)
    return functools.update_wrapper(namespace[fn.__name__], fn)  # type: ignore[return-value]


def _both_given(op: str, alias: str) -> TypeError:
    """torch's error for ``sum(dim=0, axis=0)``: the alias is the unexpected argument."""
    return TypeError(f"{op}() got an unexpected keyword argument '{alias}'")


def _first_argument_check(op: str, first: str) -> Callable[[Any], None]:
    """What :func:`public_op` runs after a failure: raise torch's TypeError if the first
    argument is not a Tensor (or, for ``tensors``, holds something that is not one)."""
    name = _TORCH_NAMES.get(first, first)

    def check(value: Any) -> None:
        if first == "tensors" and isinstance(value, list | tuple):
            for i, item in enumerate(value):
                if not isinstance(item, Tensor):
                    kind = type(item).__name__
                    raise TypeError(
                        f"expected Tensor as element {i} in argument 0, but got {kind}"
                    ) from None
        elif not isinstance(value, Tensor):
            raise not_a_tensor(op, name, value, 1) from None

    return check


def _forwarding(
    op: str, signature: inspect.Signature, aliases: bool, rename: dict[str, str] | None = None
) -> tuple[str, str, str]:
    """``(parameter list, argument list, prologue)`` of a wrapper with ``signature`` that passes
    every argument on as it came; with ``aliases``, it also takes numpy's names for ``dim`` and
    ``keepdim`` (keyword-only, unset by default), which the prologue moves to torch's. The
    wrapper names a positional parameter of ``rename`` by torch's name instead (its callers'
    keyword), and passes it on by position.

    ``dim`` and ``keepdim`` are unset by default too, so that giving both spellings is an
    error even when the value given is the default; the prologue fills in the default, or
    raises Python's error for a required parameter (and any required one after it) left unset.
    """
    params: list[str] = []
    args: list[str] = []
    prologue: list[str] = []
    star = False
    rest = ""
    renamed = {n: a for n, a in _NUMPY_NAMES.items() if aliases and n in signature.parameters}
    for p in signature.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            params.append(f"*{p.name}")
            args.append(f"*{p.name}")
            star = True
        elif p.kind is p.VAR_KEYWORD:
            rest = f"**{p.name}"
            args.append(rest)
        else:
            keyword = p.kind is p.KEYWORD_ONLY
            if keyword and not star:
                params.append("*")
                star = True
            required = p.default is p.empty
            unset = p.name in renamed or (required and not keyword and bool(prologue))
            default = "=_unset" if unset else "" if required else f"=_default_{p.name}"
            name = p.name if keyword or rename is None else rename.get(p.name, p.name)
            params.append(name + default)
            args.append(f"{p.name}={p.name}" if keyword else name)
            if p.name in renamed:
                alias = renamed[p.name]
                prologue.append(
                    f"    if {alias} is not _unset:\n"
                    f"        if {p.name} is not _unset:\n"
                    f"            raise _both({op.rpartition('.')[2]!r}, {alias!r})\n"
                    f"        {p.name} = {alias}\n"
                    f"    elif {p.name} is _unset:\n"
                )
            elif unset:
                prologue.append(f"    if {name} is _unset:\n")
            if unset:
                prologue.append(
                    f"        {name} = _default_{p.name}\n"
                    if not required
                    else f'        raise TypeError("{op}() missing 1 required positional '
                    f"argument: '{name}'\")\n"
                )
    for alias in renamed.values():
        if not star:
            params.append("*")
            star = True
        params.append(f"{alias}=_unset")
    if rest:
        params.append(rest)
    return ", ".join(params), ", ".join(args), "".join(prologue)
