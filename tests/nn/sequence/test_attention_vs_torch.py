"""Differential tests: F.scaled_dot_product_attention and MultiheadAttention against torch 2.13."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import hookgrad  # noqa: E402
import hookgrad.nn as nn  # noqa: E402
import hookgrad.nn.functional as F  # noqa: E402
from hookgrad.testing import gradcheck  # noqa: E402

from .conftest import array, compare_call, compare_module, hook_trace, sync_from_torch  # noqa: E402


def _mask(kind: str, shape: tuple[int, ...], seed: int) -> np.ndarray | None:
    rng = np.random.default_rng(seed)
    if kind == "bool":
        return rng.random(shape) > 0.3
    if kind == "float":
        return rng.standard_normal(shape).astype(np.float32)
    return None


@settings(max_examples=40, deadline=None)
@given(
    batch=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    sizes=st.tuples(st.integers(1, 5), st.integers(1, 5), st.integers(1, 4), st.integers(1, 4)),
    mask=st.sampled_from(["none", "bool", "float"]),
    is_causal=st.booleans(),
    scale=st.sampled_from([None, 0.25, 2.0]),
    seed=st.integers(0, 1000),
)
def test_sdpa_matches_torch(batch, sizes, mask, is_causal, scale, seed):
    """Outputs and q/k/v (and float mask) gradients for any batch dims, lengths, masks,
    is_causal and scale; where torch refuses a mask with is_causal, the same error."""
    L, S, E, Ev = sizes
    batch = tuple(batch)
    q = array(*batch, L, E, seed=seed)
    k = array(*batch, S, E, seed=seed + 1)
    v = array(*batch, S, Ev, seed=seed + 2)
    m = _mask(mask, (L, S), seed)
    if m is not None and m.dtype == np.bool_:
        m[0] = False  # a query with no key to attend: zeros, in both of torch's kernels
    args = (q, k, v, m)

    def as_inputs(lib):  # as compare_call makes them: a float mask requires grad too
        return [
            None if a is None else lib.tensor(a, requires_grad=a.dtype.kind == "f") for a in args
        ]

    try:
        torch.nn.functional.scaled_dot_product_attention(*as_inputs(torch), is_causal=is_causal)
    except RuntimeError as error:
        with pytest.raises(RuntimeError, match=f"^{re.escape(str(error))}$"):
            F.scaled_dot_product_attention(*as_inputs(hookgrad), is_causal=True)
        return
    compare_call(
        F.scaled_dot_product_attention,
        torch.nn.functional.scaled_dot_product_attention,
        *args,
        is_causal=is_causal,
        scale=scale,
    )


def test_sdpa_records_torchs_node_and_edges():
    """One ScaledDotProductFlashAttentionForCpuBackward0 node with edges (query, key, value)."""
    q, k, v = (hookgrad.randn(1, 2, 3, 4, requires_grad=True) for _ in range(3))
    fn = F.scaled_dot_product_attention(q, k, v).grad_fn
    tq = torch.randn(1, 2, 3, 4, requires_grad=True)
    assert fn.name() == torch.nn.functional.scaled_dot_product_attention(tq, tq, tq).grad_fn.name()
    assert [e[0].variable for e in fn.next_functions] == [q, k, v]


def test_sdpa_float_mask_gradient():
    """A float mask that requires grad gets torch's gradient, broadcast back to its shape."""
    q, k, v = array(2, 3, 4, 5), array(2, 3, 6, 5, seed=2), array(2, 3, 6, 5, seed=3)
    compare_call(
        F.scaled_dot_product_attention,
        torch.nn.functional.scaled_dot_product_attention,
        q,
        k,
        v,
        array(3, 4, 6, seed=4),
    )


def test_sdpa_fully_masked_row_is_zero_like_torch():
    """A query whose keys are all masked out gives zeros and zero gradients, as torch's CPU
    kernel does (not NaN)."""
    m = np.ones((3, 4), dtype=bool)
    m[1] = False
    args = array(1, 2, 3, 5), array(1, 2, 4, 5, seed=2), array(1, 2, 4, 5, seed=3), m
    h_in, _ = compare_call(
        F.scaled_dot_product_attention, torch.nn.functional.scaled_dot_product_attention, *args
    )
    assert np.all(h_in[0].grad.numpy()[:, :, 1] == 0)


