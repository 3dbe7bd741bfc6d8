"""``torch.autograd.functional``: vjp, jvp, jacobian, hessian, vhp, hvp.

All are built on reverse mode (``autograd.grad``); forward products use the double-backward
trick, as torch's do: the gradient with respect to a zero ``grad_outputs`` that requires grad
is linear in it, so differentiating it again gives the forward product. ``vectorize=True``
gives the same numbers as the loop (hookgrad has no vmap, so it is no faster);
``strategy="forward-mode"`` needs forward-mode AD, which hookgrad does not have.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._grad_mode import enable_grad, is_grad_enabled, set_grad_enabled
from .._tensor import Tensor, _wrap

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]

Func = Callable[..., Any]

_STRICT_FIRST = {
    "back": "The output of the user-provided function is independent of input {i}. This is "
    "not allowed in strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the "
    "grad_outputs when using the double backward trick to compute forward mode gradients. This "
    "is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. "
    "This is not allowed in strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry "
    "{i} in the grad_jacobian. This is not allowed in strict mode as it prevents from using the "
    "double backward trick to replace forward mode AD.",
}

_NOT_REQUIRING = {
    "outputs": "Output {i} of the user-provided function does not require gradients. The "
    "outputs must be computed in a differentiable manner from the input when running in strict "
    "mode.",
    "grad_inputs": "The gradient with respect to input {i} is independent of the inputs of the "
    "user-provided function. This is not allowed in strict mode.",
    "jacobian": "While computing the hessian, found that the jacobian of the user-provided "
    "function with respect to input {i} is independent of the input. This is not allowed in "
    "strict mode. You should ensure that your function is twice differentiable and that the "
    "jacobian depends on the inputs (this would be violated by a linear function for example).",
    "hessian": "The hessian of the user-provided function with respect to input {i} is "
    "independent of the input. This is not allowed in strict mode. You should ensure that your "
    "function is thrice differentiable and that the hessian depends on the inputs.",
}


# ------------------------------------------------------------------------------ plumbing
def _as_tuple(value: Any, arg_name: str, fn_name: str) -> tuple[bool, tuple[Tensor, ...]]:
    """``(was a tuple, value as a tuple)``, every element checked to be a Tensor."""
    is_tuple = isinstance(value, tuple)
    items = value if is_tuple else (value,)
    for i, item in enumerate(items):
        if not isinstance(item, Tensor):
            where = f"value at index {i}" if is_tuple else f"given {arg_name}"
            raise TypeError(
                f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of "
                f"Tensors but the {where} has type {type(item)}."
            )
    return is_tuple, items


def _unpack(result: tuple[Any, ...], is_tuple: bool) -> Any:
    return result if is_tuple else result[0]


def _unpack2(result: tuple[Any, ...], outer: bool, inner: bool) -> Any:
    """A tuple (outputs) of tuples (inputs) as the caller's arguments were shaped."""
    if not inner:
        result = tuple(r[0] for r in result)
    return result if outer else result[0]


def _preprocess(inputs: Sequence[Tensor], create_graph: bool, need_graph: bool) -> tuple:
    """Fresh tensors to differentiate with respect to: graph-connected views of the inputs
    under ``create_graph``, detached copies otherwise."""
    return tuple(
        t.view_as(t) if create_graph and t.requires_grad else t.detach().requires_grad_(need_graph)
        for t in inputs
    )


def _postprocess(values: Any, create_graph: bool) -> Any:
    if create_graph:
        return values
    return tuple(v.detach() if isinstance(v, Tensor) else _postprocess(v, False) for v in values)


def _validate_v(v: tuple[Tensor, ...], other: tuple[Tensor, ...], is_other_tuple: bool) -> None:
    if len(v) != len(other):
        if is_other_tuple:
            raise RuntimeError(
                f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}."
            )
        raise RuntimeError("The given v should contain a single Tensor.")
    for i, (a, b) in enumerate(zip(v, other)):
        if a.shape != b.shape:
            prefix = f"Entry {i} in " if is_other_tuple else ""
            raise RuntimeError(
                f"{prefix}v has invalid size: should be {b.shape} but got {a.shape}."
            )


