"""d2l-ai/d2l-en, chapter_linear-classification/softmax-regression-concise (PyTorch version):
nn.Sequential(nn.Flatten(), nn.Linear(784, 10)) initialised by net.apply(init_weights) with
nn.init.normal_(std=0.01), CrossEntropyLoss(reduction="none"), SGD, accuracy by argmax
(shrunk: 128 random 28x28 images, 2 epochs)."""


def main(torch):
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    images = torch.rand(128, 1, 28, 28)
    classes = torch.randint(0, 10, (128,))
    train_iter = DataLoader(TensorDataset(images, classes), batch_size=32, shuffle=True)
    net = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))

    def init_weights(m):
        if type(m) is nn.Linear:
            nn.init.normal_(m.weight, std=0.01)

    net.apply(init_weights)
    loss = nn.CrossEntropyLoss(reduction="none")
    trainer = torch.optim.SGD(net.parameters(), lr=0.1)

    def accuracy(y_hat, y):
        y_hat = y_hat.argmax(axis=1)
        cmp = y_hat.type(y.dtype) == y
        return float(cmp.type(y.dtype).sum())

    history = []
    for epoch in range(2):
        net.train()
        for X, y in train_iter:
            y_hat = net(X)
            l = loss(y_hat, y)
            trainer.zero_grad()
            l.mean().backward()
            trainer.step()
            history += [float(l.sum()), accuracy(y_hat, y)]
    return history
