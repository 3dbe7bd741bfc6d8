"""pytorch/examples, super_resolution/model.py and main.py @77f55b9: the sub-pixel CNN (Conv2d with
tuple kernel/stride/padding, nn.PixelShuffle, init.orthogonal_ with init.calculate_gain('relu')),
MSELoss, Adam, PSNR through math.log10 under no_grad (shrunk: 4 random 8x8 "images" upscaled
by 2 to 16x16, batch 4, 2 epochs)."""


def main(torch):
    from math import log10

    import torch.nn as nn
    import torch.nn.init as init
    import torch.optim as optim

    class Net(nn.Module):
        def __init__(self, upscale_factor):
            super(Net, self).__init__()
            self.relu = nn.ReLU()
            self.conv1 = nn.Conv2d(1, 64, (5, 5), (1, 1), (2, 2))
            self.conv2 = nn.Conv2d(64, 64, (3, 3), (1, 1), (1, 1))
            self.conv3 = nn.Conv2d(64, 32, (3, 3), (1, 1), (1, 1))
            self.conv4 = nn.Conv2d(32, upscale_factor**2, (3, 3), (1, 1), (1, 1))
            self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
            self._initialize_weights()

        def forward(self, x):
            x = self.relu(self.conv1(x))
            x = self.relu(self.conv2(x))
            x = self.relu(self.conv3(x))
            x = self.pixel_shuffle(self.conv4(x))
            return x

        def _initialize_weights(self):
            init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
            init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
            init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
            init.orthogonal_(self.conv4.weight)

    torch.manual_seed(123)
    device = torch.device("cpu")
    targets = torch.rand(6, 1, 16, 16)
    inputs = torch.nn.functional.avg_pool2d(targets, 2)
    training_data_loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(inputs[:4], targets[:4]), batch_size=4, shuffle=True
    )
    testing_data_loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(inputs[4:], targets[4:]), batch_size=4, shuffle=False
    )
    model = Net(upscale_factor=2).to(device)
    criterion = nn.MSELoss()
    optimizer = optim.Adam(model.parameters(), lr=0.01)
    out = []

    def train(epoch):
        epoch_loss = 0
        for iteration, batch in enumerate(training_data_loader, 1):
            input, target = batch[0].to(device), batch[1].to(device)
            optimizer.zero_grad()
            loss = criterion(model(input), target)
            epoch_loss += loss.item()
            loss.backward()
            optimizer.step()
            out.append(loss.item())
        out.append(epoch_loss / len(training_data_loader))

    def test():
        avg_psnr = 0
        with torch.no_grad():
            for batch in testing_data_loader:
                input, target = batch[0].to(device), batch[1].to(device)
                prediction = model(input)
                mse = criterion(prediction, target)
                psnr = 10 * log10(1 / mse.item())
                avg_psnr += psnr
        out.append(avg_psnr / len(testing_data_loader))

    for epoch in range(1, 3):
        train(epoch)
        test()
    return out
