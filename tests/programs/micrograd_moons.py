"""karpathy/micrograd, demo.ipynb, written in torch: an MLP (2-16-16-1, ReLU) on two moons
with the max-margin loss, L2 regularisation and a decaying learning rate (shrunk: 40 points,
30 steps; the moons are drawn with torch instead of sklearn)."""

import math


def main(torch):
    torch.manual_seed(1337)
    n = 40
    angle = torch.rand(n) * math.pi
    upper = torch.stack([torch.cos(angle), torch.sin(angle)], 1)
    lower = torch.stack([1 - torch.cos(angle), 0.5 - torch.sin(angle)], 1)
    X = torch.cat([upper[: n // 2], lower[n // 2 :]]) + 0.1 * torch.randn(n, 2)
    y = torch.cat([torch.ones(n // 2), -torch.ones(n // 2)])
    model = torch.nn.Sequential(
        torch.nn.Linear(2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16), torch.nn.ReLU(),
        torch.nn.Linear(16, 1),
    )  # fmt: skip

    def loss():
        scores = model(X).squeeze(1)
        data_loss = torch.relu(1 + -y * scores).mean()
        alpha = 1e-4
        reg_loss = alpha * sum((p * p).sum() for p in model.parameters())
        accuracy = ((y > 0) == (scores > 0)).float().mean()
        return data_loss + reg_loss, accuracy

    history = []
    for k in range(30):
        total_loss, acc = loss()
        model.zero_grad()
        total_loss.backward()
        learning_rate = 1.0 - 0.9 * k / 100
        with torch.no_grad():
            for p in model.parameters():
                p -= learning_rate * p.grad
        history += [total_loss.item(), acc.item()]
    return history
