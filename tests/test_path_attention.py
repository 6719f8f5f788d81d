"""The path aggregator's attention as one CPU kernel (``csrc/path_attention.cpp`` via
``tbdfs_dgl.nn._path_attention``) against the aggregator's torch path.

No DGL here: the sanitizer run (``make sanitize``) covers this file.
"""
import contextlib

import numpy as np
import pytest
import torch

from tbdfs_dgl.nn import PathAggregator, _native
from tbdfs_dgl.nn import _path_attention as pa

torch.set_num_threads(1)

try:
    from tbdfs_dgl import _C
except Exception:  # pragma: no cover - only while the extension is not built
    _C = None
pytestmark = pytest.mark.skipif(_C is None or not hasattr(_C, "path_attention_forward"),
                                reason="extension not built")


def torch_path():
    return _native.disabled("path_attention_forward")


def inputs(B, P, D, Q, seed, fill=0.7):
    g = torch.Generator().manual_seed(seed)
    feat = torch.randn(B, P, D, generator=g, requires_grad=True)
    query = torch.randn(B, Q, generator=g, requires_grad=True)
    mask = torch.rand(B, P, generator=g) < fill
    mask[0] = False  # a root without any path
    if B > 1:
        mask[1] = False
        mask[1, -1] = True  # a root with one path, its last
    return feat, query, mask


def run(agg, feat, query, mask, proj, seed, off):
    """Outputs, weights and every gradient of one aggregation; the dropout stream seeded."""
    torch.manual_seed(seed)
    with torch_path() if off else contextlib.nullcontext():
        out, weight = agg._aggregate(feat, query, mask, proj, get_attention=True)
    g = torch.Generator().manual_seed(seed + 1)
    loss = (out * torch.randn(out.shape, generator=g)).sum() + \
        (weight * torch.randn(weight.shape, generator=g)).sum()
    params = [feat, query] + list(agg.parameters()) + (list(proj.parameters()) if proj else [])
    grads = torch.autograd.grad(loss, params)
    return [out.detach(), weight.detach()] + list(grads)


def close(a, b, rtol):
    scale = max(1.0, b.abs().max().item())
    return torch.allclose(a, b, rtol=rtol, atol=rtol * scale)


@pytest.mark.parametrize("shape", [(6, 10, 16, 2), (3, 1, 8, 1), (5, 7, 12, 3)],
                         ids=["two_heads", "one_path", "three_heads"])
@pytest.mark.parametrize("train", [False, True], ids=["eval", "train_dropout"])
@pytest.mark.parametrize("with_proj", [False, True], ids=["plain", "encoder_last_linear"])
def test_kernel_equals_the_torch_path(monkeypatch, shape, train, with_proj):
    B, P, D, H = shape
    seed = B * 100 + P
    torch.manual_seed(seed)
    agg = PathAggregator(D, 9, H, query_dim=11, attn_drop=0.3).train(train)
    proj = torch.nn.Linear(D, D) if with_proj else None
    feat, query, mask = inputs(B, P, D, 11, seed)
    calls = []
    real = pa.path_attention
    monkeypatch.setattr(pa, "path_attention", lambda *a: calls.append(1) or real(*a))
    fused = run(agg, feat, query, mask, proj, seed, off=False)
    assert calls, "the kernel did not run"
    calls.clear()
    plain = run(agg, feat, query, mask, proj, seed, off=True)
    assert not calls
    out, weight = fused[0], fused[1]
    assert weight.shape == (B, P, H)
    # no path: zero output and weights; absent paths: zero weight
    assert torch.equal(out[0], torch.zeros_like(out[0]))
    assert torch.equal(weight[~mask], torch.zeros_like(weight[~mask]))
    if not train:  # without dropout each head's weights sum to 1 over the present paths
        sums = weight.sum(dim=1)[mask.any(dim=1)]
        assert torch.allclose(sums, torch.ones_like(sums), atol=1e-6)
    # the same dropout draws as the torch path: the weights agree entry by entry
    assert close(fused[1], plain[1], 1e-5)
    assert close(fused[0], plain[0], 1e-5)
    for a, b in zip(fused[2:], plain[2:]):
        assert close(a, b, 1e-4)


def test_only_the_weights_or_only_the_sum_used():
    # A gradient may reach one output alone: the other comes to backward as None.
    feat, query, mask = inputs(4, 5, 6, 6, seed=3)
    q = query.view(4, 1, 6)
    drop = torch.full((4, 1, 5), 2.0)
    for which in (0, 1):
        outs = pa.path_attention(feat, q, mask, drop)
        g = torch.autograd.grad(outs[which].sum(), [feat, q])
        with torch_path():
            scores = torch.einsum("bpd,bhd->bph", feat, q)
            scores = scores.masked_fill(~mask.unsqueeze(-1), float("-inf"))
            prob = torch.softmax(scores, dim=1).nan_to_num(0.0) * drop.transpose(1, 2)
            ref = (torch.einsum("bph,bpd->bhd", prob, feat), prob)
            g_ref = torch.autograd.grad(ref[which].sum(), [feat, q])
        assert close(outs[which], ref[which], 1e-5)
        for a, b in zip(g, g_ref):
            assert close(a, b, 1e-4)


