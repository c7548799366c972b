"""MultiHeadAttention: against a plain reference, its mask conventions, its
state dict, its errors, and (where PyTorch is installed) against
torch.nn.MultiheadAttention(batch_first=True)."""

import numpy as np
import pytest
from hypothesis import given, strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from attention_lib import MultiHeadAttention, causal_mask, scaled_dot_product_attention


def reference_mha(layer, query, key, value, blocked=None, added=None):
    """Multi-head attention written out: one sequence, one head at a time.

    ``blocked`` (bool) and ``added`` (float) are full ``(N, H, L, S)`` masks
    in PyTorch's convention: True = may not attend; ``added`` is added to
    the scores. A query with nothing to attend to gets zero weights.
    """
    sd = layer.state_dict()
    E, H = layer.embed_dim, layer.num_heads
    d = E // H
    if "in_proj_weight" in sd:
        w_q, w_k, w_v = np.split(sd["in_proj_weight"], 3)
    else:
        w_q, w_k, w_v = (sd[n] for n in ("q_proj_weight", "k_proj_weight", "v_proj_weight"))
    b_q, b_k, b_v = np.split(sd.get("in_proj_bias", np.zeros(3 * E)), 3)
    b_o = sd.get("out_proj.bias", np.zeros(E))
    N, L, _ = query.shape
    S = key.shape[1]
    out = np.zeros((N, L, E))
    weights = np.zeros((N, H, L, S))
    for n in range(N):
        Q = query[n] @ w_q.T + b_q  # (L, E): the book's X W_Q
        K = key[n] @ w_k.T + b_k
        V = value[n] @ w_v.T + b_v
        heads = []
        for h in range(H):
            cols = slice(h * d, (h + 1) * d)
            scores = Q[:, cols] @ K[:, cols].T / np.sqrt(d)
            if added is not None:
                scores = scores + added[n, h]
            if blocked is not None:
                scores = np.where(blocked[n, h], -np.inf, scores)
            a = np.zeros((L, S))
            for i in range(L):
                if np.isneginf(scores[i]).all():
                    continue  # nothing to attend to
                e = np.exp(scores[i] - scores[i].max())
                a[i] = e / e.sum()
            weights[n, h] = a
            heads.append(a @ V[:, cols])
        out[n] = np.concatenate(heads, axis=1) @ sd["out_proj.weight"].T + b_o
    return out, weights


@st.composite
def layer_and_inputs(draw, self_attention=False):
    H = draw(st.integers(1, 3))
    E = H * draw(st.integers(1, 3))
    if self_attention:
        kdim = vdim = E
    else:
        kdim = draw(st.sampled_from([E, E + 1]))
        vdim = draw(st.sampled_from([E, 2]))
    bias = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    layer = MultiHeadAttention(E, H, bias=bias, kdim=kdim, vdim=vdim, rng=rng)
    if bias:  # PyTorch starts biases at 0; make them matter
        layer.in_proj_bias[:] = rng.normal(size=3 * E)
        layer.out_proj_bias[:] = rng.normal(size=E)
    N, L = draw(st.integers(1, 3)), draw(st.integers(1, 5))
    S = L if self_attention else draw(st.integers(1, 5))
    x = rng.normal(size=(N, L, E))
    if self_attention:
        return layer, x, x, x, rng
    key = rng.normal(size=(N, S, kdim))
    value = rng.normal(size=(N, S, vdim))
    return layer, x, key, value, rng


@given(layer_and_inputs())
def test_agrees_with_plain_reference_without_masks(problem):
    layer, q, k, v, _ = problem
    out, w = layer(q, k, v, average_attn_weights=False)
    ref_out, ref_w = reference_mha(layer, q, k, v)
    assert_allclose(w, ref_w, rtol=1e-10, atol=1e-12)
    assert_allclose(out, ref_out, rtol=1e-10, atol=1e-10)


