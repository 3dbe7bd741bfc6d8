"""pytorch/tutorials and the nn.Module docs, register_full_backward_hook: per-layer gradient
norms of grad_input and grad_output collected during training of a small MLP, as debugging
scripts do (shrunk: 4 steps of a 4-layer MLP with SGD and momentum)."""


def main(torch):
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 2)
    )
    records = []

    def hook(module, grad_input, grad_output):
        records.append(
            (
                type(module).__name__,
                [g.norm().item() for g in grad_output if g is not None],
                [g.norm().item() for g in grad_input if g is not None],
            )
        )

    handles = [m.register_full_backward_hook(hook) for m in model]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = torch.randn(16, 8), torch.randint(0, 2, (16,))
    losses = []
    for step in range(4):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    for handle in handles:
        handle.remove()
    assert [name for name, _, _ in records[:5]] == ["Linear", "Tanh", "Linear", "ReLU", "Linear"]
    return losses, [norms for _, out, inp in records for norms in (out, inp)]
