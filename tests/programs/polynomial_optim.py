"""pytorch/tutorials, beginner_source/examples_nn/polynomial_optim.py: the same model trained
with optim.RMSprop (shrunk: 300 steps)."""

import math


def main(torch):
    torch.manual_seed(0)
    x = torch.linspace(-math.pi, math.pi, 200)
    y = torch.sin(x)
    p = torch.tensor([1, 2, 3])
    xx = x.unsqueeze(-1).pow(p)
    model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
    loss_fn = torch.nn.MSELoss(reduction="sum")
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    losses = []
    for t in range(300):
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return losses