def test_same_bits_whatever_the_thread_count():
    # Every root is computed by one thread in a fixed order.
    feat, query, mask = inputs(70, 9, 12, 12, seed=5)
    q = query.view(70, 2, 6).repeat(1, 1, 2).contiguous()
    results = []
    before = torch.get_num_threads()
    try:
        for threads in (1, 3):
            torch.set_num_threads(threads)
            agg, weight = pa.path_attention(feat, q, mask)
            results.append([agg.detach(), weight.detach()] + list(torch.autograd.grad(
                (agg * agg).sum() + weight.sum(), [feat, q])))
    finally:
        torch.set_num_threads(before)
    for a, b in zip(*results):
        assert torch.equal(a, b)


def test_nan_propagates_as_in_torch():
    # A NaN in a present path makes its root's output NaN, as in torch: a diverging model
    # is not hidden by the kernel.  An absent path's features never enter.
    feat, query, mask = inputs(3, 4, 6, 6, seed=7, fill=1.0)
    with torch.no_grad():
        feat[2, 1, 3] = float("nan")
    q = query.view(3, 1, 6)
    agg, weight = pa.path_attention(feat, q, mask)
    assert torch.isnan(agg[2]).all() and not torch.isnan(agg[:2]).any()
    mask[2, 1] = False
    agg, weight = pa.path_attention(feat, q, mask)
    assert not torch.isnan(agg).any() and not torch.isnan(weight).any()


def test_no_roots():
    feat, query, mask = torch.zeros(0, 4, 6), torch.zeros(0, 2, 6), torch.zeros(0, 4, dtype=torch.bool)
    agg, weight = pa.path_attention(feat.requires_grad_(), query, mask)
    assert agg.shape == (0, 2, 6) and weight.shape == (0, 4, 2)
    (g,) = torch.autograd.grad(agg.sum(), [feat])
    assert g.shape == feat.shape


def test_backward_after_the_kernels_are_switched_off():
    # A forward that ran the kernel keeps its backward kernel, whatever is switched off
    # between the two (benchmarks and tests toggle them).
    feat, query, mask = inputs(3, 4, 6, 6, seed=9)
    q = query.view(3, 1, 6)
    agg, _ = pa.path_attention(feat, q, mask)
    with _native.all_disabled():
        (g,) = torch.autograd.grad(agg.sum(), [feat])
    (g_ref,) = torch.autograd.grad(pa.path_attention(feat, q, mask)[0].sum(), [feat])
    assert torch.equal(g, g_ref)


def test_bad_input_is_a_clear_error():
    B, P, H, D = 2, 3, 2, 4
    f = np.float32
    feat, query = np.zeros((B, P, D), f), np.zeros((B, H, D), f)
    mask = np.ones((B, P), bool)
    prob, weight, agg = np.zeros((B, H, P), f), np.zeros((B, H, P), f), np.zeros((B, H, D), f)
    fwd = _C.path_attention_forward
    with pytest.raises(ValueError, match="feat must be 3-D"):
        fwd(feat[0], query, mask, None, prob, None, agg)
    with pytest.raises(ValueError, match="query must have shape"):
        fwd(feat, query[:, :, :3].copy(), mask, None, prob, None, agg)
    with pytest.raises(ValueError, match="mask must have shape"):
        fwd(feat, query, mask[:, :2].copy(), None, prob, None, agg)
    with pytest.raises(ValueError, match="drop must have shape"):
        fwd(feat, query, mask, np.ones((B, P, H), f), prob, weight, agg)
    with pytest.raises(ValueError, match="weight is needed"):
        fwd(feat, query, mask, np.ones((B, H, P), f), prob, None, agg)
    with pytest.raises(ValueError, match="agg must have shape"):
        fwd(feat, query, mask, None, prob, None, agg[:, :1].copy())
    with pytest.raises(ValueError, match="num_threads"):
        fwd(feat, query, mask, None, prob, None, agg, 0)
    read_only = agg.copy()
    read_only.setflags(write=False)
    with pytest.raises(ValueError, match="writeable"):
        fwd(feat, query, mask, None, prob, None, read_only)
    with pytest.raises(TypeError):  # float64 is not converted behind the caller's back
        fwd(feat.astype(np.float64), query, mask, None, prob, None, agg)
    bwd = _C.path_attention_backward
    with pytest.raises(ValueError, match="grad_feat must have shape"):
        bwd(feat, query, mask, None, prob, agg, None, np.zeros((B, P, D + 1), f), agg.copy())
    with pytest.raises(ValueError, match="grad_weight must have shape"):
        bwd(feat, query, mask, None, prob, agg, np.zeros((B, P, H), f), None, agg.copy())