@given(
    layer_and_inputs(),
    st.sampled_from(["bool", "float"]),
    st.sampled_from(["key_padding_mask", "attn_mask_2d", "attn_mask_3d"]),
    st.floats(0, 1),
)
def test_agrees_with_plain_reference_with_each_mask_kind(problem, kind, where, density):
    layer, q, k, v, rng = problem
    N, L, S, H = q.shape[0], q.shape[1], k.shape[1], layer.num_heads
    shape = {"key_padding_mask": (N, S), "attn_mask_2d": (L, S), "attn_mask_3d": (N * H, L, S)}[
        where
    ]
    blocked = rng.random(shape) < density
    mask = blocked if kind == "bool" else rng.normal(size=shape)
    full = {
        "key_padding_mask": lambda m: np.broadcast_to(m[:, None, None, :], (N, H, L, S)),
        "attn_mask_2d": lambda m: np.broadcast_to(m, (N, H, L, S)),
        "attn_mask_3d": lambda m: m.reshape(N, H, L, S),
    }[where](mask)
    kwargs = {"key_padding_mask" if where == "key_padding_mask" else "attn_mask": mask}
    out, w = layer(q, k, v, average_attn_weights=False, **kwargs)
    ref_out, ref_w = reference_mha(
        layer, q, k, v, **({"blocked": full} if kind == "bool" else {"added": full})
    )
    assert_allclose(w, ref_w, rtol=1e-10, atol=1e-12)
    assert_allclose(out, ref_out, rtol=1e-10, atol=1e-10)


@given(layer_and_inputs(self_attention=True))
def test_self_attention_is_permutation_equivariant(problem):
    layer, x, _, _, rng = problem
    perm = rng.permutation(x.shape[1])
    out, w = layer(x, x, x)
    shuffled = x[:, perm]
    out_p, w_p = layer(shuffled, shuffled, shuffled)
    assert_allclose(out_p, out[:, perm], rtol=1e-10, atol=1e-12)
    assert_allclose(w_p, w[:, perm][:, :, perm], rtol=1e-10, atol=1e-12)


@given(layer_and_inputs(self_attention=True))
def test_fused_self_attention_path_equals_separate_projections(problem):
    layer, x, _, _, _ = problem
    fused, w_fused = layer(x, x, x)  # query is key is value
    separate, w_sep = layer(x, x.copy(), x.copy())
    assert_allclose(fused, separate, rtol=1e-12, atol=1e-13)
    assert_allclose(w_fused, w_sep, rtol=1e-12, atol=1e-13)


@given(layer_and_inputs(), st.booleans())
def test_shapes_batched_unbatched_averaged_and_per_head(problem, average):
    layer, q, k, v, _ = problem
    N, L, S, H, E = q.shape[0], q.shape[1], k.shape[1], layer.num_heads, q.shape[2]
    out, w = layer(q, k, v, average_attn_weights=average)
    assert out.shape == (N, L, E)
    assert w.shape == ((N, L, S) if average else (N, H, L, S))
    out0, w0 = layer(q[0], k[0], v[0], average_attn_weights=average)
    assert out0.shape == (L, E) and w0.shape == w.shape[1:]
    assert_allclose(out0, out[0], rtol=1e-12, atol=1e-13)
    assert_allclose(w0, w[0], rtol=1e-12, atol=1e-13)
    none_out, none_w = layer(q, k, v, need_weights=False)
    assert none_w is None
    assert_allclose(none_out, out, rtol=1e-10, atol=1e-12)


@given(layer_and_inputs())
def test_averaged_weights_are_the_mean_over_heads_and_rows_sum_to_one(problem):
    layer, q, k, v, _ = problem
    _, per_head = layer(q, k, v, average_attn_weights=False)
    _, averaged = layer(q, k, v)
    assert_allclose(averaged, per_head.mean(axis=1), rtol=1e-12, atol=1e-15)
    assert_allclose(averaged.sum(axis=-1), 1.0, rtol=1e-12)


