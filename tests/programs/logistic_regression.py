"""yunjey/pytorch-tutorial, tutorials/01-basics/logistic_regression/main.py, on two Gaussian
blobs instead of MNIST: nn.Linear with nn.BCEWithLogitsLoss, optim.Adam, accuracy with
torch.no_grad (shrunk: 200 points, 40 steps)."""


def main(torch):
    import torch.nn as nn

    torch.manual_seed(0)
    n = 100
    x = torch.cat([torch.randn(n, 2) + 1.5, torch.randn(n, 2) - 1.5])
    y = torch.cat([torch.ones(n, 1), torch.zeros(n, 1)])
    model = nn.Linear(2, 1)
    criterion = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    history = []
    for epoch in range(40):
        outputs = model(x)
        loss = criterion(outputs, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.append(loss.item())
    with torch.no_grad():
        predicted = (torch.sigmoid(model(x)) > 0.5).float()
        history.append((predicted == y).sum().item() / y.size(0))
    return history
