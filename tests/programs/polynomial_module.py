"""pytorch/tutorials, beginner_source/examples_nn/polynomial_module.py: a custom nn.Module
holding four scalar nn.Parameters, trained with SGD."""

import math


def main(torch):
    class Polynomial3(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Parameter(torch.randn(()))
            self.b = torch.nn.Parameter(torch.randn(()))
            self.c = torch.nn.Parameter(torch.randn(()))
            self.d = torch.nn.Parameter(torch.randn(()))

        def forward(self, x):
            return self.a + self.b * x + self.c * x**2 + self.d * x**3

        def string(self):
            return f"y = {self.a.item()} + {self.b.item()} x + {self.c.item()} x^2 + {self.d.item()} x^3"

    torch.manual_seed(0)
    x = torch.linspace(-math.pi, math.pi, 200)
    y = torch.sin(x)
    model = Polynomial3()
    criterion = torch.nn.MSELoss(reduction="sum")
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
    losses = []
    for t in range(200):
        y_pred = model(x)
        loss = criterion(y_pred, y)
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert model.string().startswith("y = ")
    return losses
