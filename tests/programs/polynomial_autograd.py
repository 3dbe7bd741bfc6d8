"""pytorch/tutorials, beginner_source/examples_autograd/polynomial_autograd.py: the same fit
with autograd, updating the weights under no_grad (shrunk: 200 steps, 200 points)."""

import math


def main(torch):
    dtype = torch.float
    torch.manual_seed(0)
    x = torch.linspace(-math.pi, math.pi, 200, dtype=dtype)
    y = torch.sin(x)
    a = torch.randn((), dtype=dtype, requires_grad=True)
    b = torch.randn((), dtype=dtype, requires_grad=True)
    c = torch.randn((), dtype=dtype, requires_grad=True)
    d = torch.randn((), dtype=dtype, requires_grad=True)
    learning_rate = 1e-5
    losses = []
    for t in range(200):
        y_pred = a + b * x + c * x**2 + d * x**3
        loss = (y_pred - y).pow(2).sum()
        losses.append(loss.item())
        loss.backward()
        with torch.no_grad():
            a -= learning_rate * a.grad
            b -= learning_rate * b.grad
            c -= learning_rate * c.grad
            d -= learning_rate * d.grad
            a.grad = None
            b.grad = None
            c.grad = None
            d.grad = None
    return losses + [a.item(), b.item(), c.item(), d.item()]
