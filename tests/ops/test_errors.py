"""Error behaviour: the exception class torch raises, with a message naming the values involved.

Tests taking ``lib`` run on hookgrad and, when installed, on torch 2.13 with the same match.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import hookgrad


@pytest.mark.parametrize(
    "op",
    [
        lambda L, a, b: a + b,
        lambda L, a, b: a - b,
        lambda L, a, b: a * b,
        lambda L, a, b: a / b,
        lambda L, a, b: a**b,
        lambda L, a, b: L.maximum(a, b),
        lambda L, a, b: L.where(a > 0, a, b),
        lambda L, a, b: a == b,
    ],
    ids=["add", "sub", "mul", "div", "pow", "maximum", "where", "eq"],
)
def test_broadcast_mismatch_names_sizes(lib: Any, op: Callable[..., Any]) -> None:
    """Incompatible shapes raise RuntimeError naming both sizes and the dimension."""
    a, b = lib.ones(2, 3, requires_grad=True), lib.ones(4)
    with pytest.raises(
        RuntimeError,
        match=r"The size of tensor a \(3\) must match the size of tensor b \(4\) at "
        r"non-singleton dimension 1",
    ):
        op(lib, a, b)


def test_matmul_mismatch_names_both_shapes(lib: Any) -> None:
    """2-D matmul with inner sizes 3 and 4 raises RuntimeError quoting both shapes."""
    with pytest.raises(
        RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"
    ):
        lib.ones(2, 3) @ lib.ones(4, 5)
    with pytest.raises(RuntimeError, match=r"expected tensor \[3\] and src \[4\]"):
        lib.ones(3).dot(lib.ones(4))


def test_matmul_rejects_0d(lib: Any) -> None:
    """matmul with a 0-d operand raises RuntimeError giving both ranks."""
    with pytest.raises(RuntimeError, match="at least 1D, but they are 0D and 2D"):
        lib.tensor(1.0) @ lib.ones(2, 2)


def test_backward_twice_without_retain_graph(lib: Any) -> None:
    """A second backward through freed saved tensors raises RuntimeError."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_backward_twice_with_retain_graph_accumulates(lib: Any) -> None:
    """retain_graph=True keeps saved tensors, so a second backward adds the gradient again."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 8.0]


def test_scalar_operand_node_also_frees(lib: Any) -> None:
    """``x * 2`` saves the number, so its graph cannot be run twice either (as torch)."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = (x * 2).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_implicit_backward_needs_a_scalar(lib: Any) -> None:
    """backward() without a gradient on a 2-element output raises RuntimeError."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(
        RuntimeError, match="grad can be implicitly created only for scalar outputs"
    ):
        (x * 2).backward()


def test_backward_on_tensor_without_graph(lib: Any) -> None:
    """backward() of a tensor that does not require grad raises RuntimeError."""
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        lib.ones(2).sum().backward()


@pytest.mark.parametrize(
    "op",
    [
        lambda x: x.add_(1),
        lambda x: x.mul_(2),
        lambda x: x.clamp_(0, 1),
        lambda x: x.zero_(),
        lambda x: x.__setitem__(0, 5.0),
    ],
    ids=["add_", "mul_", "clamp_", "zero_", "setitem"],
)
def test_inplace_on_leaf_requiring_grad(lib: Any, op: Callable[[Any], Any]) -> None:
    """In-place ops on a leaf that requires grad raise RuntimeError and leave it unchanged."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used"):
        op(x)
    assert x.tolist() == [1.0, 2.0]