@given(layer_and_inputs(), st.floats(0, 1))
def test_boolean_true_blocks_and_equals_minus_infinity(problem, density):
    layer, q, k, v, rng = problem
    L, S = q.shape[1], k.shape[1]
    blocked = rng.random((L, S)) < density
    out_b, w_b = layer(q, k, v, attn_mask=blocked)
    out_f, w_f = layer(q, k, v, attn_mask=np.where(blocked, -np.inf, 0.0))
    assert_array_equal(w_b, w_f)
    assert_allclose(out_b, out_f, rtol=1e-12, atol=1e-13)
    assert (w_b[:, blocked] == 0).all()  # True = may NOT attend


def test_boolean_mask_is_the_inverse_of_scaled_dot_product_attentions():
    """Same weights from the layer with `blocked` and from SDPA with `~blocked`."""
    rng = np.random.default_rng(0)
    E, H, L = 4, 1, 5
    layer = MultiHeadAttention(E, H, bias=False, rng=1)
    layer.in_proj_weight[:] = np.tile(np.eye(E), (3, 1))  # Q = K = V = X
    x = rng.normal(size=(L, E))
    blocked = ~causal_mask(L)
    _, w_layer = layer(x, x, x, attn_mask=blocked)
    _, w_sdpa = scaled_dot_product_attention(x, x, x, attn_mask=~blocked, return_weights=True)
    assert_allclose(w_layer, w_sdpa, rtol=1e-13)


@given(layer_and_inputs(self_attention=True))
def test_is_causal_applies_the_causal_mask_by_itself(problem):
    layer, x, _, _, rng = problem
    L = x.shape[1]
    out_c, w_c = layer(x, x, x, is_causal=True)
    out_m, w_m = layer(x, x, x, attn_mask=~causal_mask(L))
    assert_array_equal(w_c, w_m)
    assert_array_equal(out_c, out_m)
    pad = rng.random((x.shape[0], L)) < 0.5  # combined with padding
    _, w_both = layer(x, x, x, key_padding_mask=pad, is_causal=True)
    assert (w_both[:, ~causal_mask(L)] == 0).all()
    assert (np.swapaxes(w_both, 1, 2)[pad] == 0).all()


def test_fully_masked_query_gets_zero_weights_and_only_the_output_bias():
    rng = np.random.default_rng(3)
    layer = MultiHeadAttention(6, 2, rng=0)
    layer.out_proj_bias[:] = rng.normal(size=6)
    x = rng.normal(size=(2, 4, 6))
    blocked = np.zeros((4, 4), dtype=bool)
    blocked[1] = True  # query 1 may attend to nothing
    out, w = layer(x, x, x, attn_mask=blocked, average_attn_weights=False)
    assert (w[:, :, 1] == 0).all()
    assert_array_equal(out[:, 1], np.broadcast_to(layer.out_proj_bias, (2, 6)))
    assert np.isfinite(out).all()
    assert_allclose(w[:, :, [0, 2, 3]].sum(axis=-1), 1.0, rtol=1e-12)


def test_per_head_mask_only_changes_its_own_head():
    rng = np.random.default_rng(4)
    N, H, L, E = 2, 3, 4, 6
    layer = MultiHeadAttention(E, H, rng=5)
    x = rng.normal(size=(N, L, E))
    mask = np.zeros((N * H, L, L), dtype=bool)
    mask[1 * H + 2, :, 0] = True  # sequence 1, head 2: not key 0
    _, plain = layer(x, x, x, average_attn_weights=False)
    _, masked = layer(x, x, x, attn_mask=mask, average_attn_weights=False)
    changed = np.abs(masked - plain).max(axis=(-1, -2))  # (N, H)
    assert changed[1, 2] > 0
    assert np.count_nonzero(changed) == 1
    assert (masked[1, 2, :, 0] == 0).all()


