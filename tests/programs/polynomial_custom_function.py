"""pytorch/tutorials, beginner_source/examples_autograd/polynomial_custom_function.py: a custom
autograd.Function (the Legendre polynomial P3) with save_for_backward."""

import math


def main(torch):
    class LegendrePolynomial3(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return 0.5 * (5 * input**3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            (input,) = ctx.saved_tensors
            return grad_output * 1.5 * (5 * input**2 - 1)

    dtype = torch.float
    torch.manual_seed(0)
    x = torch.linspace(-math.pi, math.pi, 200, dtype=dtype)
    y = torch.sin(x)
    a = torch.full((), 0.0, dtype=dtype, requires_grad=True)
    b = torch.full((), -1.0, dtype=dtype, requires_grad=True)
    c = torch.full((), 0.0, dtype=dtype, requires_grad=True)
    d = torch.full((), 0.3, dtype=dtype, requires_grad=True)
    learning_rate = 5e-6
    losses = []
    for t in range(200):
        P3 = LegendrePolynomial3.apply
        y_pred = a + b * P3(c + d * x)
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
    return losses
