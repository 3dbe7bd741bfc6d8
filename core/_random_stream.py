"""torch's CPU random numbers, draw for draw: the generator and the kernels' transforms.

torch's CPU generator is a 32-bit Mersenne Twister (MT19937) seeded with the low 32 bits of
the seed, as ``std::mt19937`` seeds; numpy's ``MT19937`` with its legacy seeding is that very
generator, so every raw draw is torch's. On top of it each sampling kernel of torch has its own
transform, reproduced here in vectorised numpy:

* uniform floats: the low 24 (float32) or 53 (float64, from two draws, the first the high
  word) bits of a draw, times 2**-24 or 2**-53; ``uniform_(a, b)`` scales with one rounding,
  as torch's fused multiply-add does;
* normal float32 tensors of 16 or more elements: torch's AVX2 kernel fills the tensor with
  uniform draws and turns each block of 16 into 8 Box-Muller pairs, with the polynomial
  ``log`` and ``sincos`` of ``avx_mathfun.h``; here the same float32 operations in the same
  order, with the multiply-adds that torch's build fuses fused (a float64 product and sum,
  rounded once; which ones was found by comparing with torch), which gives torch's bits; a tensor whose size is not a multiple of
  16 gets its last 16 values redrawn and transformed again, as torch does;
* normal values of smaller tensors, and of float64 ones: Box-Muller in double precision, the
  second value of each pair kept for the next draw (torch's cached normal sample);
* integers in ``[low, high)``: a draw modulo the range (two draws from a range of 2**28 on);
* ``randperm``: Fisher-Yates swaps with a draw modulo the remaining count;
* Bernoulli: a uniform draw below the probability (double for a number, float for a tensor
  of probabilities);
* exponential: ``-1 / lambd * log1p(-u)`` of a double uniform draw;
* multinomial: with replacement and more than one sample, a double uniform draw searched in
  the cumulative weights; else the largest ``weight / Exp(1)`` draws.

Where torch's own numbers depend on the CPU (the AVX2 kernel above; torch takes a scalar path
without AVX2), these are those of an x86-64 CPU with AVX2, which is where they were checked.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

__all__ = ["DEFAULT_SEED", "TorchStream", "decode_state", "encode_state"]

DEFAULT_SEED = 67280421310721
"""The seed of torch's default CPU generator before any ``manual_seed``."""

_F32 = np.float32
_F64 = np.float64
_MASK24 = np.uint64((1 << 24) - 1)
_MASK53 = np.uint64((1 << 53) - 1)
_TWO_PI_F32 = _F32(2.0 * math.pi)


