"""karpathy/makemore, the bigram lecture (makemore part 1), neural-net version: one-hot
inputs, a 27x27 weight matrix, softmax by exp/normalise, the negative log likelihood with L2
regularisation, gradient descent on W.data, then sampling with torch.multinomial and a
seeded generator (shrunk: a dozen names, 50 steps, 5 samples)."""


def main(torch):
    import torch.nn.functional as F

    words = ["emma", "olivia", "ava", "isabella", "sophia", "charlotte", "mia", "amelia",
             "harper", "evelyn", "abigail", "emily"]  # fmt: skip
    chars = sorted(set("".join(words)))
    stoi = {s: i + 1 for i, s in enumerate(chars)}
    stoi["."] = 0
    itos = {i: s for s, i in stoi.items()}
    xs, ys = [], []
    for w in words:
        chs = ["."] + list(w) + ["."]
        for ch1, ch2 in zip(chs, chs[1:]):
            xs.append(stoi[ch1])
            ys.append(stoi[ch2])
    xs = torch.tensor(xs)
    ys = torch.tensor(ys)
    num = xs.nelement()
    V = len(stoi)
    g = torch.Generator().manual_seed(2147483647)
    W = torch.randn((V, V), generator=g, requires_grad=True)
    losses = []
    for k in range(50):
        xenc = F.one_hot(xs, num_classes=V).float()
        logits = xenc @ W
        counts = logits.exp()
        probs = counts / counts.sum(1, keepdims=True)
        loss = -probs[torch.arange(num), ys].log().mean() + 0.01 * (W**2).mean()
        losses.append(loss.item())
        W.grad = None
        loss.backward()
        W.data += -50 * W.grad
    g = torch.Generator().manual_seed(2147483647)
    names = []
    for i in range(5):
        out = []
        ix = 0
        while True:
            xenc = F.one_hot(torch.tensor([ix]), num_classes=V).float()
            logits = xenc @ W
            counts = logits.exp()
            p = counts / counts.sum(1, keepdims=True)
            ix = torch.multinomial(p, num_samples=1, replacement=True, generator=g).item()
            out.append(itos[ix])
            if ix == 0 or len(out) > 20:
                break
        names.append("".join(out))
    return losses, names
