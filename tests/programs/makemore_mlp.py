"""karpathy/makemore, the MLP lectures (makemore parts 2 and 3, Bengio et al. 2003): a
character embedding table C, a tanh hidden layer with part 3's scaled initialisation,
cross_entropy, minibatches drawn with torch.randint and a seeded generator, a learning-rate
step (shrunk: a dozen names, 60 steps)."""


def main(torch):
    import torch.nn.functional as F

    words = ["emma", "olivia", "ava", "isabella", "sophia", "charlotte", "mia", "amelia",
             "harper", "evelyn", "abigail", "emily"]  # fmt: skip
    chars = sorted(set("".join(words)))
    stoi = {s: i + 1 for i, s in enumerate(chars)}
    stoi["."] = 0
    block_size = 3

    def build_dataset(words):
        X, Y = [], []
        for w in words:
            context = [0] * block_size
            for ch in w + ".":
                ix = stoi[ch]
                X.append(context)
                Y.append(ix)
                context = context[1:] + [ix]
        return torch.tensor(X), torch.tensor(Y)

    Xtr, Ytr = build_dataset(words)
    g = torch.Generator().manual_seed(2147483647)
    V = len(stoi)
    C = torch.randn((V, 10), generator=g)
    W1 = torch.randn((30, 200), generator=g) * (5 / 3) / (30**0.5)
    b1 = torch.randn(200, generator=g) * 0.01
    W2 = torch.randn((200, V), generator=g) * 0.01
    b2 = torch.randn(V, generator=g) * 0
    parameters = [C, W1, b1, W2, b2]
    for p in parameters:
        p.requires_grad = True
    lossi = []
    for i in range(60):
        ix = torch.randint(0, Xtr.shape[0], (32,), generator=g)
        emb = C[Xtr[ix]]
        h = torch.tanh(emb.view(-1, 30) @ W1 + b1)
        logits = h @ W2 + b2
        loss = F.cross_entropy(logits, Ytr[ix])
        for p in parameters:
            p.grad = None
        loss.backward()
        lr = 0.1 if i < 40 else 0.01
        for p in parameters:
            p.data += -lr * p.grad
        lossi.append(loss.log10().item())
    return lossi
