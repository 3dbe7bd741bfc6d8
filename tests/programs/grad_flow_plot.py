"""discuss.pytorch.org, "Check gradient flow in network" (RoshanRane's plot_grad_flow, widely
copied): after backward, the mean and max of |grad| of every parameter that is not a bias,
per layer, collected for plotting (shrunk: the statistics without matplotlib, a 6-layer MLP
with sigmoid activations, 5 steps)."""


def main(torch):
    from torch import nn

    def plot_grad_flow(named_parameters):
        ave_grads = []
        max_grads = []
        layers = []
        for n, p in named_parameters:
            if p.requires_grad and ("bias" not in n):
                layers.append(n)
                ave_grads.append(p.grad.abs().mean().item())
                max_grads.append(p.grad.abs().max().item())
        return layers, ave_grads, max_grads

    torch.manual_seed(0)
    layers = []
    for i in range(6):
        layers += [nn.Linear(16, 16), nn.Sigmoid()]
    model = nn.Sequential(*layers, nn.Linear(16, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(32, 16), torch.randn(32, 1)
    history = []
    for step in range(5):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        names, ave, mx = plot_grad_flow(model.named_parameters())
        history += [loss.item(), *ave, *mx]
        optimizer.step()
    assert names[0] == "0.weight"
    return history
