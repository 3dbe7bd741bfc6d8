"""d2l-ai/d2l-en, chapter_linear-regression/linear-regression-concise (PyTorch version):
TensorDataset and a shuffled DataLoader, nn.Sequential(nn.Linear(2, 1)) initialised through
weight.data.normal_ and bias.data.fill_, MSELoss and optim.SGD (shrunk: 200 examples)."""


def main(torch):
    from torch import nn
    from torch.utils import data

    torch.manual_seed(0)
    true_w = torch.tensor([2, -3.4])
    true_b = 4.2
    X = torch.normal(0, 1, (200, len(true_w)))
    y = torch.matmul(X, true_w) + true_b
    y += torch.normal(0, 0.01, y.shape)
    features, labels = X, y.reshape((-1, 1))

    def load_array(data_arrays, batch_size, is_train=True):
        dataset = data.TensorDataset(*data_arrays)
        return data.DataLoader(dataset, batch_size, shuffle=is_train)

    data_iter = load_array((features, labels), 10)
    net = nn.Sequential(nn.Linear(2, 1))
    net[0].weight.data.normal_(0, 0.01)
    net[0].bias.data.fill_(0)
    loss = nn.MSELoss()
    trainer = torch.optim.SGD(net.parameters(), lr=0.03)
    history = []
    for epoch in range(3):
        for X, y in data_iter:
            l = loss(net(X), y)
            trainer.zero_grad()
            l.backward()
            trainer.step()
        l = loss(net(features), labels)
        history.append(l.item())
    return history + net[0].weight.data.reshape(-1).tolist() + net[0].bias.data.tolist()