def test_padding_keys_change_nothing_whatever_they_hold():
    rng = np.random.default_rng(6)
    layer = MultiHeadAttention(8, 4, rng=7)
    x = rng.normal(size=(1, 5, 8))
    pad = np.array([[False, False, False, True, True]])
    other = x.copy()
    other[0, 3:] = 100 * rng.normal(size=(2, 8))
    out, _ = layer(x, x, x, key_padding_mask=pad)
    out_other, _ = layer(other, other, other, key_padding_mask=pad)
    assert_array_equal(out[0, :3], out_other[0, :3])


# -- parameters and the state dict ----------------------------------------


def test_parameter_count_is_4e2_plus_4e():
    for E, H in ((8, 2), (12, 3), (512, 8)):
        sd = MultiHeadAttention(E, H, rng=0).state_dict()
        assert sum(a.size for a in sd.values()) == 4 * E**2 + 4 * E
        sd = MultiHeadAttention(E, H, bias=False, rng=0).state_dict()
        assert sum(a.size for a in sd.values()) == 4 * E**2


def test_initialisation_is_reproducible_and_dtype_is_kept():
    a = MultiHeadAttention(8, 2, rng=42).state_dict()
    b = MultiHeadAttention(8, 2, rng=np.random.default_rng(42)).state_dict()
    c = MultiHeadAttention(8, 2, rng=43).state_dict()
    for name in a:
        assert_array_equal(a[name], b[name])
    assert not np.array_equal(a["in_proj_weight"], c["in_proj_weight"])
    f32 = MultiHeadAttention(8, 2, rng=42, dtype=np.float32)
    assert all(p.dtype == np.float32 for p in f32.state_dict().values())
    x = np.ones((1, 3, 8))
    out, w = f32(x, x, x)
    assert out.dtype == np.float32 and w.dtype == np.float32
    # Xavier-uniform bound for a (3E, E) matrix: sqrt(6 / (3E + E)).
    assert np.abs(a["in_proj_weight"]).max() <= np.sqrt(6 / 32)
    assert_array_equal(a["in_proj_bias"], 0)


@pytest.mark.parametrize("kdim, vdim", [(None, None), (5, 3)])
def test_state_dict_round_trip(kdim, vdim):
    layer = MultiHeadAttention(6, 3, kdim=kdim, vdim=vdim, rng=0)
    sd = layer.state_dict()
    expected = (
        ["in_proj_weight"] if kdim is None else ["q_proj_weight", "k_proj_weight", "v_proj_weight"]
    )
    assert list(sd) == expected + ["in_proj_bias", "out_proj.weight", "out_proj.bias"]
    copy = MultiHeadAttention.from_state_dict(sd, num_heads=3)
    assert (copy.kdim, copy.vdim) == (layer.kdim, layer.vdim)
    for name, value in copy.state_dict().items():
        assert_array_equal(value, sd[name])
    sd["out_proj.weight"][:] = 0  # copies: the layer is not changed
    assert layer.out_proj_weight.any()


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda sd: sd.pop("in_proj_bias"), "no 'in_proj_bias'"),
        (lambda sd: sd.pop("in_proj_weight"), "in_proj_weight"),
        (lambda sd: sd.pop("out_proj.weight"), "out_proj.weight"),
        (
            lambda sd: sd.update(in_proj_weight=np.zeros((6, 6))),
            r"state\['in_proj_weight'\] must have shape \(18, 6\)",
        ),
        (
            lambda sd: sd.update({"out_proj.bias": np.zeros(5)}),
            r"state\['out_proj.bias'\] must have shape \(6,\)",
        ),
        (lambda sd: sd.update(bias_k=np.zeros((1, 1, 6))), "unexpected entries"),
        (lambda sd: sd.update({"out_proj.weight": np.zeros((6, 5))}), "square"),
    ],
)
def test_bad_state_dict_names_the_entry(edit, message):
    sd = MultiHeadAttention(6, 3, rng=0).state_dict()
    edit(sd)
    with pytest.raises(ValueError, match=message):
        MultiHeadAttention.from_state_dict(sd, num_heads=3)


