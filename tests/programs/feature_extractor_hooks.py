"""discuss.pytorch.org, "How can l load my best model as a feature extractor/evaluator?"
(ptrblck's get_activation forward-hook recipe, the common way to read intermediate outputs):
forward hooks storing each named layer's output in a dict, read after a forward of a small
CNN (shrunk: one batch of 4 random 1x12x12 images, three layers hooked)."""


def main(torch):
    from torch import nn

    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.cl1 = nn.Conv2d(1, 4, 3)
            self.cl2 = nn.Conv2d(4, 8, 3)
            self.fc1 = nn.Linear(8 * 8 * 8, 16)
            self.fc2 = nn.Linear(16, 3)

        def forward(self, x):
            x = torch.relu(self.cl1(x))
            x = torch.relu(self.cl2(x))
            x = x.view(x.size(0), -1)
            x = torch.relu(self.fc1(x))
            return self.fc2(x)

    activation = {}

    def get_activation(name):
        def hook(model, input, output):
            activation[name] = output.detach()

        return hook

    model = Net()
    handles = [
        model.cl1.register_forward_hook(get_activation("cl1")),
        model.cl2.register_forward_hook(get_activation("cl2")),
        model.fc1.register_forward_hook(get_activation("fc1")),
    ]
    x = torch.randn(4, 1, 12, 12)
    output = model(x)
    for handle in handles:
        handle.remove()
    model(x)  # no hook any more: the stored activations stay those of the first call
    return {
        "output": output.detach().reshape(-1).tolist(),
        **{
            name: [float(a.sum()), float(a.abs().max()), *a.shape] for name, a in activation.items()
        },
    }
