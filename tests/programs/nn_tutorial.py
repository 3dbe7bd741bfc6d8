"""pytorch/tutorials, beginner_source/nn_tutorial.py ("What is torch.nn really?"): logistic
regression from scratch (weights / sqrt(784), requires_grad_, a hand-written log_softmax and
nll, accuracy), then refactored with F.cross_entropy, an nn.Module with nn.Parameters,
nn.Linear, optim.SGD, TensorDataset and DataLoader (shrunk: 256 random images, 1 epoch each)."""

import math


def main(torch):
    import torch.nn.functional as F
    from torch import nn, optim
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    x_train = torch.rand(256, 784)
    y_train = torch.randint(0, 10, (256,))
    n, c = x_train.shape
    bs, lr, epochs = 64, 0.5, 1
    history = []

    weights = torch.randn(784, 10) / math.sqrt(784)
    weights.requires_grad_()
    bias = torch.zeros(10, requires_grad=True)

    def log_softmax(x):
        return x - x.exp().sum(-1).log().unsqueeze(-1)

    def model(xb):
        return log_softmax(xb @ weights + bias)

    def nll(input, target):
        return -input[range(target.shape[0]), target].mean()

    loss_func = nll

    def accuracy(out, yb):
        preds = torch.argmax(out, dim=1)
        return (preds == yb).float().mean()

    for epoch in range(epochs):
        for i in range((n - 1) // bs + 1):
            start_i = i * bs
            end_i = start_i + bs
            xb = x_train[start_i:end_i]
            yb = y_train[start_i:end_i]
            pred = model(xb)
            loss = loss_func(pred, yb)
            loss.backward()
            with torch.no_grad():
                weights -= weights.grad * lr
                bias -= bias.grad * lr
                weights.grad.zero_()
                bias.grad.zero_()
            history.append(loss.item())
    history += [loss_func(model(x_train), y_train).item(), accuracy(model(x_train), y_train).item()]

    class Mnist_Logistic(nn.Module):
        def __init__(self):
            super().__init__()
            self.weights = nn.Parameter(torch.randn(784, 10) / math.sqrt(784))
            self.bias = nn.Parameter(torch.zeros(10))

        def forward(self, xb):
            return xb @ self.weights + self.bias

    class Mnist_Linear(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(784, 10)

        def forward(self, xb):
            return self.lin(xb)

    train_ds = TensorDataset(x_train, y_train)
    train_dl = DataLoader(train_ds, batch_size=bs, shuffle=True)
    for cls in (Mnist_Logistic, Mnist_Linear):
        model = cls()
        opt = optim.SGD(model.parameters(), lr=lr)
        for epoch in range(epochs):
            for xb, yb in train_dl:
                pred = model(xb)
                loss = F.cross_entropy(pred, yb)
                loss.backward()
                opt.step()
                opt.zero_grad()
                history.append(loss.item())
    return history
