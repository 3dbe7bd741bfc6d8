"""d2l-ai/d2l-en, chapter_multilayer-perceptrons/dropout (concise PyTorch version): an MLP with
two hidden layers and nn.Dropout after each, trained in train() mode and evaluated in eval()
mode (shrunk: 96 random 28x28 images, 2 epochs)."""


def main(torch):
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    dropout1, dropout2 = 0.2, 0.5
    net = nn.Sequential(
        nn.Flatten(),
        nn.Linear(784, 256),
        nn.ReLU(),
        nn.Dropout(dropout1),
        nn.Linear(256, 256),
        nn.ReLU(),
        nn.Dropout(dropout2),
        nn.Linear(256, 10),
    )

    def init_weights(m):
        if type(m) is nn.Linear:
            nn.init.normal_(m.weight, std=0.01)

    net.apply(init_weights)
    data = TensorDataset(torch.rand(96, 1, 28, 28), torch.randint(0, 10, (96,)))
    train_iter = DataLoader(data, batch_size=32, shuffle=True)
    loss = nn.CrossEntropyLoss()
    trainer = torch.optim.SGD(net.parameters(), lr=0.5)
    history = []
    for epoch in range(2):
        net.train()
        for X, y in train_iter:
            l = loss(net(X), y)
            trainer.zero_grad()
            l.backward()
            trainer.step()
            history.append(l.item())
        net.eval()
        with torch.no_grad():
            history.append(loss(net(data.tensors[0]), data.tensors[1]).item())
    return history
