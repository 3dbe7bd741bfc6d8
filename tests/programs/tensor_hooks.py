"""pytorch/pytorch docs, notes/autograd ("Backward hooks") and Tensor.register_hook's example:
a hook doubling a gradient on its way, retain_grad on intermediate tensors, and a hook that
records gradients, on a small computation and on a training step (shrunk)."""


def main(torch):
    torch.manual_seed(0)
    v = torch.tensor([0.0, 0.0, 0.0], requires_grad=True)
    h = v.register_hook(lambda grad: grad * 2)
    v.backward(torch.tensor([1.0, 2.0, 3.0]))
    first = v.grad.tolist()
    h.remove()

    x = torch.randn(5, 3, requires_grad=True)
    w = torch.randn(3, 2, requires_grad=True)
    y = x @ w
    y.retain_grad()
    z = torch.tanh(y)
    z.retain_grad()
    seen = []
    z.register_hook(lambda grad: seen.append(grad.abs().sum().item()))
    loss = (z**2).mean()
    loss.backward()
    return (
        first,
        y.grad.reshape(-1).tolist(),
        z.grad.reshape(-1).tolist(),
        seen,
        w.grad.reshape(-1).tolist(),
    )