def _check_requires_grad(values: Sequence[Tensor | None], kind: str, strict: bool) -> None:
    if not strict:
        return
    for i, value in enumerate(values):
        if value is None:
            raise RuntimeError(
                f"The output of the user-provided function is independent of input {i}. This "
                "is not allowed in strict mode."
            )
        if not value.requires_grad:
            raise RuntimeError(_NOT_REQUIRING[kind].format(i=i))


def _autograd_grad(
    outputs: Sequence[Tensor | None],
    inputs: Sequence[Tensor],
    grad_outputs: Sequence[Tensor | None] | None = None,
    create_graph: bool = False,
    retain_graph: bool | None = None,
) -> tuple[Tensor | None, ...]:
    """``autograd.grad`` of the outputs that require grad; all None when none does."""
    seeds = grad_outputs if grad_outputs is not None else (None,) * len(outputs)
    pairs = [(o, s) for o, s in zip(outputs, seeds) if o is not None and o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    from . import grad

    kept_seeds = [s for _, s in pairs]
    return grad(
        [o for o, _ in pairs],
        list(inputs),
        None if all(s is None for s in kept_seeds) else kept_seeds,
        retain_graph=retain_graph,
        create_graph=create_graph,
        allow_unused=True,
    )


def _fill_in_zeros(
    grads: Sequence[Tensor | None],
    refs: Sequence[Tensor],
    strict: bool,
    create_graph: bool,
    stage: str,
) -> tuple[Tensor, ...]:
    filled = []
    for i, (g, ref) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(_STRICT_FIRST[stage].format(i=i))
            g = _wrap(np.zeros_like(ref._data))
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(
                f"The {what} of the user-provided function is independent of input {i}. This "
                "is not allowed in strict mode when create_graph=True."
            )
        filled.append(g)
    return tuple(filled)


def _given_v(
    v: Any, reference: tuple[Tensor, ...], is_tuple: bool, fn: str, create_graph: bool, what: str
) -> tuple[Tensor, ...] | None:
    """``v`` checked against ``reference`` (the inputs or outputs); None only when allowed."""
    if v is None:
        if len(reference) != 1 or reference[0].numel() != 1:
            raise RuntimeError(f"The vector v can only be None if {what}")
        return None
    _, vs = _as_tuple(v, "v", fn)
    vs = _preprocess(vs, create_graph, need_graph=False)
    _validate_v(vs, reference, is_tuple)
    return vs


_INPUT_SINGLE = "the input to the user-provided function is a single Tensor with a single element."


def _single_output(outputs: tuple[Tensor, ...], is_tuple: bool, fn: str) -> None:
    if is_tuple or not isinstance(outputs[0], Tensor):
        raise RuntimeError(f"The function given to {fn} should return a single Tensor")
    if outputs[0].numel() != 1:
        raise RuntimeError(
            f"The Tensor returned by the function given to {fn} should contain a single element"
        )


# ------------------------------------------------------------------------------ products
def vjp(func: Func, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False):  # type: ignore[no-untyped-def]
    """``(func(inputs), v^T J)``: the vector-Jacobian product at ``inputs``."""
    with enable_grad():
        is_inputs_tuple, ins = _as_tuple(inputs, "inputs", "vjp")
        ins = _preprocess(ins, create_graph, need_graph=True)
        is_outputs_tuple, outs = _as_tuple(
            func(*ins), "outputs of the user-provided function", "vjp"
        )
        _check_requires_grad(outs, "outputs", strict)
        vs = _given_v(
            v,
            outs,
            is_outputs_tuple,
            "vjp",
            create_graph,
            "the user-provided function returns a single Tensor with a single element.",
        )
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        found = _autograd_grad(outs, ins, vs, create_graph=create_graph)
        result = _fill_in_zeros(found, ins, strict, create_graph, "back")
    return (
        _unpack(_postprocess(outs, create_graph), is_outputs_tuple),
        _unpack(_postprocess(result, create_graph), is_inputs_tuple),
    )


def jvp(func: Func, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False):  # type: ignore[no-untyped-def]
    """``(func(inputs), J v)``: the Jacobian-vector product, by the double-backward trick."""
    with enable_grad():
        is_inputs_tuple, ins = _as_tuple(inputs, "inputs", "jvp")
        ins = _preprocess(ins, create_graph, need_graph=True)
        vs = _given_v(v, ins, is_inputs_tuple, "jvp", create_graph, _INPUT_SINGLE)
        is_outputs_tuple, outs = _as_tuple(
            func(*ins), "outputs of the user-provided function", "jvp"
        )
        _check_requires_grad(outs, "outputs", strict)
        # The gradient is linear in grad_outputs: their value never enters the result.
        zeros = tuple(_wrap(np.zeros_like(o._data)).requires_grad_() for o in outs)
        grad_inputs = _autograd_grad(outs, ins, zeros, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        found = _autograd_grad(grad_inputs, zeros, vs, create_graph=create_graph)
        result = _fill_in_zeros(found, outs, strict, create_graph, "back_trick")
    return (
        _unpack(_postprocess(outs, create_graph), is_outputs_tuple),
        _unpack(_postprocess(result, create_graph), is_outputs_tuple),
    )


def jacobian(  # type: ignore[no-untyped-def]
    func: Func,
    inputs: Any,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    strategy: str = "reverse-mode",
):
    """The Jacobian of ``func`` at ``inputs``, one row (output element) at a time.

    For one input and one output a Tensor of shape ``output.shape + input.shape``; tuples
    where ``inputs`` or the outputs are tuples, as in torch.
    """
    _check_strategy(
        strategy,
        create_graph,
        'Expected strategy to be either "forward-mode" or '
        '"reverse-mode". Hint: If your function has more outputs than inputs, '
        '"forward-mode" tends to be more performant. Otherwise, prefer to use '
        '"reverse-mode".',
    )
    with enable_grad():
        is_inputs_tuple, ins = _as_tuple(inputs, "inputs", "jacobian")
        ins = _preprocess(ins, create_graph, need_graph=True)
        is_outputs_tuple, outs = _as_tuple(
            func(*ins), "outputs of the user-provided function", "jacobian"
        )
        _check_requires_grad(outs, "outputs", strict)
        if vectorize and strict:
            raise RuntimeError(
                "torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are "
                "not supported together. Please either set `strict=False` or "
                "`vectorize=False`."
            )
        rows = tuple(_jacobian_of(i, out, ins, create_graph, strict) for i, out in enumerate(outs))
        rows = _postprocess(rows, create_graph)
    return _unpack2(rows, is_outputs_tuple, is_inputs_tuple)


def _check_strategy(strategy: str, create_graph: bool, message: str) -> None:
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError(message)
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError(
                "torch.autograd.functional.jacobian: `create_graph=True` and "
                '`strategy="forward-mode"` are not supported together (yet). Please either set '
                '`create_graph=False` or `strategy="reverse-mode"`.'
            )
        raise NotImplementedError(
            'strategy="forward-mode" needs forward-mode AD, which hookgrad does not have: use '
            'strategy="reverse-mode" (the same numbers)'
        )


def _jacobian_of(
    i: int, out: Tensor, ins: tuple[Tensor, ...], create_graph: bool, strict: bool
) -> tuple[Tensor, ...]:
    """The Jacobian of output ``i`` with respect to each input."""
    columns: list[list[Tensor]] = [[] for _ in ins]
    flat = out.reshape(-1)
    for j in range(out.numel()):
        found = _autograd_grad((flat[j],), ins, retain_graph=True, create_graph=create_graph)
        for k, (column, g, inp) in enumerate(zip(columns, found, ins)):
            if g is None:
                if strict:
                    raise RuntimeError(
                        f"Output {i} of the user-provided function is independent of input "
                        f"{k}. This is not allowed in strict mode."
                    )
                g = _wrap(np.zeros_like(inp._data))
            elif strict and create_graph and not g.requires_grad:
                raise RuntimeError(
                    "The jacobian of the user-provided function is independent of input "
                    f"{i}. This is not allowed in strict mode when create_graph=True."
                )
            column.append(g)
    from .._ops.shape import stack

    return tuple(
        stack(column, 0).view(*out.shape, *inp.shape)
        if column
        else _wrap(np.zeros((*out.shape, *inp.shape), dtype=inp._data.dtype))
        for column, inp in zip(columns, ins)
    )


def hessian(  # type: ignore[no-untyped-def]
    func: Func,
    inputs: Any,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    outer_jacobian_strategy: str = "reverse-mode",
):
    """The Hessian of a scalar ``func`` at ``inputs``: the Jacobian of its gradient."""
    is_inputs_tuple, ins = _as_tuple(inputs, "inputs", "hessian")
    _check_strategy(
        outer_jacobian_strategy,
        create_graph,
        'Expected strategy to be either "forward-mode" or "reverse-mode".',
    )

    def single_output(*args: Tensor) -> Tensor:
        out = func(*args)
        is_tuple, outs = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(outs, "outputs", strict)
        _single_output(outs, is_tuple, "hessian")
        return out.squeeze()

    def gradient(*args: Tensor) -> Any:
        jac = jacobian(single_output, args, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        return jac

    result = jacobian(gradient, ins, create_graph=create_graph, strict=strict, vectorize=vectorize)
    return _unpack2(result, is_inputs_tuple, is_inputs_tuple)


def vhp(func: Func, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False):  # type: ignore[no-untyped-def]
    """``(func(inputs), v^T H)`` for a scalar ``func``: the gradient of ``<grad, v>``."""
    outs, is_outputs_tuple, ins, is_inputs_tuple, vs, jac = _scalar_gradient(
        func, inputs, v, create_graph, strict, "vhp"
    )
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        found = _autograd_grad(jac, ins, vs, create_graph=create_graph)
        result = _fill_in_zeros(found, ins, strict, create_graph, "double_back")
    return (
        _unpack(_postprocess(outs, create_graph), is_outputs_tuple),
        _unpack(_postprocess(result, create_graph), is_inputs_tuple),
    )


def hvp(func: Func, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False):  # type: ignore[no-untyped-def]
    """``(func(inputs), H v)`` for a scalar ``func``, by the double-backward trick."""
    outs, is_outputs_tuple, ins, is_inputs_tuple, vs, jac = _scalar_gradient(
        func, inputs, v, create_graph, strict, "hvp"
    )
    with enable_grad():
        zeros = tuple(_wrap(np.zeros_like(t._data)).requires_grad_() for t in ins)
        double_back = _autograd_grad(jac, ins, zeros, create_graph=True)
        _check_requires_grad(jac, "hessian", strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        found = _autograd_grad(double_back, zeros, vs, create_graph=create_graph)
        result = _fill_in_zeros(found, ins, strict, create_graph, "double_back_trick")
    return (
        _unpack(_postprocess(outs, create_graph), is_outputs_tuple),
        _unpack(_postprocess(result, create_graph), is_inputs_tuple),
    )


def _scalar_gradient(
    func: Func, inputs: Any, v: Any, create_graph: bool, strict: bool, fn: str
) -> tuple[Any, ...]:
    """vhp's and hvp's common start: the inputs, ``v``, the output and its recorded gradient."""
    with enable_grad():
        is_inputs_tuple, ins = _as_tuple(inputs, "inputs", fn)
        ins = _preprocess(ins, create_graph, need_graph=True)
        vs = _given_v(v, ins, is_inputs_tuple, fn, create_graph, _INPUT_SINGLE)
        is_outputs_tuple, outs = _as_tuple(func(*ins), "outputs of the user-provided function", fn)
        _check_requires_grad(outs, "outputs", strict)
        _single_output(outs, is_outputs_tuple, fn)
        jac = _autograd_grad(outs, ins, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
    return outs, is_outputs_tuple, ins, is_inputs_tuple, vs, jac