@pytest.mark.parametrize("kv_heads", [1, 2])
def test_sdpa_grouped_query_attention(kv_heads):
    """enable_gqa shares each key/value head among query heads; gradients sum over them."""
    compare_call(
        F.scaled_dot_product_attention,
        torch.nn.functional.scaled_dot_product_attention,
        array(2, 4, 3, 5),
        array(2, kv_heads, 6, 5, seed=2),
        array(2, kv_heads, 6, 3, seed=3),
        enable_gqa=True,
    )


@pytest.mark.parametrize("first_key_only", [True, False])
def test_sdpa_causal_and_explicit_mask_both_apply(first_key_only):
    """With both is_causal and attn_mask on 4-D input, torch's CPU kernel masks a key that
    either of them masks."""
    m = np.zeros((3, 3), dtype=bool)
    m[:, 0] = True
    if not first_key_only:
        m[2] = True  # the last query may see every key: the causal mask decides
    compare_call(
        F.scaled_dot_product_attention,
        torch.nn.functional.scaled_dot_product_attention,
        array(1, 2, 3, 4),
        array(1, 2, 3, 4, seed=2),
        array(1, 2, 3, 4, seed=3),
        m,
        is_causal=True,
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: (lib.zeros(1, 2, 3, 4), lib.zeros(1, 2, 3, 4, dtype=lib.float64)),
        lambda lib: (lib.zeros(1, 2, 3, 4), lib.zeros(1, 3, 3, 4)),
    ],
    ids=["dtype", "heads"],
)
def test_sdpa_errors_match_torch(fails_like_torch, make):
    """Mixed dtypes and unbroadcastable batch dims raise torch's RuntimeError and text."""

    def action(lib):
        q, k = make(lib)
        lib.nn.functional.scaled_dot_product_attention(q, k, k)

    fails_like_torch(action)


def test_sdpa_mask_dtype_and_gqa_errors_match_torch(fails_like_torch):
    """An integer mask and a head count that does not divide raise torch's errors."""
    sdpa = "nn.functional.scaled_dot_product_attention"

    def int_mask(lib):
        q = lib.zeros(1, 2, 3, 4)
        lib.nn.functional.scaled_dot_product_attention(q, q, q, lib.ones(3, 3, dtype=lib.int64))

    def gqa(lib):
        k = lib.zeros(1, 3, 3, 4)
        lib.nn.functional.scaled_dot_product_attention(lib.zeros(1, 2, 3, 4), k, k, enable_gqa=True)

    assert sdpa
    fails_like_torch(int_mask)
    fails_like_torch(gqa)


def test_sdpa_dropout_is_seeded_and_differentiable():
    """Dropout draws from hookgrad's generator (same seed, same output; another seed, another)
    and its backward is exact (numerical gradcheck in float64 with the mask held fixed)."""
    q, k, v = (hookgrad.randn(1, 2, 4, 3, dtype=hookgrad.float64) for _ in range(3))

    def attend(q, k, v):
        hookgrad.manual_seed(7)
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)

    first, again = attend(q, k, v), attend(q, k, v)
    assert hookgrad.equal(first, again)
    assert not hookgrad.equal(first, F.scaled_dot_product_attention(q, k, v))
    inputs = tuple(t.requires_grad_() for t in (q, k, v))
    assert gradcheck(attend, inputs)


# -- MultiheadAttention -------------------------------------------------------------------------

