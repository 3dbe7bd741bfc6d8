"""pytorch/tutorials, beginner_source/examples_nn/polynomial_nn.py: nn.Sequential(Linear,
Flatten(0, 1)) on x, x^2, x^3 with MSELoss(reduction="sum") and a hand-written update."""

import math


def main(torch):
    torch.manual_seed(0)
    x = torch.linspace(-math.pi, math.pi, 200)
    y = torch.sin(x)
    p = torch.tensor([1, 2, 3])
    xx = x.unsqueeze(-1).pow(p)
    model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
    loss_fn = torch.nn.MSELoss(reduction="sum")
    learning_rate = 1e-6
    losses = []
    for t in range(200):
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        losses.append(loss.item())
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for param in model.parameters():
                param -= learning_rate * param.grad
    linear_layer = model[0]
    return losses + [linear_layer.bias.item(), *linear_layer.weight[:, 0].tolist()]
