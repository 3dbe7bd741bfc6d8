"""karpathy/minGPT, mingpt/model.py, mingpt/trainer.py and projects/chargpt/chargpt.py @37baab7:
the GPT (NewGELU, CausalSelfAttention with a tril buffer and masked_fill, ModuleDict blocks,
_init_weights through apply, configure_optimizers' decay/no-decay AdamW groups), the Trainer's
loop (RandomSampler with replacement and 1e10 samples, zero_grad(set_to_none=True),
clip_grad_norm_) and CharDataset, then generate with top_k and multinomial sampling (shrunk:
n_layer=2, n_head=2, n_embd=16, block_size 16, a 300-character text, 12 iterations)."""


def main(torch):
    import math
    import random

    import numpy as np
    import torch.nn as nn
    from torch.nn import functional as F
    from torch.utils.data import Dataset
    from torch.utils.data.dataloader import DataLoader

    class CN:
        """a lightweight configuration class inspired by yacs"""

        def __init__(self, **kwargs):
            self.__dict__.update(kwargs)

        def merge_from_dict(self, d):
            self.__dict__.update(d)

    def set_seed(seed):
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        torch.cuda.manual_seed_all(seed)

    class NewGELU(nn.Module):
        """
        Implementation of the GELU activation function currently in Google BERT repo (identical to OpenAI GPT).
        Reference: Gaussian Error Linear Units (GELU) paper: https://arxiv.org/abs/1606.08415
        """

        def forward(self, x):
            return (
                0.5
                * x
                * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
            )

    class CausalSelfAttention(nn.Module):
        """
        A vanilla multi-head masked self-attention layer with a projection at the end.
        It is possible to use torch.nn.MultiheadAttention here but I am including an
        explicit implementation here to show that there is nothing too scary here.
        """

        def __init__(self, config):
            super().__init__()
            assert config.n_embd % config.n_head == 0
            self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
            self.c_proj = nn.Linear(config.n_embd, config.n_embd)
            self.attn_dropout = nn.Dropout(config.attn_pdrop)
            self.resid_dropout = nn.Dropout(config.resid_pdrop)
            self.register_buffer(
                "bias",
                torch.tril(torch.ones(config.block_size, config.block_size)).view(
                    1, 1, config.block_size, config.block_size
                ),
            )
            self.n_head = config.n_head
            self.n_embd = config.n_embd

        def forward(self, x):
            B, T, C = x.size()  # batch size, sequence length, embedding dimensionality (n_embd)

            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)

            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
            y = (
                y.transpose(1, 2).contiguous().view(B, T, C)
            )  # re-assemble all head outputs side by side

            y = self.resid_dropout(self.c_proj(y))
            return y

    class Block(nn.Module):
        """an unassuming Transformer block"""

        def __init__(self, config):
            super().__init__()
            self.ln_1 = nn.LayerNorm(config.n_embd)
            self.attn = CausalSelfAttention(config)
            self.ln_2 = nn.LayerNorm(config.n_embd)
            self.mlp = nn.ModuleDict(
                dict(
                    c_fc=nn.Linear(config.n_embd, 4 * config.n_embd),
                    c_proj=nn.Linear(4 * config.n_embd, config.n_embd),
                    act=NewGELU(),
                    dropout=nn.Dropout(config.resid_pdrop),
                )
            )
            m = self.mlp
            self.mlpf = lambda x: m.dropout(m.c_proj(m.act(m.c_fc(x))))  # MLP forward

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            x = x + self.mlpf(self.ln_2(x))
            return x

    class GPT(nn.Module):
        """GPT Language Model"""

        @staticmethod
        def get_default_config():
            C = CN()
            C.model_type = "gpt"
            C.n_layer = None
            C.n_head = None
            C.n_embd = None
            C.vocab_size = None
            C.block_size = None
            C.embd_pdrop = 0.1
            C.resid_pdrop = 0.1
            C.attn_pdrop = 0.1
            return C

        def __init__(self, config):
            super().__init__()
            assert config.vocab_size is not None
            assert config.block_size is not None
            self.block_size = config.block_size

            type_given = config.model_type is not None
            params_given = all(
                [config.n_layer is not None, config.n_head is not None, config.n_embd is not None]
            )
            assert type_given ^ params_given  # exactly one of these (XOR)
            if type_given:
                config.merge_from_dict(
                    {
                        "openai-gpt": dict(n_layer=12, n_head=12, n_embd=768),  # 117M params
                        "gpt2": dict(n_layer=12, n_head=12, n_embd=768),  # 124M params
                        "gpt2-medium": dict(n_layer=24, n_head=16, n_embd=1024),  # 350M params
                        "gpt2-large": dict(n_layer=36, n_head=20, n_embd=1280),  # 774M params
                        "gpt2-xl": dict(n_layer=48, n_head=25, n_embd=1600),  # 1558M params
                        "gopher-44m": dict(n_layer=8, n_head=16, n_embd=512),
                        "gpt-mini": dict(n_layer=6, n_head=6, n_embd=192),
                        "gpt-micro": dict(n_layer=4, n_head=4, n_embd=128),
                        "gpt-nano": dict(n_layer=3, n_head=3, n_embd=48),
                    }[config.model_type]
                )

            self.transformer = nn.ModuleDict(
                dict(
                    wte=nn.Embedding(config.vocab_size, config.n_embd),
                    wpe=nn.Embedding(config.block_size, config.n_embd),
                    drop=nn.Dropout(config.embd_pdrop),
                    h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                    ln_f=nn.LayerNorm(config.n_embd),
                )
            )
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)

            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith("c_proj.weight"):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

            n_params = sum(p.numel() for p in self.transformer.parameters())

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            elif isinstance(module, nn.LayerNorm):
                torch.nn.init.zeros_(module.bias)
                torch.nn.init.ones_(module.weight)

        def configure_optimizers(self, train_config):
            """
            This long function is unfortunately doing something very simple and is being very defensive:
            We are separating out all parameters of the model into two buckets: those that will experience
            weight decay for regularization and those that won't (biases, and layernorm/embedding weights).
            We are then returning the PyTorch optimizer object.
            """

            decay = set()
            no_decay = set()
            whitelist_weight_modules = (torch.nn.Linear,)
            blacklist_weight_modules = (torch.nn.LayerNorm, torch.nn.Embedding)
            for mn, m in self.named_modules():
                for pn, p in m.named_parameters():
                    fpn = "%s.%s" % (mn, pn) if mn else pn  # full param name
                    if pn.endswith("bias"):
                        no_decay.add(fpn)
                    elif pn.endswith("weight") and isinstance(m, whitelist_weight_modules):
                        decay.add(fpn)
                    elif pn.endswith("weight") and isinstance(m, blacklist_weight_modules):
                        no_decay.add(fpn)

            param_dict = {pn: p for pn, p in self.named_parameters()}
            inter_params = decay & no_decay
            union_params = decay | no_decay
            assert len(inter_params) == 0, (
                "parameters %s made it into both decay/no_decay sets!" % (str(inter_params),)
            )
            assert len(param_dict.keys() - union_params) == 0, (
                "parameters %s were not separated into either decay/no_decay set!"
                % (str(param_dict.keys() - union_params),)
            )

            optim_groups = [
                {
                    "params": [param_dict[pn] for pn in sorted(list(decay))],
                    "weight_decay": train_config.weight_decay,
                },
                {"params": [param_dict[pn] for pn in sorted(list(no_decay))], "weight_decay": 0.0},
            ]
            optimizer = torch.optim.AdamW(
                optim_groups, lr=train_config.learning_rate, betas=train_config.betas
            )
            return optimizer

        def forward(self, idx, targets=None):
            device = idx.device
            b, t = idx.size()
            assert t <= self.block_size, (
                f"Cannot forward sequence of length {t}, block size is only {self.block_size}"
            )
            pos = torch.arange(0, t, dtype=torch.long, device=device).unsqueeze(0)  # shape (1, t)

            tok_emb = self.transformer.wte(idx)  # token embeddings of shape (b, t, n_embd)
            pos_emb = self.transformer.wpe(pos)  # position embeddings of shape (1, t, n_embd)
            x = self.transformer.drop(tok_emb + pos_emb)
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            logits = self.lm_head(x)

            loss = None
            if targets is not None:
                loss = F.cross_entropy(
                    logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1
                )

            return logits, loss

        @torch.no_grad()
        def generate(self, idx, max_new_tokens, temperature=1.0, do_sample=False, top_k=None):
            """
            Take a conditioning sequence of indices idx (LongTensor of shape (b,t)) and complete
            the sequence max_new_tokens times, feeding the predictions back into the model each time.
            Most likely you'll want to make sure to be in model.eval() mode of operation for this.
            """
            for _ in range(max_new_tokens):
                idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size :]
                logits, _ = self(idx_cond)
                logits = logits[:, -1, :] / temperature
                if top_k is not None:
                    v, _ = torch.topk(logits, top_k)
                    logits[logits < v[:, [-1]]] = -float("Inf")
                probs = F.softmax(logits, dim=-1)
                if do_sample:
                    idx_next = torch.multinomial(probs, num_samples=1)
                else:
                    _, idx_next = torch.topk(probs, k=1, dim=-1)
                idx = torch.cat((idx, idx_next), dim=1)

            return idx

    class CharDataset(Dataset):
        """
        Emits batches of characters
        """

        def __init__(self, config, data):
            self.config = config
            chars = sorted(list(set(data)))
            data_size, vocab_size = len(data), len(chars)
            self.stoi = {ch: i for i, ch in enumerate(chars)}
            self.itos = {i: ch for i, ch in enumerate(chars)}
            self.vocab_size = vocab_size
            self.data = data

        def get_vocab_size(self):
            return self.vocab_size

        def get_block_size(self):
            return self.config.block_size

        def __len__(self):
            return len(self.data) - self.config.block_size

        def __getitem__(self, idx):
            chunk = self.data[idx : idx + self.config.block_size + 1]
            dix = [self.stoi[s] for s in chunk]
            x = torch.tensor(dix[:-1], dtype=torch.long)
            y = torch.tensor(dix[1:], dtype=torch.long)
            return x, y

    set_seed(3407)
    text = (
        "First Citizen: Before we proceed any further, hear me speak. All: Speak, speak. "
        "First Citizen: You are all resolved rather to die than to famish? All: Resolved. "
        "resolved. First Citizen: First, you know Caius Marcius is chief enemy to the people. "
        "All: We know't, we know't. First Citizen: Let us kill him, and we'll have corn at "
        "our own price."
    )
    train_dataset = CharDataset(CN(block_size=16), text)
    mconf = GPT.get_default_config()
    mconf.model_type = None
    mconf.merge_from_dict(dict(n_layer=2, n_head=2, n_embd=16))
    mconf.vocab_size = train_dataset.get_vocab_size()
    mconf.block_size = train_dataset.get_block_size()
    model = GPT(mconf)
    config = CN(
        device="cpu",
        num_workers=0,
        max_iters=12,
        batch_size=8,
        learning_rate=5e-4,
        betas=(0.9, 0.95),
        weight_decay=0.1,
        grad_norm_clip=1.0,
    )
    optimizer = model.configure_optimizers(config)
    train_loader = DataLoader(
        train_dataset,
        sampler=torch.utils.data.RandomSampler(
            train_dataset, replacement=True, num_samples=int(1e10)
        ),
        shuffle=False,
        pin_memory=True,
        batch_size=config.batch_size,
        num_workers=config.num_workers,
    )
    model.train()
    iter_num = 0
    data_iter = iter(train_loader)
    losses = []
    while True:
        try:
            batch = next(data_iter)
        except StopIteration:
            data_iter = iter(train_loader)
            batch = next(data_iter)
        batch = [t.to(config.device) for t in batch]
        x, y = batch
        logits, loss = model(x, y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_norm_clip)
        optimizer.step()
        losses.append(loss.item())
        iter_num += 1
        if config.max_iters is not None and iter_num >= config.max_iters:
            break
    model.eval()
    with torch.no_grad():
        context = "First"
        x = torch.tensor([train_dataset.stoi[s] for s in context], dtype=torch.long)[None, ...].to(
            "cpu"
        )
        y = model.generate(x, 30, temperature=1.0, do_sample=True, top_k=10)[0]
        completion = "".join([train_dataset.itos[int(i)] for i in y])
    return losses + [completion]
