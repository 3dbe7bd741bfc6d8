"""L1aoXingyu/pytorch-beginner, 08-AutoEncoder/simple_autoencoder.py: a fully connected
autoencoder (Linear-ReLU encoder to 3 units, decoder back through Tanh), MSELoss, Adam with
weight_decay (shrunk: 64 random 28x28 images in [-1, 1], 3 epochs of 4 batches)."""


def main(torch):
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)

    class autoencoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(
                nn.Linear(28 * 28, 128), nn.ReLU(True), nn.Linear(128, 64), nn.ReLU(True),
                nn.Linear(64, 12), nn.ReLU(True), nn.Linear(12, 3),
            )  # fmt: skip
            self.decoder = nn.Sequential(
                nn.Linear(3, 12), nn.ReLU(True), nn.Linear(12, 64), nn.ReLU(True),
                nn.Linear(64, 128), nn.ReLU(True), nn.Linear(128, 28 * 28), nn.Tanh(),
            )  # fmt: skip

        def forward(self, x):
            x = self.encoder(x)
            x = self.decoder(x)
            return x

    images = torch.rand(64, 28 * 28) * 2 - 1
    dataloader = DataLoader(TensorDataset(images), batch_size=16, shuffle=True)
    model = autoencoder()
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-5)
    history = []
    for epoch in range(3):
        for (img,) in dataloader:
            output = model(img)
            loss = criterion(output, img)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        history.append(loss.item())
    return history