class TorchStream:
    """One generator's state: the Mersenne Twister and the cached normal sample."""

    __slots__ = ("_bits", "_next_normal", "seed")

    def __init__(self, seed: int = DEFAULT_SEED) -> None:
        self.manual_seed(seed)

    def manual_seed(self, seed: int) -> None:
        """Restart the stream as torch's ``manual_seed(seed)`` does (negative seeds wrap)."""
        self.seed = seed % 2**64
        bits = np.random.MT19937()
        bits._legacy_seeding(self.seed & 0xFFFFFFFF)
        self._bits = bits
        self._next_normal: float | None = None

    # ------------------------------------------------------------------ raw draws
    def random32(self, n: int) -> np.ndarray:
        """``n`` draws of 32 bits (as uint64)."""
        return self._bits.random_raw(n)

    def random64(self, n: int) -> np.ndarray:
        """``n`` draws of 64 bits, each from two 32-bit draws (the first is the high word)."""
        pairs = self._bits.random_raw(2 * n)
        return (pairs[0::2] << np.uint64(32)) | pairs[1::2]

    def _unit(self, n: int, dtype: np.dtype[Any]) -> np.ndarray:
        """``n`` uniform draws on [0, 1) as torch's kernels make them for ``dtype`` (float64)."""
        if dtype == _F64:
            return (self.random64(n) & _MASK53).astype(_F64) * 2.0**-53
        digits = np.finfo(dtype).nmant + 1
        mask = np.uint64((1 << digits) - 1)
        return (self.random32(n) & mask).astype(_F64) * 2.0**-digits

    # ------------------------------------------------------------------ distributions
    def uniform(
        self, shape: tuple[int, ...], dtype: Any, low: float = 0.0, high: float = 1.0
    ) -> np.ndarray:
        """``empty(shape).uniform_(low, high)``: bounds rounded to ``dtype`` first."""
        dtype = np.dtype(dtype)
        n = math.prod(shape)
        lo, hi = dtype.type(low), dtype.type(high)
        if lo == 0 and hi == 1:
            return self._unit(n, dtype).astype(dtype).reshape(shape)
        span = _F64(hi - lo)  # the difference in dtype, as torch computes it
        unit = self._unit(n, dtype)
        if dtype == _F64:
            return _fma64(unit, span, _F64(lo)).reshape(shape)
        return (unit * span + _F64(lo)).astype(dtype).reshape(shape)  # exact product, 1 rounding

    def normal(
        self, shape: tuple[int, ...], dtype: Any, mean: float = 0.0, std: float = 1.0
    ) -> np.ndarray:
        """``empty(shape).normal_(mean, std)``."""
        dtype = np.dtype(dtype)
        n = math.prod(shape)
        if n >= 16 and dtype == _F32:
            out = self._normal_blocks(n, mean, std)
        elif n >= 16:
            out = self._normal_blocks_f64(n, mean, std)
        else:
            draws = np.array([self._normal_one() for _ in range(n)], dtype=_F64)
            out = _fma64(draws, _F64(std), _F64(mean))
        return out.astype(dtype).reshape(shape)

    def _normal_blocks(self, n: int, mean: float, std: float) -> np.ndarray:
        data = self._unit(n, np.dtype(_F32)).astype(_F32)
        whole = n - n % 16
        _box_muller_f32(data[:whole].reshape(-1, 16))
        if n % 16:
            tail = self._unit(16, np.dtype(_F32)).astype(_F32)
            _box_muller_f32(tail.reshape(1, 16))
            data[n - 16 :] = tail
        if std == 1.0 and mean == 0.0:
            return data
        return data.astype(_F64) * _F64(_F32(std)) + _F64(_F32(mean))  # torch's one fmadd

    def _normal_blocks_f64(self, n: int, mean: float, std: float) -> np.ndarray:
        data = self._unit(n, np.dtype(_F64))
        whole = n - n % 16
        _box_muller_f64(data[:whole].reshape(-1, 16))
        if n % 16:
            tail = self._unit(16, np.dtype(_F64))
            _box_muller_f64(tail.reshape(1, 16))
            data[n - 16 :] = tail
        return _fma64(data, _F64(std), _F64(mean))

    def _normal_one(self) -> float:
        """One standard normal draw in double precision (torch's serial path and its cache)."""
        if self._next_normal is not None:
            value, self._next_normal = self._next_normal, None
            return value
        u1, u2 = self._unit(2, np.dtype(_F64))
        radius = math.sqrt(-2.0 * math.log1p(-u2))
        theta = 2.0 * math.pi * u1
        self._next_normal = radius * math.sin(theta)
        return radius * math.cos(theta)

    def integers(self, low: int, high: int, shape: tuple[int, ...]) -> np.ndarray:
        """``randint(low, high, shape)``: a draw modulo the range, plus ``low`` (int64)."""
        span = high - low
        n = math.prod(shape)
        draws = self.random64(n) if span >= 2**28 else self.random32(n)  # torch's switch
        return ((draws % np.uint64(span)).astype(np.int64) + low).reshape(shape)

    def random_int64(self) -> int:
        """``empty((), dtype=int64).random_()``: a 64-bit draw modulo 2**63."""
        return int(self.random64(1)[0]) % 2**63

    def permutation(self, n: int) -> np.ndarray:
        """``randperm(n)``: Fisher-Yates, swapping place i with i + draw % (n - i)."""
        result = np.arange(n, dtype=np.int64)
        if n < 2:
            return result
        wide = n >= (2**32 - 1) // 20  # torch's switch to 64-bit draws
        draws = (self.random64(n - 1) if wide else self.random32(n - 1)).tolist()
        order = result.tolist()
        for i, draw in enumerate(draws):
            j = i + draw % (n - i)
            order[i], order[j] = order[j], order[i]
        return np.array(order, dtype=np.int64)

    def bernoulli(self, p: float | np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """0/1 draws that are 1 with probability ``p``: a uniform draw below ``p``, a double
        one for a number ``p`` and a float one for an array of probabilities, as torch's two
        kernels draw."""
        precision = np.dtype(_F64 if np.ndim(p) == 0 and not isinstance(p, np.ndarray) else _F32)
        draws = self._unit(math.prod(shape), precision).reshape(shape)
        return (draws < p).astype(_F64)

    def exponential(self, shape: tuple[int, ...], lambd: float) -> np.ndarray:
        """Draws from Exp(``lambd``): ``-1 / lambd * log1p(-u)`` of double uniform draws."""
        u = self._unit(math.prod(shape), np.dtype(_F64)).reshape(shape)
        return (-1.0 / lambd) * np.log1p(-u)


# ---------------------------------------------------------------------- Box-Muller blocks
def _fma(a: Any, b: Any, c: Any) -> np.ndarray:
    """float32 ``a * b + c`` rounded once (the product is exact in float64)."""
    return (np.asarray(a, _F64) * np.asarray(b, _F64) + np.asarray(c, _F64)).astype(_F32)


def _fma64(a: np.ndarray, b: np.float64, c: np.float64) -> np.ndarray:
    """float64 ``a * b + c`` with one rounding (nearly always): the product's exact error by
    Dekker's split and the sum's by TwoSum, added back at the end."""
    product = a * b
    a_hi, a_lo = _split(a)
    b_hi, b_lo = _split(np.asarray(b, _F64))
    product_error = ((a_hi * b_hi - product) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    total = product + c
    back = total - product
    sum_error = (product - (total - back)) + (c - back)
    return total + (product_error + sum_error)


def _split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dekker's split: ``x == hi + lo`` with each half of 26 bits, so their products are exact."""
    scaled = x * 134217729.0  # 2**27 + 1
    hi = scaled - (scaled - x)
    return hi, x - hi


_LOG_P = tuple(
    _F32(p)
    for p in (
        -1.1514610310e-1,
        1.1676998740e-1,
        -1.2420140846e-1,
        1.4249322787e-1,
        -1.6668057665e-1,
        2.0000714765e-1,
        -2.4999993993e-1,
        3.3333331174e-1,
    )
)


def _log_f32(x: np.ndarray) -> np.ndarray:
    """``log256_ps`` of avx_mathfun.h (cephes ``logf``) for x in (0, 1], operation for operation."""
    bits = np.maximum(x, _F32(1.17549435e-38)).view(np.int32)
    e = ((bits >> 23) - 0x7F).astype(_F32) + _F32(1)
    x = ((bits & ~0x7F800000) | 0x3F000000).view(_F32)  # the mantissa in [0.5, 1)
    small = x < _F32(0.707106781186547524)
    e = e - small.astype(_F32)
    x = (x - _F32(1)) + np.where(small, x, _F32(0))
    z = x * x
    y = np.full_like(x, _F32(7.0376836292e-2))
    for p in _LOG_P:
        y = _fma(y, x, p)
    y = _fma(y * x, z, e * _F32(-2.12194440e-4))
    y = y - z * _F32(0.5)
    return (x + y) + e * _F32(0.693359375)


def _sincos_f32(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``sincos256_ps`` of avx_mathfun.h (cephes ``sinf``/``cosf``) for x >= 0."""
    j = ((x * _F32(1.27323954473516)).astype(np.int32) + 1) & ~1
    y = j.astype(_F32)
    x = x + y * _F32(-0.78515625)  # Cody-Waite reduction: these three are not fused
    x = x + y * _F32(-2.4187564849853515625e-4)
    x = x + y * _F32(-3.77489497744594108e-8)
    sin_negative = (j & 4) != 0
    cos_negative = ((j - 2) & 4) == 0
    use_sin_poly = (j & 2) == 0
    z = x * x
    yc = _fma(_F32(2.443315711809948e-5), z, _F32(-1.388731625493765e-3))
    yc = _fma(yc, z, _F32(4.166664568298827e-2)) * z
    yc = _fma(yc, z, -(z * _F32(0.5))) + _F32(1)
    ys = _fma(_F32(-1.9515295891e-4), z, _F32(8.3321608736e-3))
    ys = _fma(ys, z, _F32(-1.6666654611e-1)) * z
    ys = _fma(ys, x, x)
    sin = np.where(use_sin_poly, ys, yc)
    cos = np.where(use_sin_poly, yc, ys)
    return np.where(sin_negative, -sin, sin), np.where(cos_negative, -cos, cos)


def _box_muller_f32(blocks: np.ndarray) -> None:
    """torch's ``normal_fill_16_AVX2`` on each row of 16 uniform float32 draws, in place."""
    radius = np.sqrt(_F32(-2) * _log_f32(_F32(1) - blocks[:, :8]))
    sin, cos = _sincos_f32(_TWO_PI_F32 * blocks[:, 8:])
    blocks[:, :8] = radius * cos
    blocks[:, 8:] = radius * sin


def _box_muller_f64(blocks: np.ndarray) -> None:
    """torch's scalar ``normal_fill_16`` on rows of 16 uniform float64 draws, in place."""
    radius = np.sqrt(-2.0 * np.log(1.0 - blocks[:, :8]))
    theta = 2.0 * math.pi * blocks[:, 8:]
    blocks[:, :8], blocks[:, 8:] = radius * np.cos(theta), radius * np.sin(theta)


# ---------------------------------------------------------------------- saved state
_STATE = struct.Struct("<624IIQ?d")
"""The Twister's 624 words and position, the seed, whether a normal sample is cached, it."""


def encode_state(stream: TorchStream) -> np.ndarray:
    """The stream's state as bytes (uint8), for ``get_rng_state``."""
    bits = stream._bits.state["state"]
    cached = stream._next_normal
    packed = _STATE.pack(
        *bits["key"].tolist(), bits["pos"], stream.seed, cached is not None, cached or 0.0
    )
    return np.frombuffer(packed, dtype=np.uint8).copy()


def decode_state(stream: TorchStream, state: np.ndarray) -> None:
    """Set ``stream`` to an :func:`encode_state` result; RuntimeError for anything else."""
    data = np.asarray(state)
    if data.dtype != np.uint8 or data.size != _STATE.size:
        raise RuntimeError(
            f"Expected a uint8 state of {_STATE.size} bytes (from get_rng_state), "
            f"got {data.dtype} with {data.size} elements"
        )
    *key, pos, seed, has_normal, normal = _STATE.unpack(data.tobytes())
    if pos > 624:
        raise RuntimeError(f"invalid generator state: position {pos} > 624")
    stream._bits.state = {
        "bit_generator": "MT19937",
        "state": {"key": np.array(key, dtype=np.uint32), "pos": pos},
    }
    stream.seed = seed
    stream._next_normal = normal if has_normal else None