def test_state_dict_errors_for_type_and_heads():
    sd = MultiHeadAttention(6, 3, rng=0).state_dict()
    with pytest.raises(TypeError, match="state must be a mapping"):
        MultiHeadAttention.from_state_dict(list(sd.values()), num_heads=3)
    with pytest.raises(ValueError, match="not divisible by num_heads=4"):
        MultiHeadAttention.from_state_dict(sd, num_heads=4)


# -- errors -------------------------------------------------------------------


@pytest.fixture
def small():
    layer = MultiHeadAttention(4, 2, rng=0)
    return layer, np.zeros((2, 3, 4))


@pytest.mark.parametrize("name", ["key_padding_mask", "attn_mask"])
@pytest.mark.parametrize("dtype", [np.int64, np.uint8])
def test_integer_masks_are_a_type_error_naming_the_mask(small, name, dtype):
    layer, x = small
    shape = (2, 3) if name == "key_padding_mask" else (3, 3)
    with pytest.raises(TypeError, match=f"{name} must be boolean"):
        layer(x, x, x, **{name: np.zeros(shape, dtype=dtype)})


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"key_padding_mask": np.zeros((3, 2), bool)},
            r"key_padding_mask must have shape \(2, 3\)",
        ),
        (
            {"attn_mask": np.zeros((3, 4), bool)},
            r"attn_mask must have shape \(L, S\) = \(3, 3\) or "
            r"\(N \* num_heads, L, S\) = \(4, 3, 3\)",
        ),
        ({"attn_mask": np.zeros((2, 3, 3), bool)}, "attn_mask must have shape"),
        ({"attn_mask": np.full((3, 3), np.nan)}, "attn_mask contains NaN"),
        ({"key_padding_mask": np.full((2, 3), np.inf)}, r"key_padding_mask contains NaN or \+inf"),
    ],
)
def test_bad_mask_shapes_and_values_name_the_mask(small, kwargs, message):
    layer, x = small
    with pytest.raises(ValueError, match=message):
        layer(x, x, x, **kwargs)


def test_bad_inputs_name_the_argument(small):
    layer, x = small
    with pytest.raises(ValueError, match="query has 5 features but the layer's embed_dim is 4"):
        layer(np.zeros((2, 3, 5)), x, x)
    with pytest.raises(ValueError, match="key has 3 positions but value has 2"):
        layer(x, x, x[:, :2])
    with pytest.raises(ValueError, match="batch sizes 2, 1 and 1"):
        layer(x, x[:1], x[:1])
    with pytest.raises(ValueError, match="all three must be batched"):
        layer(x, x[0], x[0])
    with pytest.raises(ValueError, match=r"query must be \(N, L, E\)"):
        layer(x[None], x[None], x[None])
    with pytest.raises(ValueError, match="value contains NaN"):
        layer(x, x, np.full_like(x, np.nan))
    with pytest.raises(TypeError, match="query must be an array of real"):
        layer(x.astype(complex), x, x)
    with pytest.raises(TypeError, match="is_causal must be True or False"):
        layer(x, x, x, is_causal=1)