def test_inplace_on_leaf_allowed_under_no_grad(lib: Any) -> None:
    """Under no_grad the same in-place op on a leaf is allowed (how optimizers update)."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    with lib.no_grad():
        x.add_(1)
        x[0] = 10.0
    assert x.tolist() == [10.0, 3.0]


@pytest.mark.parametrize(
    "modify",
    [
        lambda y: y.add_(1),
        lambda y: y.mul_(2),
        lambda y: y.__setitem__(0, 0.0),
    ],
    ids=["add_", "mul_", "setitem"],
)
@pytest.mark.parametrize(
    "op",
    [lambda x: x.exp(), lambda x: x.tanh(), lambda x: x.sigmoid(), lambda x: x.sqrt()],
    ids=["exp", "tanh", "sigmoid", "sqrt"],
)
def test_modified_saved_output_fails_at_backward(
    lib: Any, op: Callable[[Any], Any], modify: Callable[[Any], Any]
) -> None:
    """Writing in place into an output its node saved makes backward raise RuntimeError."""
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = op(x)
    modify(y)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_modified_saved_output_through_view_under_no_grad(lib: Any) -> None:
    """A no_grad write through a view of a saved output is caught at backward too."""
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.exp()
    with lib.no_grad():
        y[1:].mul_(0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_modified_saved_input_fails_at_backward(lib: Any) -> None:
    """Changing a tensor that a later op saved as input makes backward raise RuntimeError."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    z = y * y
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_inplace_on_output_nobody_saved_is_fine(lib: Any) -> None:
    """An in-place op on an output whose node kept nothing backpropagates normally."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x + 1
    y.mul_(3)
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


@pytest.mark.parametrize(
    ("program", "grad"),
    [
        (lambda x, w: x @ w, 4.0),
        (lambda x, w: x.mm(w), 4.0),
        (lambda x, w: x * w, 2.0),
        (lambda x, w: w / x, 0.5),
    ],
    ids=["matmul", "mm", "mul", "div"],
)
def test_step_on_operand_backward_does_not_read(
    lib: Any, program: Callable[..., Any], grad: float
) -> None:
    """Stepping ``w`` in place before backward is fine when its gradient reads only ``x``."""
    x = lib.full((2, 2), 2.0)
    w = lib.ones(2, 2, requires_grad=True)
    loss = program(x, w).sum()
    with lib.no_grad():
        w.mul_(0.5)
    loss.backward()
    assert w.grad.tolist() == [[grad, grad], [grad, grad]]


def test_split_sizes_must_sum(lib: Any) -> None:
    """split with sizes not adding up to the dim raises RuntimeError naming them."""
    with pytest.raises(RuntimeError, match=r"sum exactly to 3 .*split_sizes=\[1, 1\]"):
        lib.ones(2, 3).split([1, 1], 1)


def test_reshape_to_invalid_size(lib: Any) -> None:
    """reshape to a shape of another size raises RuntimeError naming shape and size."""
    with pytest.raises(RuntimeError, match=r"shape '\[4, 2\]' is invalid for input of size 6"):
        lib.ones(2, 3).reshape(4, 2)


def test_view_of_non_contiguous(lib: Any) -> None:
    """view that would need a copy raises RuntimeError pointing to reshape."""
    with pytest.raises(RuntimeError, match=r"view size is not compatible.*Use \.reshape"):
        lib.ones(2, 3).T.view(6)


@pytest.mark.parametrize(
    "op",
    [
        lambda L, x: x.sum(2),
        lambda L, x: x.mean(-3),
        lambda L, x: x.softmax(2),
        lambda L, x: x.log_softmax(-3),
        lambda L, x: x.transpose(0, 2),
        lambda L, x: x.squeeze(2),
        lambda L, x: x.max(2),
        lambda L, x: x.amax(2),
        lambda L, x: x.var(2),
        lambda L, x: x.norm(dim=2),
        lambda L, x: x.prod(2),
        lambda L, x: x.logsumexp(2),
        lambda L, x: x.split(1, 2),
        lambda L, x: x.unbind(2),
        lambda L, x: x.flatten(0, 2),
        lambda L, x: x.permute(0, 2),
        lambda L, x: x.gather(2, L.zeros(2, 3, dtype=L.int64)),
        lambda L, x: L.cat([x, x], 2),
    ],
)
def test_out_of_range_dim(lib: Any, op: Callable[..., Any]) -> None:
    """A dim outside [-2, 1] of a 2-D tensor raises IndexError giving the valid range."""
    with pytest.raises(
        IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\]"
    ):
        op(lib, lib.ones(2, 3))


def test_out_of_range_dim_counts_the_new_dim(lib: Any) -> None:
    """unsqueeze and stack accept one more dim than the input has, and no further."""
    x = lib.ones(2, 3)
    with pytest.raises(IndexError, match=r"range of \[-3, 2\], but got 3"):
        x.unsqueeze(3)
    with pytest.raises(IndexError, match=r"range of \[-3, 2\], but got -4"):
        lib.stack([x, x], -4)


def test_index_out_of_bounds(lib: Any) -> None:
    """Indexing past the end raises IndexError naming index, dimension and size."""
    x = lib.ones(2, 3)
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 2"):
        x[5]
    with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 1 with size 3"):
        x[0, 7]


def test_shape_op_errors(lib: Any) -> None:
    """expand, cat, stack and permute mismatches raise RuntimeError naming the sizes."""
    with pytest.raises(
        RuntimeError,
        match=r"expanded size of the tensor \(4\) must match the existing size \(3\) at non-singleton dimension 1",
    ):
        lib.ones(3).expand(2, 4)
    with pytest.raises(RuntimeError, match="Expected size 3 but got size 4 for tensor number 1"):
        lib.cat([lib.ones(2, 3), lib.ones(2, 4)])
    with pytest.raises(RuntimeError, match=r"got \[2\] at entry 0 and \[3\] at entry 1"):
        lib.stack([lib.ones(2), lib.ones(3)])
    with pytest.raises(RuntimeError, match=r"input.dim\(\) = 2 is not equal to len\(dims\) = 3"):
        lib.ones(2, 3).permute(0, 1, 2)
    with pytest.raises(RuntimeError, match="chunk expects `chunks` to be greater than 0"):
        lib.ones(2).chunk(0)


def test_op_argument_errors(lib: Any) -> None:
    """clamp without bounds, non-bool masks, mismatched gather index and item() of many fail."""
    x = lib.ones(2, 3)
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max' must not be None"):
        x.clamp()
    with pytest.raises(RuntimeError, match="masked_fill_ only supports boolean masks"):
        x.masked_fill(x, 0.0)
    with pytest.raises(RuntimeError, match="Index tensor must have the same number of dimensions"):
        x.gather(1, lib.zeros(2, dtype=lib.int64))
    with pytest.raises(
        RuntimeError, match="a Tensor with 6 elements cannot be converted to Scalar"
    ):
        x.item()
    with pytest.raises(RuntimeError, match=r"mean\(\): could not infer output dtype"):
        lib.tensor([1, 2]).mean()
    with pytest.raises(RuntimeError, match=r"(?i)only Tensors of floating point"):
        lib.tensor([1, 2], requires_grad=True)


def test_gelu_rejects_unknown_approximation() -> None:
    """gelu(approximate=) accepts only 'none' and 'tanh'."""
    from hookgrad._ops.unary import gelu

    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh"):
        gelu(hookgrad.ones(2), approximate="erf")


@pytest.mark.parametrize(
    ("dtype", "grad_dtype", "names"),
    [
        ("float32", "float64", ("double", "Float")),
        ("float64", "float32", ("float", "Double")),
        ("float32", "int64", ("long int", "Float")),
        ("float16", "float32", ("float", "Half")),
    ],
)
def test_grad_of_another_dtype_is_refused(
    lib: Any, dtype: str, grad_dtype: str, names: tuple[str, str]
) -> None:
    """Assigning ``.grad`` checks the dtype first, naming both dtypes as torch spells them."""
    p = lib.zeros(3, dtype=getattr(lib, dtype))
    with pytest.raises(RuntimeError) as raised:
        p.grad = lib.zeros(2, dtype=getattr(lib, grad_dtype))
    given, expected = names
    assert str(raised.value).startswith(
        f"attempting to assign a gradient with dtype '{given}' to a tensor with grad_dtype "
        f"'{expected}'. The gradient must match the tensor's grad_dtype"
    )
    assert p.grad is None


def test_grad_of_another_size_is_refused(lib: Any) -> None:
    p = lib.zeros(3)
    with pytest.raises(RuntimeError) as raised:
        p.grad = lib.zeros(2, 1)
    assert str(raised.value) == (
        "attempting to assign a gradient of size '[2, 1]' to a tensor of size '[3]'. Please "
        "ensure that the gradient and the tensor are the same size"
    )


@pytest.mark.parametrize(
    ("dtype", "kind"), [("float64", "DoubleTensor"), ("float16", "HalfTensor")]
)
def test_inplace_error_names_the_tensor_type(lib: Any, dtype: str, kind: str) -> None:
    """The modified tensor is named by its torch type, e.g. ``[torch.DoubleTensor [2]]``."""
    x = lib.tensor([1.0, 2.0], dtype=getattr(lib, dtype), requires_grad=True)
    y = x * 1
    z = y * y
    y.add_(1)
    with pytest.raises(RuntimeError, match=rf"\[\w+\.{kind} \[2\]\], which is output 0 of"):
        z.sum().backward()


# ---------------------------------------------------------------------- non-tensor arguments
@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda L: L.add(L.ones(2), [1.0, 2.0]),
            r"add\(\): argument 'other' (\(position 2\) )?must be Tensor, not list",
        ),
        (
            lambda L: L.ones(2).mul("x"),
            r"mul\(\): argument 'other' (\(position 1\) )?must be Tensor, not str",
        ),
        (
            lambda L: L.matmul(L.ones(2, 2), "abc"),
            r"matmul\(\): argument 'other' (\(position 2\) )?must be Tensor, not str",
        ),
        (
            lambda L: L.relu(None),
            r"^relu\(\): argument 'input' \(position 1\) must be Tensor, not NoneType$",
        ),
        (
            lambda L: L.exp([1.0]),
            r"^exp\(\): argument 'input' \(position 1\) must be Tensor, not list$",
        ),
        (
            lambda L: L.sum(None),
            r"^sum\(\): argument 'input' \(position 1\) must be Tensor, not NoneType$",
        ),
        (
            lambda L: L.tanh(3),
            r"^tanh\(\): argument 'input' \(position 1\) must be Tensor, not int$",
        ),
        (
            lambda L: L.nn.functional.relu(None),
            r"^relu\(\): argument 'input' \(position 1\) must be Tensor, not NoneType$",
        ),
        (
            lambda L: L.nn.functional.linear([1.0, 2.0], L.ones(1, 2)),
            r"^linear\(\): argument 'input' \(position 1\) must be Tensor, not list$",
        ),
        (
            lambda L: L.cat([[1.0], [2.0]]),
            r"^expected Tensor as element 0 in argument 0, but got list$",
        ),
        (
            lambda L: L.stack([L.ones(1), None]),
            r"^expected Tensor as element 1 in argument 0, but got NoneType$",
        ),
    ],
    ids=[
        "add-list",
        "mul-str",
        "matmul-str",
        "relu-None",
        "exp-list",
        "sum-None",
        "tanh-int",
        "F.relu-None",
        "F.linear-list",
        "cat-lists",
        "stack-None",
    ],
)
def test_a_non_tensor_argument_is_a_type_error(
    lib: Any, call: Callable[[Any], Any], message: str
) -> None:
    """Where an op needs a Tensor, anything else (a list, a string, None, a number) raises
    TypeError naming the op, the argument and the type given, as torch's argument parser."""
    with pytest.raises(TypeError, match=message):
        call(lib)


@pytest.mark.parametrize("other", [None, [1.0, 2.0], "x"], ids=["None", "list", "str"])
def test_an_operator_with_a_non_tensor_is_a_type_error(lib: Any, other: Any) -> None:
    """``t + other`` with something neither a Tensor nor a number is a TypeError, as in torch,
    not a silent broadcast of ``np.asarray(other)``."""
    with pytest.raises(TypeError):
        lib.ones(2) + other
