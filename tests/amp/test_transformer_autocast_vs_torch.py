"""Transformer models trained under CPU autocast against torch 2.13: nn.TransformerEncoderLayer,
nn.Transformer and a minGPT-style block, a few SGD steps each, give torch's losses and
float32 parameter gradients within bfloat16 precision."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import hookgrad

torch = pytest.importorskip("torch")
pytest.importorskip("ml_dtypes")

_D, _HEADS, _SEQ, _BATCH = 16, 2, 6, 3


def _encoder_layer(lib: Any) -> Any:
    return lib.nn.TransformerEncoderLayer(_D, _HEADS, 32, dropout=0.0, batch_first=True)


def _encoder_layer_norm_first_gelu(lib: Any) -> Any:
    return lib.nn.TransformerEncoderLayer(
        _D, _HEADS, 32, dropout=0.0, batch_first=True, norm_first=True, activation="gelu"
    )


def _transformer(lib: Any) -> Any:
    return lib.nn.Transformer(
        _D, _HEADS, 1, 1, 32, dropout=0.0, batch_first=True, activation="gelu"
    )  # relu gates flip on bfloat16 near-ties and move later steps apart


def _gpt_block(lib: Any) -> Any:
    """minGPT's Block: pre-norm causal self-attention and a GELU MLP, each a residual."""
    nn = lib.nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(_D), nn.LayerNorm(_D)
            self.c_attn, self.c_proj = nn.Linear(_D, 3 * _D), nn.Linear(_D, _D)
            self.mlp = nn.Sequential(nn.Linear(_D, 4 * _D), nn.GELU(), nn.Linear(4 * _D, _D))

        def attention(self, x: Any) -> Any:
            b, t, c = x.size()
            q, k, v = self.c_attn(x).split(_D, dim=2)
            q, k, v = (z.view(b, t, _HEADS, c // _HEADS).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / (k.size(-1) ** 0.5))
            mask = lib.tril(lib.ones(t, t)).view(1, 1, t, t)
            att = lib.nn.functional.softmax(att.masked_fill(mask == 0, float("-inf")), dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
            return self.c_proj(y)

        def forward(self, x: Any) -> Any:
            x = x + self.attention(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    return Block()


def _vit(lib: Any) -> Any:
    """A ViT-style model: a patch-embedding convolution followed by a LayerNorm (which so
    sees bfloat16 input with float32 parameters under autocast), then an encoder layer."""
    nn = lib.nn

    class TinyViT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.patch = nn.Conv2d(3, _D, 4, stride=4)
            self.norm = nn.LayerNorm(_D)
            self.encoder = _encoder_layer_norm_first_gelu(lib)
            self.head = nn.Sequential(nn.Linear(_D, _D), nn.LayerNorm(_D))

        def forward(self, images: Any) -> Any:
            tokens = self.norm(self.patch(images).flatten(2).transpose(1, 2))
            return self.head(self.encoder(tokens))

    return TinyViT()


_INPUT_SHAPES = {_vit: (_BATCH, 3, 8, 12)}  # 2 x 3 = _SEQ patches


def _step(lib: Any, model: Any, opt: Any, x: np.ndarray, target: np.ndarray) -> Any:
    """One autocast forward (the model's output and an MSE loss), backward and SGD step."""
    opt.zero_grad()
    with lib.autocast("cpu", dtype=lib.bfloat16):
        xt = lib.tensor(x)
        out = model(xt, xt) if isinstance(model, lib.nn.Transformer) else model(xt)
        loss = lib.nn.functional.mse_loss(out, lib.tensor(target))
    loss.backward()
    opt.step()
    return loss


@pytest.mark.parametrize(
    "build",
    [_encoder_layer, _encoder_layer_norm_first_gelu, _transformer, _gpt_block, _vit],
    ids=["encoder-layer", "encoder-layer-norm-first-gelu", "transformer", "mingpt-block", "vit"],
)
def test_transformers_train_under_autocast_as_torch(build: Callable[[Any], Any]) -> None:
    """Three autocast training steps: torch's float32 losses and float32 parameter gradients
    within bfloat16 precision, step by step."""
    torch.manual_seed(0)
    theirs = build(torch)
    mine = build(hookgrad)
    mine.load_state_dict(
        {k: hookgrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()}
    )
    opt_mine = hookgrad.optim.SGD(mine.parameters(), lr=0.1)
    opt_theirs = torch.optim.SGD(theirs.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    for step in range(3):
        x = rng.standard_normal(_INPUT_SHAPES.get(build, (_BATCH, _SEQ, _D))).astype(np.float32)
        target = rng.standard_normal((_BATCH, _SEQ, _D)).astype(np.float32)
        loss_theirs = _step(torch, theirs, opt_theirs, x, target)
        loss_mine = _step(hookgrad, mine, opt_mine, x, target)
        assert loss_mine.dtype == hookgrad.float32
        np.testing.assert_allclose(
            loss_mine.item(), loss_theirs.item(), rtol=1e-2, err_msg=f"loss, step {step}"
        )
        for (name, p), (_, q) in zip(mine.named_parameters(), theirs.named_parameters()):
            assert p.grad.dtype == hookgrad.float32, name
            want = q.grad.numpy()
            scale = float(np.abs(want).max())
            np.testing.assert_allclose(
                p.grad.numpy(), want, rtol=0.05, atol=0.03 * scale, err_msg=f"{name}, step {step}"
            )
