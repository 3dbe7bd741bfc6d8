"""pytorch/tutorials, beginner_source/examples_nn/dynamic_net.py: a model whose depth is drawn
with Python's random module at every forward, reusing one middle layer (weight sharing)."""

import math
import random


def main(torch):
    class DynamicNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Parameter(torch.randn(()))
            self.b = torch.nn.Parameter(torch.randn(()))
            self.c = torch.nn.Parameter(torch.randn(()))
            self.d = torch.nn.Parameter(torch.randn(()))
            self.e = torch.nn.Parameter(torch.randn(()))

        def forward(self, x):
            y = self.a + self.b * x + self.c * x**2 + self.d * x**3
            for exp in range(4, random.randint(4, 6)):
                y = y + self.e * x**exp
            return y

    torch.manual_seed(0)
    random.seed(0)
    x = torch.linspace(-math.pi, math.pi, 200)
    y = torch.sin(x)
    model = DynamicNet()
    criterion = torch.nn.MSELoss(reduction="sum")
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-8, momentum=0.9)
    losses = []
    for t in range(200):
        y_pred = model(x)
        loss = criterion(y_pred, y)
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return losses
