"""pytorch/tutorials, beginner_source/examples_tensor/polynomial_tensor.py: fit a third-order
polynomial to sin(x) with tensors and hand-written gradients (shrunk: 200 steps, 200 points)."""

import math


def main(torch):
    dtype = torch.float
    torch.manual_seed(0)
    x = torch.linspace(-math.pi, math.pi, 200, dtype=dtype)
    y = torch.sin(x)
    a = torch.randn((), dtype=dtype)
    b = torch.randn((), dtype=dtype)
    c = torch.randn((), dtype=dtype)
    d = torch.randn((), dtype=dtype)
    learning_rate = 1e-5
    losses = []
    for t in range(200):
        y_pred = a + b * x + c * x**2 + d * x**3
        loss = (y_pred - y).pow(2).sum().item()
        losses.append(loss)
        grad_y_pred = 2.0 * (y_pred - y)
        grad_a = grad_y_pred.sum()
        grad_b = (grad_y_pred * x).sum()
        grad_c = (grad_y_pred * x**2).sum()
        grad_d = (grad_y_pred * x**3).sum()
        a -= learning_rate * grad_a
        b -= learning_rate * grad_b
        c -= learning_rate * grad_c
        d -= learning_rate * grad_d
    return losses + [a.item(), b.item(), c.item(), d.item()]