@pytest.mark.parametrize(
    "args, kwargs, error, message",
    [
        ((6, 4), {}, ValueError, "embed_dim=6 is not divisible by num_heads=4"),
        ((0, 1), {}, ValueError, "embed_dim must be a positive integer"),
        ((4.0, 2), {}, TypeError, "embed_dim must be a positive integer"),
        ((4, 2), {"kdim": 0}, ValueError, "kdim must be a positive integer"),
        ((4, 2), {"dtype": np.int32}, TypeError, "dtype must be float32 or float64"),
        ((4, 2), {"bias": "yes"}, TypeError, "bias must be True or False"),
    ],
)
def test_bad_constructor_arguments(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        MultiHeadAttention(*args, **kwargs)


# -- PyTorch cross-checks -------------------------------------------------------


def _torch_pair(torch, E, H, dtype, kdim=None, vdim=None, bias=True, seed=0):
    """A torch layer with non-zero biases and our layer built from its state."""
    torch.manual_seed(seed)
    tdtype = torch.float32 if dtype == np.float32 else torch.float64
    t = torch.nn.MultiheadAttention(
        E, H, bias=bias, kdim=kdim, vdim=vdim, batch_first=True, dtype=tdtype
    ).eval()
    with torch.no_grad():
        for p in (t.in_proj_bias, t.out_proj.bias):
            if p is not None:
                p.normal_()
    ours = MultiHeadAttention.from_state_dict(
        {k: v.numpy() for k, v in t.state_dict().items()}, num_heads=H
    )
    return t, ours


MASK_KINDS = [
    "none",
    "kpm_bool",
    "kpm_float",
    "attn2d_bool",
    "attn2d_float",
    "attn3d_bool",
    "attn3d_float",
    "causal",
    "causal_and_kpm",
]


def _masks(kind, rng, N, H, L, S, dtype):
    """(kwargs for ours, kwargs for torch); key 0 is never blocked."""
    blocked2 = rng.random((L, S)) < 0.4
    blocked2[:, 0] = False
    kpm = rng.random((N, S)) < 0.4
    kpm[:, 0] = False
    blocked3 = rng.random((N * H, L, S)) < 0.4
    blocked3[..., 0] = False
    causal = ~causal_mask(L, S)
    ours = {
        "none": {},
        "kpm_bool": {"key_padding_mask": kpm},
        "kpm_float": {"key_padding_mask": rng.normal(size=(N, S)).astype(dtype)},
        "attn2d_bool": {"attn_mask": blocked2},
        "attn2d_float": {"attn_mask": rng.normal(size=(L, S)).astype(dtype)},
        "attn3d_bool": {"attn_mask": blocked3},
        "attn3d_float": {"attn_mask": rng.normal(size=(N * H, L, S)).astype(dtype)},
        "causal": {"is_causal": True},
        "causal_and_kpm": {"is_causal": True, "key_padding_mask": kpm},
    }[kind]
    theirs = dict(ours)
    if ours.get("is_causal"):  # PyTorch needs the mask itself, too
        theirs["attn_mask"] = causal
    return ours, theirs


@pytest.mark.parametrize(
    "dtype, tol", [(np.float32, 1e-5), (np.float64, 1e-10)], ids=["float32", "float64"]
)
@pytest.mark.parametrize("kind", MASK_KINDS)
@pytest.mark.parametrize("average", [True, False], ids=["averaged", "per_head"])
def test_matches_pytorch_self_attention(dtype, tol, kind, average):
    torch = pytest.importorskip("torch")
    N, H, L, E = 3, 4, 7, 16
    t, ours = _torch_pair(torch, E, H, dtype)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(N, L, E)).astype(dtype)
    mine, theirs = _masks(kind, rng, N, H, L, L, dtype)
    out, w = ours(x, x, x, average_attn_weights=average, **mine)
    tx = torch.from_numpy(x)
    with torch.no_grad():
        t_out, t_w = t(
            tx,
            tx,
            tx,
            average_attn_weights=average,
            **{
                k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v
                for k, v in theirs.items()
            },
        )
    assert out.dtype == dtype
    assert_allclose(w, t_w.numpy(), rtol=0, atol=tol)
    assert_allclose(out, t_out.numpy(), rtol=0, atol=tol)


@pytest.mark.parametrize(
    "dtype, tol", [(np.float32, 1e-5), (np.float64, 1e-10)], ids=["float32", "float64"]
)
@pytest.mark.parametrize("kind", MASK_KINDS)
def test_matches_pytorch_cross_attention_with_kdim_vdim(dtype, tol, kind):
    torch = pytest.importorskip("torch")
    N, H, L, S, E = 2, 2, 5, 6, 8
    t, ours = _torch_pair(torch, E, H, dtype, kdim=3, vdim=5, seed=1)
    rng = np.random.default_rng(2)
    q = rng.normal(size=(N, L, E)).astype(dtype)
    k = rng.normal(size=(N, S, 3)).astype(dtype)
    v = rng.normal(size=(N, S, 5)).astype(dtype)
    mine, theirs = _masks(kind, rng, N, H, L, S, dtype)
    out, w = ours(q, k, v, **mine)
    with torch.no_grad():
        t_out, t_w = t(
            *(torch.from_numpy(a) for a in (q, k, v)),
            **{
                k_: torch.from_numpy(m) if isinstance(m, np.ndarray) else m
                for k_, m in theirs.items()
            },
        )
    assert_allclose(w, t_w.numpy(), rtol=0, atol=tol)
    assert_allclose(out, t_out.numpy(), rtol=0, atol=tol)


