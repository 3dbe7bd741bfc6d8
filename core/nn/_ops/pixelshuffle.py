"""``F.pixel_shuffle`` and ``F.pixel_unshuffle`` (the sub-pixel convolution's rearrangement),
as a reshape, a permute and a reshape: exact, and differentiable through those ops."""

from __future__ import annotations

from ..._tensor import Tensor

__all__ = ["pixel_shuffle", "pixel_unshuffle"]


def _check(name: str, input: Tensor, factor: int, what: str) -> None:
    if input.dim() < 3:
        raise RuntimeError(
            f"{name} expects input to have at least 3 dimensions, but got input with "
            f"{input.dim()} dimension(s)"
        )
    if factor <= 0:
        raise RuntimeError(f"{name} expects a positive {what}, but got {factor}")


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """``(*, C * r**2, H, W)`` to ``(*, C, H * r, W * r)``."""
    r = upscale_factor
    _check("pixel_shuffle", input, r, "upscale_factor")
    *batch, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(
            "pixel_shuffle expects its input's 'channel' dimension to be divisible by the "
            f"square of upscale_factor, but input.size(-3)={c} is not divisible by {r * r}"
        )
    n = len(batch)
    x = input.reshape(*batch, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*batch, c // (r * r), h * r, w * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """``(*, C, H * r, W * r)`` to ``(*, C * r**2, H, W)``."""
    r = downscale_factor
    _check("pixel_unshuffle", input, r, "downscale_factor")
    *batch, c, h, w = input.shape
    if h % r:
        raise RuntimeError(
            "pixel_unshuffle expects height to be divisible by downscale_factor, but "
            f"input.size(-2)={h} is not divisible by {r}"
        )
    if w % r:
        raise RuntimeError(
            "pixel_unshuffle expects width to be divisible by downscale_factor, but "
            f"input.size(-1)={w} is not divisible by {r}"
        )
    n = len(batch)
    x = input.reshape(*batch, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*batch, c * r * r, h // r, w // r)