MHA_CASES = [
    ({}, {}),
    ({}, {"need_weights": False}),
    ({}, {"average_attn_weights": False}),
    ({"batch_first": True}, {}),
    ({"bias": False}, {"need_weights": False}),
    ({"add_bias_kv": True}, {}),
    ({"add_zero_attn": True}, {"need_weights": False}),
    ({"add_bias_kv": True, "add_zero_attn": True}, {"key_padding_mask": "bool"}),
    ({"kdim": 3, "vdim": 5}, {"key_padding_mask": "bool"}),
    ({}, {"attn_mask": "bool"}),
    ({}, {"attn_mask": "float", "need_weights": False}),
    ({}, {"attn_mask": "causal", "is_causal": True, "need_weights": False}),
    ({}, {"attn_mask": "causal", "is_causal": True}),
    ({"batch_first": True}, {"attn_mask": "bool", "key_padding_mask": "bool"}),
    ({}, {"attn_mask": "float3d", "key_padding_mask": "float"}),
]


def _mha_kwargs(spec: dict, L: int, S: int, N: int, heads: int) -> dict:
    out = dict(spec)
    kind = spec.get("attn_mask")
    if kind == "bool":
        m = np.random.default_rng(5).random((L, S)) > 0.4
        m[:, 0] = False  # a key every query may attend
        out["attn_mask"] = m
    elif kind == "float":
        out["attn_mask"] = array(L, S, seed=5)
    elif kind == "float3d":
        out["attn_mask"] = array(N * heads, L, S, seed=5)
    elif kind == "causal":
        out["attn_mask"] = np.triu(np.ones((L, S), dtype=bool), 1)
    kind = spec.get("key_padding_mask")
    if kind is not None:
        pad = np.zeros((N, S), dtype=bool)
        pad[0, -1] = True
        out["key_padding_mask"] = (
            pad if kind == "bool" else np.where(pad, -1e4, 0).astype(np.float32)
        )
    return out


@pytest.mark.parametrize(("ctor", "call"), MHA_CASES, ids=[str(c) for c in MHA_CASES])
def test_multihead_attention_matches_torch(ctor, call):
    """Outputs, attention weights, input and parameter gradients equal torch's for each
    constructor flag and each mask, padding and need_weights combination."""
    L, S, N, E, heads = 4, 5, 3, 6, 2
    kw = _mha_kwargs(call, L, S, N, heads)
    first = ctor.get("batch_first", False)
    shape = (lambda n, s, e: (n, s, e)) if first else (lambda n, s, e: (s, n, e))
    query = array(*shape(N, L, E))
    key = array(*shape(N, S, ctor.get("kdim", E)), seed=2)
    value = array(*shape(N, S, ctor.get("vdim", E)), seed=3)
    compare_module(
        nn.MultiheadAttention(E, heads, **ctor),
        torch.nn.MultiheadAttention(E, heads, **ctor),
        query,
        key,
        value,
        **kw,
    )


@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_self_attention_unbatched(need_weights):
    """Self-attention (query is key is value) on unbatched (L, E) input."""
    hg, tm = nn.MultiheadAttention(4, 2), torch.nn.MultiheadAttention(4, 2)
    sync_from_torch(hg, tm)
    x = array(5, 4)
    hx, tx = hookgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (h_out, h_w), (t_out, t_w) = (
        hg(hx, hx, hx, need_weights=need_weights),
        tm(tx, tx, tx, need_weights=need_weights),
    )
    np.testing.assert_allclose(h_out.detach().numpy(), t_out.detach().numpy(), 1e-5, 1e-5)
    assert (h_w is None) == (t_w is None)
    h_out.sum().backward()
    t_out.sum().backward()
    np.testing.assert_allclose(hx.grad.numpy(), tx.grad.numpy(), 1e-5, 1e-5)


def test_multihead_attention_state_dict_round_trips_with_torch():
    """State-dict keys, shapes and the out_proj class name are torch's; weights load both ways."""
    for kwargs in ({}, {"kdim": 3, "vdim": 5, "add_bias_kv": True}):
        hg, tm = nn.MultiheadAttention(6, 3, **kwargs), torch.nn.MultiheadAttention(6, 3, **kwargs)
        h_state, t_state = hg.state_dict(), tm.state_dict()
        assert list(h_state) == list(t_state)
        assert [tuple(v.shape) for v in h_state.values()] == [
            tuple(v.shape) for v in t_state.values()
        ]
        tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in h_state.items()})
        for k, v in tm.state_dict().items():
            np.testing.assert_array_equal(v.numpy(), h_state[k].numpy())
    assert type(hg.out_proj).__name__ == type(tm.out_proj).__name__
    assert repr(hg) == repr(tm)