@pytest.mark.parametrize(
    "dtype, tol", [(np.float32, 1e-5), (np.float64, 1e-10)], ids=["float32", "float64"]
)
def test_matches_pytorch_unbatched_without_bias_and_without_weights(dtype, tol):
    torch = pytest.importorskip("torch")
    t, ours = _torch_pair(torch, 6, 3, dtype, bias=False, seed=2)
    x = np.random.default_rng(3).normal(size=(4, 6)).astype(dtype)
    blocked = ~causal_mask(4)
    out, w = ours(x, x, x, attn_mask=blocked, average_attn_weights=False)
    out_nw, none = ours(x, x, x, attn_mask=blocked, need_weights=False)
    tx = torch.from_numpy(x)
    with torch.no_grad():
        t_out, t_w = t(tx, tx, tx, attn_mask=torch.from_numpy(blocked), average_attn_weights=False)
    assert w.shape == (3, 4, 4) and none is None
    assert_allclose(w, t_w.numpy(), rtol=0, atol=tol)
    assert_allclose(out, t_out.numpy(), rtol=0, atol=tol)
    assert_allclose(out_nw, t_out.numpy(), rtol=0, atol=tol)


def test_state_dict_loads_into_pytorch():
    torch = pytest.importorskip("torch")
    ours = MultiHeadAttention(8, 2, kdim=3, vdim=5, rng=0)
    t = torch.nn.MultiheadAttention(8, 2, kdim=3, vdim=5, batch_first=True, dtype=torch.float64)
    t.load_state_dict({k: torch.from_numpy(v) for k, v in ours.state_dict().items()})
    assert list(t.state_dict()) == list(ours.state_dict())


@pytest.mark.parametrize("kind", ["none", "kpm", "attn2d", "attn3d_float", "causal"])
@pytest.mark.parametrize("average", [True, False])
def test_sequences_taken_a_few_at_a_time_give_the_same_result(monkeypatch, kind, average):
    """Large batches are attended to in groups of sequences; force tiny groups."""
    import attention_lib.multi_head as multi_head

    rng = np.random.default_rng(8)
    N, H, L, S, E = 5, 2, 4, 6, 6
    layer = MultiHeadAttention(E, H, kdim=3, rng=9)
    q = rng.normal(size=(N, L, E))
    k = rng.normal(size=(N, S, 3))
    v = rng.normal(size=(N, S, E))
    kwargs = {
        "none": {},
        "kpm": {"key_padding_mask": rng.random((N, S)) < 0.5},
        "attn2d": {"attn_mask": rng.random((L, S)) < 0.5},
        "attn3d_float": {"attn_mask": rng.normal(size=(N * H, L, S))},
        "causal": {"is_causal": True},
    }[kind]
    whole = layer(q, k, v, average_attn_weights=average, **kwargs)
    for per_step in (1, 2 * H * L * S):  # 1 and 2 sequences per step
        monkeypatch.setattr(multi_head, "_SCORES_PER_STEP", per_step)
        parts = layer(q, k, v, average_attn_weights=average, **kwargs)
        assert_allclose(parts[0], whole[0], rtol=1e-12, atol=1e-14)
        assert_allclose(parts[1], whole[1], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(
    "dtype, tol", [(np.float32, 1e-5), (np.float64, 1e-10)], ids=["float32", "float64"]
)
def test_fully_masked_query_matches_pytorch_without_weights(dtype, tol):
    """With one head, PyTorch's output-only path also gives such a query a
    zero attention output. (Torch 2.13 gives NaN there when it returns
    weights, and with more than one head even without weights.)"""
    torch = pytest.importorskip("torch")
    t, ours = _torch_pair(torch, 8, 1, dtype, seed=3)
    x = np.random.default_rng(4).normal(size=(2, 4, 8)).astype(dtype)
    blocked = np.zeros((4, 4), dtype=bool)
    blocked[2] = True  # query 2: nothing left
    out, _ = ours(x, x, x, attn_mask=blocked, need_weights=False)
    tx = torch.from_numpy(x)
    with torch.no_grad():
        t_out, _ = t(tx, tx, tx, attn_mask=torch.from_numpy(blocked), need_weights=False)
    assert_allclose(out, t_out.numpy(), rtol=0, atol=tol)
    assert_allclose(out[:, 2], np.broadcast_to(ours.out_proj_bias, (2, 8)), rtol=0, atol=tol)


def test_finite_float64_biases_on_a_float32_layer_stay_biases_not_masks():
    layer = MultiHeadAttention(4, 2, rng=0, dtype=np.float32)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(1, 4)).astype(np.float32)
    y = rng.normal(size=(2, 4)).astype(np.float32)
    with np.errstate(over="raise"):
        _, w = layer(x, y, y, attn_mask=np.array([[-1e39, -2e39]]))
    assert_array_equal(w, [[1.0, 0.0]])  # was [0, 0]: every key masked
    _, w = layer(x, y, y, key_padding_mask=np.array([-2e39, -1e39]))
    assert_array_equal(w, [[0.0, 1.0]])