def test_multihead_attention_init_is_torchs():
    """in_proj and out_proj biases start at zero; in_proj_weight is xavier-uniform bounded."""
    mha = nn.MultiheadAttention(8, 2)
    assert not mha.in_proj_bias.detach().numpy().any()
    assert not mha.out_proj.bias.detach().numpy().any()
    bound = np.sqrt(6 / (8 + 24))
    assert np.abs(mha.in_proj_weight.detach().numpy()).max() <= bound


def test_multihead_attention_hooks_fire_as_torchs():
    """Forward and full backward hooks fire on the same submodules as torch's: the module
    itself, not out_proj (whose weights the functional form uses directly)."""
    traces = []
    for lib, mod in ((hookgrad, nn), (torch, torch.nn)):
        mha = mod.MultiheadAttention(4, 2)
        x = lib.randn(3, 2, 4, requires_grad=True)
        traces.append(hook_trace(mha, lambda mha=mha, x=x: mha(x, x, x)[0]))
    assert traces[0] == traces[1]
    assert ("fwd", "") in traces[0]


def test_multi_head_attention_forward_functional():
    """F.multi_head_attention_forward called directly with separate projection weights."""
    E, heads = 4, 2
    params = {
        "in_proj_weight": None,
        "in_proj_bias": array(3 * E, seed=4),
        "bias_k": None,
        "bias_v": None,
        "add_zero_attn": False,
        "dropout_p": 0.0,
        "out_proj_weight": array(E, E, seed=5),
        "out_proj_bias": array(E, seed=6),
    }

    def call(lib):
        fn = lib.nn.functional.multi_head_attention_forward

        def run(q, k, v, wq, wk, wv, *rest):
            names = list(params)
            values = dict(zip(names, rest, strict=True))
            return fn(q, k, v, E, heads, **values, use_separate_proj_weight=True,
                      q_proj_weight=wq, k_proj_weight=wk, v_proj_weight=wv)  # fmt: skip

        return run

    compare_call(
        call(hookgrad),
        call(torch),
        array(3, 2, E),
        array(5, 2, 3, seed=2),
        array(5, 2, 5, seed=3),
        array(E, E, seed=7),
        array(E, 3, seed=8),
        array(E, 5, seed=9),
        *params.values(),
    )


def test_multihead_attention_errors_match_torch(fails_like_torch):
    """A head count that does not divide embed_dim, and is_causal without a mask, fail as torch."""
    fails_like_torch(lambda lib: lib.nn.MultiheadAttention(5, 2))

    def causal_without_mask(lib):
        x = lib.zeros(3, 1, 4)
        lib.nn.MultiheadAttention(4, 2)(x, x, x, is_causal=True)

    fails_like_torch(causal_without_mask)
    fails_like_torch(lambda lib: lib.nn.MultiheadAttention(0, 2))


@pytest.mark.parametrize(
    "shapes",
    [
        {"k": (1, 1, 3, 4)},  # broadcast heads
        {"q": (2, 2, 3, 4)},  # broadcast batch
        {"v": (1, 2, 3, 2)},  # value size other than E
        {"dropout_p": 0.5},
    ],
    ids=["heads", "batch", "value-size", "dropout"],
)
def test_sdpa_refuses_mask_with_is_causal_where_torch_does(fails_like_torch, shapes):
    """Where torch takes its math path, a mask together with is_causal is torch's error."""

    def action(lib):
        q = lib.zeros(*shapes.get("q", (1, 2, 3, 4)))
        k = lib.zeros(*shapes.get("k", (1, 2, 3, 4)))
        v = lib.zeros(*shapes.get("v", k.shape))
        mask = lib.ones(3, 3, dtype=lib.bool)
        dropout_p = shapes.get("dropout_p", 0.0)
        lib.nn.functional.scaled_dot_product_attention(
            q, k, v, mask, dropout_p=dropout_p, is_causal=True
        )

    fails_like_torch(action)


def test_multihead_attention_eval_without_grad_matches_torchs_fused_path():
    """In eval mode without grad torch runs its fused attention kernel; hookgrad's ordinary
    path gives the same outputs and weights."""
    hg, tm = (
        nn.MultiheadAttention(8, 2, batch_first=True),
        torch.nn.MultiheadAttention(8, 2, batch_first=True),
    )
    sync_from_torch(hg, tm)
    hg.eval()
    tm.eval()
    x = array(2, 5, 8)
    with hookgrad.no_grad(), torch.no_grad():
        h_out, h_w = hg(*(hookgrad.tensor(x),) * 3)
        t_out, t_w = tm(*(torch.tensor(x),) * 3)
    np.testing.assert_allclose(h_out.numpy(), t_out.numpy(), 1e-5, 1e-5)
    np.testing.assert_allclose(h_w.numpy(), t_w.numpy(), 1e-5, 1e-5)


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")
@settings(max_examples=40, deadline=None)
@given(
    heads_dim=st.sampled_from([(1, 4), (2, 4), (2, 6), (3, 6)]),
    lengths=st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 3)),
    flags=st.fixed_dictionaries(
        {
            "batch_first": st.booleans(),
            "bias": st.booleans(),
            "add_bias_kv": st.booleans(),
            "add_zero_attn": st.booleans(),
            "separate_dims": st.booleans(),
        }
    ),
    call=st.fixed_dictionaries(
        {
            "need_weights": st.booleans(),
            "average_attn_weights": st.booleans(),
            "attn_mask": st.sampled_from([None, "bool", "float", "causal"]),
            "key_padding_mask": st.sampled_from([None, "bool"]),
        }
    ),
    seed=st.integers(0, 100),
)
def test_multihead_attention_any_flags_match_torch(heads_dim, lengths, flags, call, seed):
    """MultiheadAttention for any head count, lengths, batch, constructor flags, masks and
    need_weights combination: outputs, weights and all gradients equal torch's."""
    heads, E = heads_dim
    L, S, N = lengths
    ctor = {k: v for k, v in flags.items() if k != "separate_dims"}
    if flags["separate_dims"]:
        ctor.update(kdim=3, vdim=5)
    kw = dict(call)
    if kw["attn_mask"] == "causal":
        S = L
        kw["is_causal"] = True
    kw = _mha_kwargs(kw, L, S, N, heads)
    if kw["attn_mask"] is None:
        del kw["attn_mask"]
    if kw["key_padding_mask"] is None:
        del kw["key_padding_mask"]
    shape = (lambda n, s, e: (n, s, e)) if ctor["batch_first"] else (lambda n, s, e: (s, n, e))
    query = array(*shape(N, L, E), seed=seed)
    key = array(*shape(N, S, ctor.get("kdim", E)), seed=seed + 1)
    value = array(*shape(N, S, ctor.get("vdim", E)), seed=seed + 2)
    torch.manual_seed(seed)
    compare_module(
        nn.MultiheadAttention(E, heads, **ctor),
        torch.nn.MultiheadAttention(E, heads, **ctor),
        query,
        key,
        value,
        **kw,
    )


def test_mismatched_mask_types_warn_like_torch():
    """A bool key_padding_mask with a float attn_mask gives torch's deprecation warning."""
    messages = []
    for lib in (hookgrad, torch):
        lib.manual_seed(0)
        mha = lib.nn.MultiheadAttention(4, 2)
        x = lib.zeros(3, 2, 4)
        with pytest.warns(UserWarning) as record:
            mha(
                x, x, x, key_padding_mask=lib.zeros(2, 3, dtype=lib.bool), attn_mask=lib.zeros(3, 3)
            )
        messages.append([str(w.message) for w in record])
    assert messages[0] == messages[1]