def test_groups_of_sequences_share_the_cores_and_give_the_same_bits(monkeypatch):
    """With BLAS on two threads the groups run on two Python threads: the same bits as on one."""
    import threading

    from threadpoolctl import threadpool_info, threadpool_limits

    import attention_lib._kernel as kernel
    import attention_lib.multi_head as multi_head

    rng = np.random.default_rng(3)
    layer = MultiHeadAttention(16, 4, rng=4, dtype=np.float32)
    layer.in_proj_bias[:] = rng.normal(size=48)
    x = rng.normal(size=(6, 10, 16)).astype(np.float32)
    monkeypatch.setattr(multi_head, "_SCORES_PER_STEP", 1)  # one sequence per group
    with threadpool_limits(limits=1, user_api="blas"):
        one = layer(x, x, x, average_attn_weights=False)
    seen, real_run = set(), kernel.run_in_threads

    def spy(work, groups):
        def recorded(parts):
            blas = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
            seen.add((threading.get_ident(), max(blas)))
            return work(parts)

        return real_run(recorded, groups)

    monkeypatch.setattr(multi_head, "run_in_threads", spy)
    with threadpool_limits(limits=2, user_api="blas"):
        two = layer(x, x, x, average_attn_weights=False)
        after = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    assert len({ident for ident, _ in seen}) == 2  # two workers
    assert {blas for _, blas in seen} == {1}  # each with one BLAS thread
    assert after and set(after) == {2}  # and BLAS's threads given back
    assert_array_equal(two[0], one[0])
    assert_array_equal(two[1], one[1])


@pytest.mark.parametrize("failing", [0, 3], ids=["this thread's share", "a pool thread's"])
def test_an_error_in_any_share_reaches_the_caller_after_every_share_ends(failing):
    import time

    from threadpoolctl import threadpool_limits

    from attention_lib._kernel import run_in_threads

    done = []

    def work(parts):
        time.sleep(0.05 if failing in parts else 0.2)  # the failing share ends first
        if failing in parts:
            raise ValueError(f"group {failing} failed")
        done.append(parts)

    with threadpool_limits(limits=2, user_api="blas"):
        with pytest.raises(ValueError, match=f"group {failing} failed"):
            run_in_threads(work, [0, 1, 2, 3])
    assert len(done) == 1  # the other share had finished
