"""Tests of the neural modules against naive, loop-based references of the same formulas."""
import math
import sys

import dgl
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tbdfs_dgl.batch import PathBatch
from tbdfs_dgl.nn import (PathAggregator, PathEncoder, TemporalAttentionConv, TimeEncoder,
                          masked_softmax)
from tbdfs_dgl.nn import _native

torch.set_num_threads(1)


# ----------------------------------------------------------------------------- helpers
def ref_attention(weight_q, weight_k, weight_v, q_in, kv_in, num_heads):
    """Multi-head scaled dot-product attention of one query over rows of kv_in (concat form)."""
    q = (weight_q @ q_in).view(num_heads, -1)
    k = (kv_in @ weight_k.t()).view(kv_in.shape[0], num_heads, -1)
    v = (kv_in @ weight_v.t()).view(kv_in.shape[0], num_heads, -1)
    scores = (k * q).sum(-1) / math.sqrt(q.shape[-1])  # [n, H]
    attn = torch.softmax(scores, dim=0)
    return (attn.unsqueeze(-1) * v).sum(0).reshape(-1)


def ref_conv(conv, block, h, edge_feat, dt, padding_feat=None):
    """TGAT layer computed destination by destination from the concatenated inputs
    (``padding_feat``: the padding slots' node input, zero if ``None``)."""
    src, dst = block.edges()
    num_dst = block.num_dst_nodes()
    T = conv._time_dim  # 0 without time: the layer then has no time columns
    phi0 = conv.time_encoder(torch.zeros(1, dtype=torch.float64))[0, :T]
    outs = []
    for i in range(num_dst):
        eids = (dst == i).nonzero().flatten()
        h_i = h[i]
        if len(eids) == 0 and conv.empty_neighbourhood == "padding":
            # TGAT's and DyGLib's code: padding slots (node 0 with zero inputs) at time 0,
            # all masked, so the softmax is uniform over identical slots: one slot's value.
            t_i = block.dstdata["ts"][i:i + 1].double()
            pad_h = (torch.zeros(1, conv._in_src_dim) if padding_feat is None
                     else padding_feat.reshape(1, -1))
            kv = torch.cat([pad_h, torch.zeros(1, conv._edge_dim),
                            conv.time_encoder(t_i)[:, :T]], dim=-1)
            agg = ref_attention(conv.fc_q.weight, conv.fc_k.weight, conv.fc_v.weight,
                                torch.cat([h_i, phi0]), kv, conv._num_heads)
        elif len(eids) == 0:
            agg = torch.zeros(conv.fc_v.out_features)
        else:
            x = (edge_feat[eids] if edge_feat is not None
                 else torch.zeros(len(eids), conv._edge_dim))
            kv = torch.cat([h[src[eids]], x, conv.time_encoder(dt[eids])[:, :T]], dim=-1)
            agg = ref_attention(conv.fc_q.weight, conv.fc_k.weight, conv.fc_v.weight,
                                torch.cat([h_i, phi0]), kv, conv._num_heads)
        if conv.attn_norm:  # W_O, then LayerNorm (dropout: none in these tests)
            o = conv.fc_o(agg)
            if conv.attn_residual:  # DyGLib's residual: the query input [h_i || Φ(0)]
                o = o + torch.cat([h_i, phi0])
            agg = F.layer_norm(o, (agg.shape[0],),
                               conv.attn_layer_norm.weight, conv.attn_layer_norm.bias)
        hidden = F.relu(conv.fc1(torch.cat([h_i, agg])))
        outs.append(conv.fc2(hidden))
    return torch.stack(outs)


def random_paths(B, P, L, num_inst, num_edges, p_empty=0.3, seed=0):
    """A PathBatch whose slots point at random instances/edges (hops present as a prefix)."""
    g = torch.Generator().manual_seed(seed)
    length = torch.randint(0, L + 1, (B, P), generator=g)
    length[torch.rand(B, P, generator=g) < 1 - p_empty] = L
    mask = torch.arange(L).view(1, 1, L) < length.unsqueeze(-1)
    src_index = torch.randint(0, num_inst, (B, P, L), generator=g).masked_fill(~mask, -1)
    eids = torch.randint(0, num_edges, (B, P, L), generator=g).masked_fill(~mask, -1)
    ts = (torch.rand(B, P, L, generator=g, dtype=torch.float64) * 50).masked_fill(~mask, -1)
    return PathBatch(nodes=src_index.clone(), eids=eids, ts=ts, mask=mask, src_index=src_index)


def ref_path_encoder(enc, paths, feat, query, root_times, edge_feat):
    """PathEncoder path by path."""
    B, P, L = paths.mask.shape
    T = enc._time_dim
    phi0 = enc.time_encoder(torch.zeros(1, dtype=torch.float64))[0, :T]
    out = torch.zeros(B, P, enc._out_dim)
    for b in range(B):
        z0 = torch.cat([query[b], torch.zeros(enc._edge_dim), phi0])
        for p in range(P):
            rows = [z0]
            for h in range(L):
                if not paths.mask[b, p, h]:
                    continue
                x = (edge_feat[paths.eids[b, p, h]] if edge_feat is not None
                     else torch.zeros(enc._edge_dim))
                dt = root_times[b] - paths.ts[b, p, h]
                rows.append(torch.cat([feat[paths.src_index[b, p, h]], x,
                                       enc.time_encoder(dt.view(1))[0, :T]]))
            kv = torch.stack(rows)
            if enc._within_path_agg == "attn":
                q_in = torch.cat([query[b], phi0])
                agg = ref_attention(enc.fc_q.weight, enc.fc_k.weight, enc.fc_v.weight, q_in,
                                    kv, enc._num_heads)
            else:
                agg = (kv.mean(0, keepdim=True) @ enc.fc_v.weight.t())[0]
            out[b, p] = enc.fc2(F.relu(enc.fc1(torch.cat([query[b], agg]))))
    return out


# -------------------------------------------------------------------------- TimeEncoder
def test_time_encoder_shape_init_and_float64_phase():
    enc = TimeEncoder(100)
    assert enc.weight.shape == (50,)
    np.testing.assert_allclose(enc.weight.detach().numpy(),
                               1 / 10 ** np.linspace(0, 9, 50), rtol=1e-6)
    dt = torch.tensor([[0.0, 1.0], [12345.678, 1e8]], dtype=torch.float64)
    phi = enc(dt).detach()
    assert phi.shape == (2, 2, 100) and phi.dtype == torch.float32
    w = enc.weight.detach().double().numpy()
    phase = dt.numpy()[..., None] * w
    ref = np.stack([np.cos(phase), np.sin(phase)], axis=-1).reshape(2, 2, 100) / np.sqrt(50)
    # float32 output of a float64 phase: only the final rounding (~1e-8) is lost, where a
    # float32 phase of 1e8 s would be off by whole radians.
    np.testing.assert_allclose(phi.numpy(), ref, atol=1e-7, rtol=0)
    phase32 = dt.float().numpy()[..., None] * w.astype(np.float32)
    assert np.abs(np.cos(phase32) / np.sqrt(50) - ref[..., 0::2]).max() > 1e-2
    assert torch.allclose(phi[0, 0], torch.tensor([1.0, 0.0] * 50) / math.sqrt(50))


def test_time_encoder_gradient_matches_autograd_reference():
    enc = TimeEncoder(8)
    dt = torch.tensor([0.5, 3.0, 1e4, 7e7], dtype=torch.float64)
    coef = torch.randn(4, 8)
    (enc(dt) * coef).sum().backward()
    w = enc.weight.detach().double().requires_grad_()
    phase = dt.unsqueeze(-1) * w
    ref = torch.stack([torch.cos(phase), torch.sin(phase)], -1).flatten(-2) / 2.0
    (ref * coef.double()).sum().backward()
    assert torch.allclose(enc.weight.grad.double(), w.grad, rtol=1e-4, atol=1e-6)


@pytest.fixture
def torch_time_path():
    """Run TimeEncoder on its pure-torch path (as on a GPU) instead of the C++ kernel."""
    with _native.disabled("time_encode"):
        yield


def _exact_phi(dt, w):
    # A long-double phase reduced modulo 2*pi: the value both paths approximate.
    ph = dt.astype(np.longdouble)[:, None] * w.astype(np.longdouble)[None, :]
    ph -= np.round(ph / (2 * np.longdouble(np.pi))) * (2 * np.longdouble(np.pi))
    ph = ph.astype(np.float64)
    return np.stack([np.cos(ph), np.sin(ph)], -1).reshape(len(dt), -1) / np.sqrt(len(w))


def test_time_encoder_native_kernel_matches_exact_and_torch_path():
    kernel = _native.native("time_encode")
    if kernel is None:
        pytest.skip("the compiled extension is not built")
    enc = TimeEncoder(100)
    with torch.no_grad():  # learned frequencies may leave the initial grid
        enc.weight.mul_(torch.linspace(0.5, 3.0, 50))
    rng = np.random.default_rng(0)
    dt = np.concatenate([rng.uniform(0, 2e8, 5000), rng.uniform(-50, 50, 500),
                         [0.0, 1e-12, np.pi / 2, 3e7, 1e8, -1e8]])
    exact = _exact_phi(dt, enc.weight.detach().double().numpy())
    fast = enc(torch.from_numpy(dt)).detach().numpy()
    assert np.abs(fast - exact).max() < 5e-8
    with _native.disabled("time_encode"):
        assert _native.native("time_encode") is None
        slow = enc(torch.from_numpy(dt)).detach().numpy()
    assert _native.native("time_encode") is kernel
    assert np.abs(slow - exact).max() < 5e-8
    # Elementwise: the thread count never changes a bit.
    w = enc.weight.detach().double().numpy()
    outs = []
    for threads in (1, 2, 7):
        out = np.empty((len(dt), 100), np.float32)
        kernel(dt, w, 0.5, out, threads)
        outs.append(out)
    assert all(np.array_equal(outs[0], o) for o in outs[1:])


@pytest.mark.parametrize("dt", [[1e16, 1.6e18], [3e15, 1e16, -7e17, 2.0**52 + 2, 2.0**62],
                                [1e8, 2.0**29, 2.0**30 + 0.5, 123.25], [1e300, -3e250]])
def test_time_encoder_is_exact_and_paths_agree_at_huge_phases(dt):
    """Phases past 2**51 rad (nanosecond gaps) used to give values up to 6.6e10: both paths
    must stay on the circle and match the exact product's cosine and sine."""
    import reference as ref

    enc = TimeEncoder(16)
    with torch.no_grad():
        enc.weight.mul_(torch.linspace(0.5, 3.0, 8))
    x = torch.tensor(dt, dtype=torch.float64)
    scale = enc.weight.shape[0] ** -0.5
    outs = {"native": enc(x).detach()}
    with _native.disabled("time_encode"):
        outs["torch"] = enc(x).detach()
        with _native.disabled("reduce_phases"):  # large phases without the extension
            outs["torch, pure Python reduction"] = enc(x).detach()
    w = enc.weight.detach().double().tolist()
    want = torch.tensor([[v for wk in w for v in ref.exact_cos_sin(wk, t)] for t in dt])
    for name, out in outs.items():
        assert out.abs().max() <= scale * (1 + 1e-6), name
        # float32 output: a few ulps of the scale
        assert (out.double() - scale * want).abs().max() <= 4e-7 * scale, name
    assert (outs["native"] - outs["torch"]).abs().max() <= 3e-7 * scale


def test_time_encoder_native_kernel_rejects_bad_buffers():
    native = _native.native("time_encode") and sys.modules["tbdfs_dgl._C"]
    if not native:
        pytest.skip("the compiled extension is not built")
    dt, w = np.zeros(4), np.ones(3)
    with pytest.raises(ValueError, match="shape"):
        native.time_encode(dt, w, 1.0, np.empty((4, 3), np.float32))
    with pytest.raises(TypeError):  # never written into a converted copy
        native.time_encode(dt, w, 1.0, np.empty((4, 6), np.float64))
    with pytest.raises(TypeError):
        native.time_encode(dt, w, 1.0, np.empty((6, 4), np.float32).T)
    with pytest.raises(ValueError, match="1-D"):
        native.time_encode(np.zeros((2, 2)), w, 1.0, np.empty((4, 6), np.float32))
    with pytest.raises(ValueError, match="num_threads"):
        native.time_encode(dt, w, 1.0, np.empty((4, 6), np.float32), 0)


def test_time_encoder_gradient_on_the_torch_path_too(torch_time_path):
    test_time_encoder_gradient_matches_autograd_reference()
    test_time_encoder_shape_init_and_float64_phase()


def test_time_encoder_without_time_and_validation():
    enc = TimeEncoder(6, use_time=False)
    assert list(enc.parameters()) == [] and enc.effective_dim == 0
    assert torch.equal(enc(torch.rand(3, 2)), torch.zeros(3, 2, 6))
    for bad in (0, 3, -2, 2.0):
        with pytest.raises(ValueError):
            TimeEncoder(bad)


# ------------------------------------------------------------- TemporalAttentionConv
def hand_block():
    # 3 destinations; destination 2 has no in-edge; sources 3..6 are neighbours.
    src = torch.tensor([3, 4, 5, 6, 1])
    dst = torch.tensor([0, 0, 1, 1, 0])
    block = dgl.create_block((src, dst), num_src_nodes=7, num_dst_nodes=3)
    block.edata["dt"] = torch.tensor([1.0, 250.0, 3.5, 1e7, 0.0], dtype=torch.float64)
    return block


@pytest.mark.parametrize("edge_dim,use_time", [(0, True), (5, True), (5, False)])
def test_conv_matches_reference(edge_dim, use_time):
    torch.manual_seed(0)
    conv = TemporalAttentionConv(6, 8, num_heads=2, edge_dim=edge_dim,
                                 time_encoder=TimeEncoder(4, use_time=use_time))
    block = hand_block()
    h = torch.randn(7, 6)
    x = torch.randn(5, edge_dim) if edge_dim else None
    out = conv(block, h, x)
    assert out.shape == (3, 8)
    ref = ref_conv(conv, block, h, x, block.edata["dt"])
    assert torch.allclose(out, ref, atol=1e-5)


@pytest.mark.parametrize("attn_dim,attn_norm,residual",
                         [(None, True, False), (12, False, False), (12, True, False),
                          (10, True, True)])
def test_conv_attention_form_matches_reference(attn_dim, attn_norm, residual):
    torch.manual_seed(0)
    conv = TemporalAttentionConv(6, 8, num_heads=2, edge_dim=5, time_dim=4,
                                 attn_dim=attn_dim, attn_norm=attn_norm,
                                 attn_residual=residual)
    with torch.no_grad():  # away from the identity, so that the test sees them
        if attn_norm:
            conv.attn_layer_norm.weight.uniform_(0.5, 1.5)
            conv.attn_layer_norm.bias.uniform_(-0.5, 0.5)
            conv.fc_o.bias.uniform_(-0.5, 0.5)
    assert conv.attn_dim == (attn_dim or 8) and conv.attn_norm == attn_norm
    assert conv.fc_v.out_features == conv.attn_dim
    assert (conv.fc_o is None) != attn_norm
    block = hand_block()
    h = torch.randn(7, 6)
    x = torch.randn(5, 5)
    out = conv(block, h, x)
    assert out.shape == (3, 8)
    assert torch.allclose(out, ref_conv(conv, block, h, x, block.edata["dt"]), atol=1e-5)
    out.sum().backward()
    for name, p in conv.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    # TGAT's form keeps TGAT's parameter names (its checkpoints' keys).
    names = {n for n, _ in conv.named_parameters()}
    assert ("fc_o.weight" in names) == attn_norm
    assert ("attn_layer_norm.weight" in names) == attn_norm
    if attn_norm:
        assert "attn_norm=True" in repr(conv)
    assert conv.attn_residual == residual
    assert ("attn_residual=True" in repr(conv)) == residual


@pytest.mark.parametrize("form", ["tgat", "attn_norm", "residual"])
@pytest.mark.parametrize("featureless", [False, True])
def test_conv_padding_of_empty_neighbourhoods_matches_reference(form, featureless):
    """empty_neighbourhood='padding': a destination without in-edges attends over padding
    at time 0, as TGAT's and DyGLib's code do; the others are unchanged."""
    torch.manual_seed(0)
    kw = dict(num_heads=2, edge_dim=5, time_dim=4, attn_norm=form != "tgat", init="torch")
    if form == "residual":
        kw.update(attn_dim=10, attn_residual=True)
    conv = TemporalAttentionConv(6, 8, empty_neighbourhood="padding", **kw)
    zero = TemporalAttentionConv(6, 8, **kw)
    zero.load_state_dict(conv.state_dict())  # the option adds no parameter
    assert "empty_neighbourhood='padding'" in repr(conv) and "empty" not in repr(zero)
    block = hand_block()  # destination 2 has no in-edge
    # Absolute times as a real graph's clock gives them (Unix seconds): Φ needs float64.
    block.dstdata["ts"] = torch.tensor([1.0e9, 1.0e9 + 7.5, 1.09e9], dtype=torch.float64)
    h = torch.zeros(7, 6) if featureless else torch.randn(7, 6)
    x = torch.randn(5, 5)
    out = conv(block, None if featureless else h, x)
    assert torch.allclose(out, ref_conv(conv, block, h, x, block.edata["dt"]), atol=1e-5)
    plain = zero(block, None if featureless else h, x)
    assert torch.equal(out[:2], plain[:2])
    assert (out[2] - plain[2]).abs().max() > 1e-3
    # Its value depends on the destination's own time.
    block.dstdata["ts"] = torch.tensor([1.0e9, 1.0e9 + 7.5, 3.0e6], dtype=torch.float64)
    moved = conv(block, None if featureless else h, x)
    assert torch.equal(moved[:2], out[:2]) and (moved[2] - out[2]).abs().max() > 1e-3
    out.sum().backward()
    assert conv.fc_v.weight.grad[:, 11:].abs().sum() > 0  # Φ(t_i)'s columns of W_V


@pytest.mark.parametrize("form", ["tgat", "attn_norm", "residual"])
@pytest.mark.parametrize("featureless", [False, True])
def test_conv_padding_node_input_matches_reference(form, featureless):
    """padding_feat: the padding slots carry the padding node's embedding (TGAT's and
    DyGLib's recursion above the first layer); padding_output is that embedding, i.e. the
    layer's output for a destination without history at time 0 whose input is the
    padding node's."""
    torch.manual_seed(0)
    kw = dict(num_heads=2, edge_dim=5, time_dim=4, attn_norm=form != "tgat", init="torch",
              empty_neighbourhood="padding")
    if form == "residual":
        kw.update(attn_dim=10, attn_residual=True)
    conv = TemporalAttentionConv(6, 8, **kw)
    block = hand_block()  # destination 2 has no in-edge
    block.dstdata["ts"] = torch.tensor([1.0e9, 1.0e9 + 7.5, 1.09e9], dtype=torch.float64)
    h = torch.zeros(7, 6) if featureless else torch.randn(7, 6)
    x = torch.randn(5, 5)
    pad = torch.randn(1, 6, requires_grad=True)
    out = conv(block, None if featureless else h, x, padding_feat=pad)
    ref = ref_conv(conv, block, h, x, block.edata["dt"], padding_feat=pad)
    assert torch.allclose(out, ref, atol=1e-5)
    plain = conv(block, None if featureless else h, x)
    assert torch.equal(out[:2], plain[:2]) and (out[2] - plain[2]).abs().max() > 1e-3
    out[2].sum().backward()
    assert pad.grad is not None and pad.grad.abs().sum() > 0
    # The padding node's own output: a destination at time 0, no in-edge, input `pad`.
    alone = dgl.create_block((torch.tensor([], dtype=torch.int64),
                              torch.tensor([], dtype=torch.int64)),
                             num_src_nodes=1, num_dst_nodes=1)
    alone.edata["dt"] = torch.zeros(0, dtype=torch.float64)
    alone.dstdata["ts"] = torch.zeros(1, dtype=torch.float64)
    with torch.no_grad():
        expected = conv(alone, pad, torch.zeros(0, 5), padding_feat=pad)
        assert torch.allclose(conv.padding_output(pad), expected, atol=1e-6)
        first = conv(alone, torch.zeros(1, 6), torch.zeros(0, 5))
        assert torch.allclose(conv.padding_output(), first, atol=1e-6)


def test_conv_padding_node_input_is_checked():
    conv = TemporalAttentionConv(6, 8, time_dim=4, empty_neighbourhood="padding")
    block = hand_block()
    block.dstdata["ts"] = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    with pytest.raises(ValueError, match=r"padding_feat must be \[6\] or \[1, 6\]"):
        conv(block, torch.randn(7, 6), padding_feat=torch.zeros(2, 6))
    with pytest.raises(TypeError, match="padding_feat must be a tensor"):
        conv.padding_output([0.0] * 6)
    assert conv(block, torch.randn(7, 6), padding_feat=torch.zeros(6)).shape == (3, 8)
    zero = TemporalAttentionConv(6, 8, time_dim=4)
    with pytest.raises(ValueError, match="needs empty_neighbourhood='padding'"):
        zero(block, torch.randn(7, 6), padding_feat=torch.zeros(1, 6))
    with pytest.raises(ValueError, match="needs empty_neighbourhood='padding'"):
        zero.padding_output()
    pair = TemporalAttentionConv((6, 5), 8, time_dim=4, empty_neighbourhood="padding")
    with pytest.raises(ValueError, match="two input widths"):
        pair.padding_output(torch.zeros(1, 6))
    # Without time the padding node's input is all a padded slot carries.
    no_time = TemporalAttentionConv(6, 8, time_encoder=TimeEncoder(4, use_time=False),
                                    empty_neighbourhood="padding")
    h = torch.randn(7, 6)
    moved = no_time(hand_block(), h, padding_feat=torch.ones(1, 6))
    still = no_time(hand_block(), h)
    assert torch.equal(moved[:2], still[:2]) and (moved[2] - still[2]).abs().max() > 1e-4


def test_conv_padding_needs_times_and_a_known_value():
    with pytest.raises(ValueError, match="empty_neighbourhood must be one of"):
        TemporalAttentionConv(6, 8, time_dim=4, empty_neighbourhood="pad")
    conv = TemporalAttentionConv(6, 8, time_dim=4, empty_neighbourhood="padding")
    with pytest.raises(ValueError, match=r"dstdata\['ts'\]"):
        conv(hand_block(), torch.randn(7, 6))  # no destination times on this graph
    # Without time the padding carries nothing: no times needed, same as 'zero'.
    no_time = TemporalAttentionConv(6, 8, time_encoder=TimeEncoder(4, use_time=False),
                                    empty_neighbourhood="padding")
    assert no_time(hand_block(), torch.randn(7, 6)).shape == (3, 8)


def test_conv_init_forms_and_dropout_placement():
    torch.manual_seed(0)
    xavier = TemporalAttentionConv(6, 8, num_heads=2, time_dim=4, attn_norm=True)
    assert float(xavier.fc1.bias.abs().sum()) == 0.0
    assert float(xavier.fc_o.bias.abs().sum()) == 0.0
    torch_init = TemporalAttentionConv(6, 8, num_heads=2, time_dim=4, attn_norm=True,
                                       init="torch")
    assert "init='torch'" in repr(torch_init)
    for lin in (torch_init.fc_q, torch_init.fc1, torch_init.fc_o):  # U(+-1/sqrt(fan_in))
        bound = 1.0 / math.sqrt(lin.in_features)
        assert float(lin.weight.abs().max()) <= bound
    assert float(torch_init.fc1.bias.abs().sum()) > 0.0
    # attn_norm moves the merge's dropout onto W_O's output (DyGLib's places). With W_O
    # zeroed (b_O is zero from the init) that dropout acts on zeros, so train and eval
    # outputs can only differ if a dropout is left on the merge's hidden layer, as TGAT's
    # form has it (checked last).
    conv = TemporalAttentionConv(6, 8, num_heads=2, time_dim=4, attn_norm=True, feat_drop=0.5)
    with torch.no_grad():
        conv.fc_o.weight.zero_()
    block, h = hand_block(), torch.randn(7, 6)
    train_out = conv(block, h)
    assert torch.equal(train_out, conv.eval()(block, h))
    tgat = TemporalAttentionConv(6, 8, num_heads=2, time_dim=4, feat_drop=0.5)
    assert not torch.equal(tgat(block, h), tgat.eval()(block, h))


def test_conv_attention_form_validation():
    with pytest.raises(ValueError, match="attn_dim"):
        TemporalAttentionConv(4, 8, num_heads=2, attn_dim=7)
    with pytest.raises(ValueError, match="attn_dim"):
        TemporalAttentionConv(4, 8, num_heads=2, attn_dim=8.0)
    with pytest.raises(ValueError, match="attn_norm"):
        TemporalAttentionConv(4, 8, num_heads=2, attn_norm="yes")
    with pytest.raises(ValueError, match="init"):
        TemporalAttentionConv(4, 8, num_heads=2, init="kaiming")
    with pytest.raises(ValueError, match="attn_residual must be True or False"):
        TemporalAttentionConv(4, 8, num_heads=2, attn_norm=True, attn_residual=1)
    with pytest.raises(ValueError, match="needs attn_norm=True"):
        TemporalAttentionConv(4, 8, num_heads=2, time_dim=4, attn_residual=True)
    with pytest.raises(ValueError, match="attn_dim must be 8, got 12"):
        TemporalAttentionConv(4, 8, num_heads=2, time_dim=4, attn_dim=12, attn_norm=True,
                              attn_residual=True)


def test_conv_isolated_destination_depends_on_itself_only():
    torch.manual_seed(0)
    conv = TemporalAttentionConv(6, 8, num_heads=2, time_dim=4)
    block = hand_block()
    h = torch.randn(7, 6)
    out = conv(block, h)
    h2 = h.clone()
    h2[[0, 1, 3, 4, 5, 6]] = torch.randn(6, 6) * 100
    out2 = conv(block, h2)
    assert torch.isfinite(out).all()
    assert torch.allclose(out[2], out2[2])
    # Explicit dt overrides edata['dt'].
    assert torch.allclose(conv(block, h, dt=block.edata["dt"]), out)
    assert not torch.allclose(conv(block, h, dt=block.edata["dt"] + 5.0)[:2], out[:2])


def test_conv_on_dgl_blocks_and_graphs():
    torch.manual_seed(0)
    g = dgl.rand_graph(30, 120)
    g.edata["dt"] = torch.rand(120, dtype=torch.float64) * 1000
    seeds = torch.arange(10)
    block = dgl.to_block(dgl.in_subgraph(g, seeds), seeds)
    assert "dt" in block.edata
    feat_all = torch.randn(30, 6)
    conv = TemporalAttentionConv(6, 8, num_heads=4, edge_dim=3, time_dim=4)
    h = feat_all[block.srcdata[dgl.NID]]
    x = torch.randn(block.num_edges(), 3)
    out = conv(block, h, x)
    assert out.shape == (10, 8) and torch.isfinite(out).all()
    assert torch.allclose(out, ref_conv(conv, block, h, x, block.edata["dt"]), atol=1e-5)
    # A plain graph: every node is a destination.
    out_g = conv(g, feat_all, torch.randn(120, 3))
    assert out_g.shape == (30, 8) and torch.isfinite(out_g).all()
    # A (src, dst) pair of different widths.
    conv2 = TemporalAttentionConv((6, 5), 8, num_heads=2, time_dim=4)
    out2 = conv2(block, (h, torch.randn(10, 5)))
    assert out2.shape == (10, 8)
    (out.sum() + out2.sum()).backward()
    for name, p in conv.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("edge_dim,use_time,attn_norm,residual",
                         [(0, True, False, False), (3, True, False, False),
                          (3, False, False, False), (0, False, False, False),
                          (3, True, True, False), (3, True, True, True),
                          (3, False, True, True)])
def test_conv_without_node_inputs_equals_zero_features(edge_dim, use_time, attn_norm, residual):
    torch.manual_seed(0)
    dgl.seed(0)  # dgl.rand_graph draws from DGL's own RNG, not torch's
    # The residual needs attn_dim = in_dim + time width (6 + 4, or 6 without time).
    attn_dim = (10 if use_time else 6) if attn_norm else None
    conv = TemporalAttentionConv(6, 8, num_heads=2, edge_dim=edge_dim,
                                 time_encoder=TimeEncoder(4, use_time=use_time),
                                 attn_dim=attn_dim, attn_norm=attn_norm,
                                 attn_residual=residual)
    g = dgl.rand_graph(30, 120)
    g.edata["dt"] = torch.rand(120, dtype=torch.float64) * 1000
    block = dgl.to_block(dgl.in_subgraph(g, torch.arange(10)), torch.arange(10))
    for graph in (block, hand_block(), g):
        n_src = graph.num_src_nodes() if graph.is_block else graph.num_nodes()
        x = torch.randn(graph.num_edges(), edge_dim) if edge_dim else None
        conv.zero_grad()
        ref = conv(graph, torch.zeros(n_src, 6), x)
        ref.pow(2).sum().backward()
        ref_grads = {n: p.grad.clone() for n, p in conv.named_parameters()
                     if p.grad is not None}
        conv.zero_grad()
        out = conv(graph, None, x)
        out.pow(2).sum().backward()
        assert torch.allclose(out, ref, atol=1e-5)
        for n, p in conv.named_parameters():  # the same gradients (zero for node columns)
            g_ref = ref_grads.get(n, torch.zeros_like(p))
            got = p.grad if p.grad is not None else torch.zeros_like(p)
            # float32 sums of terms as large as the gradient (time_encoder.weight reaches
            # ~1e4, its terms cancelling) differ between the two paths by a few ulps of
            # that size: the tolerance scales with it.
            tol = 1e-5 + 1e-6 * float(g_ref.abs().max())
            assert torch.allclose(got, g_ref, rtol=1e-5, atol=tol), (n, (got - g_ref).abs().max())


def test_per_edge_graph_has_one_source_per_edge_in_edge_order():
    from tbdfs_dgl.nn.temporal_attention import _per_edge_graph

    g = dgl.rand_graph(30, 120)
    block = dgl.to_block(dgl.in_subgraph(g, torch.arange(10)), torch.arange(10))
    for graph, num_dst in ((hand_block(), 3), (block, 10), (g, 30), (g.int(), 30)):
        helper = _per_edge_graph(graph, num_dst)
        src, dst, eid = helper.edges(form="all", order="eid")
        assert helper.num_src_nodes() == graph.num_edges()
        assert helper.num_dst_nodes() == num_dst
        assert torch.equal(src, eid) and torch.equal(eid, torch.arange(graph.num_edges()))
        assert torch.equal(dst.long(), graph.edges(order="eid")[1].long())


def test_conv_validation():
    with pytest.raises(ValueError):
        TemporalAttentionConv(4, 7, num_heads=2)
    with pytest.raises(ValueError):
        TemporalAttentionConv(4, 8, num_heads=2, time_dim=6, time_encoder=TimeEncoder(4))
    conv = TemporalAttentionConv(4, 8, edge_dim=3, time_dim=4)
    with pytest.raises(ValueError):
        conv(hand_block(), torch.randn(7, 4), torch.randn(5, 2))


# --------------------------------------------------------------------- masked_softmax
def test_masked_softmax_all_masked_rows():
    scores = torch.randn(3, 4, requires_grad=True)
    mask = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)
    w = masked_softmax(scores, mask, dim=1)
    assert torch.equal(w[1], torch.zeros(4)) and torch.equal(w[0, 2:], torch.zeros(2))
    assert torch.allclose(w.sum(1), torch.tensor([1.0, 0.0, 1.0]))
    (w * torch.randn(3, 4)).sum().backward()
    assert torch.isfinite(scores.grad).all()


# ------------------------------------------------------------------------ PathEncoder
@pytest.mark.parametrize("within_path_agg,edge_dim,use_time",
                         [("attn", 3, True), ("attn", 0, False), ("mean", 3, True)])
def test_path_encoder_matches_reference(within_path_agg, edge_dim, use_time):
    torch.manual_seed(0)
    B, P, L, D = 3, 4, 2, 6
    enc = PathEncoder(D, 8, num_heads=2, edge_dim=edge_dim, within_path_agg=within_path_agg,
                      time_encoder=TimeEncoder(4, use_time=use_time))
    paths = random_paths(B, P, L, num_inst=20, num_edges=15)
    feat, query = torch.randn(20, D), torch.randn(B, D)
    edge_feat = torch.randn(15, edge_dim) if edge_dim else None
    root_times = torch.tensor([60.0, 70.0, 1e8], dtype=torch.float64)
    out = enc(paths, feat, query, root_times, edge_feat)
    assert out.shape == (B, P, 8)
    ref = ref_path_encoder(enc, paths, feat, query, root_times, edge_feat)
    assert torch.allclose(out, ref, atol=1e-5)
    # Per-hop feature tensors (path_inputs='bfs') read the same rows here.
    assert torch.allclose(enc(paths, [feat, feat], query, root_times, edge_feat), out)
    if edge_dim:  # edge features already gathered per slot
        per_slot = edge_feat[paths.eids.clamp(min=0)]
        assert torch.allclose(enc(paths, feat, query, root_times, per_slot), out)
    assert torch.allclose(enc.fc2(enc._encode_slots(paths, feat, query, root_times, edge_feat,
                                                    False)), out, atol=1e-6)
    # feat=None stands for all-zero node inputs and skips their terms.
    zeros = torch.zeros_like(feat)
    assert torch.allclose(enc(paths, None, query, root_times, edge_feat),
                          enc(paths, zeros, query, root_times, edge_feat), atol=1e-6)


def test_path_encoder_same_with_and_without_native_kernels():
    torch.manual_seed(0)
    B, P, L, D = 3, 6, 2, 6
    enc = PathEncoder(D, 8, num_heads=2, edge_dim=3, time_dim=4)
    paths = random_paths(B, P, L, num_inst=20, num_edges=15)
    feat, query = torch.randn(20, D), torch.randn(B, D)
    edge_feat, rt = torch.randn(15, 3), torch.tensor([60.0, 70.0, 1e8], dtype=torch.float64)
    outs, grads = [], []
    for off in ((), ("time_encode",)):
        with _native.disabled(*off):
            enc.zero_grad()
            out = enc(paths, feat, query, rt, edge_feat)
            out.pow(2).sum().backward()
        outs.append(out.detach())
        grads.append([p.grad.clone() for p in enc.parameters()])
    assert torch.allclose(outs[0], outs[1], atol=1e-5)
    for g0, g1 in zip(*grads):
        assert torch.allclose(g0, g1, atol=1e-4, rtol=1e-4)


def test_path_encoder_ignores_masked_slots():
    torch.manual_seed(0)
    B, P, L, D = 2, 5, 3, 6
    enc = PathEncoder(D, 8, num_heads=2, edge_dim=3, time_dim=4).eval()
    paths = random_paths(B, P, L, num_inst=20, num_edges=15, p_empty=0.5)
    feat, query, ef = torch.randn(21, D), torch.randn(B, D), torch.randn(16, 3)
    rt = torch.tensor([60.0, 70.0], dtype=torch.float64)
    out = enc(paths, feat, query, rt, ef)
    # Point every masked slot at a spare row / edge with wild features and times.
    m = paths.mask
    paths2 = PathBatch(nodes=paths.nodes, eids=paths.eids.masked_fill(~m, 15),
                       ts=paths.ts.masked_fill(~m, -3e7), mask=m,
                       src_index=paths.src_index.masked_fill(~m, 20))
    feat2, ef2 = feat.clone(), ef.clone()
    feat2[20], ef2[15] = 1e3, -1e3
    assert torch.allclose(enc(paths2, feat2, query, rt, ef2), out, atol=1e-6)


# --------------------------------------------------------------------- PathAggregator
@pytest.mark.parametrize("across_paths_agg", ["attn", "mean"])
def test_path_aggregator_reference_empty_roots_and_fold(across_paths_agg):
    torch.manual_seed(0)
    B, P, D = 3, 5, 8
    agg = PathAggregator(D, 6, num_heads=2, across_paths_agg=across_paths_agg)
    r, q = torch.randn(B, P, D), torch.randn(B, D)
    mask = torch.rand(B, P) < 0.6
    mask[0] = False
    mask[1, 0] = True
    out = agg(r, q, mask)
    assert out.shape == (B, 6) and torch.equal(out[0], torch.zeros(6))
    for b in (1, 2):
        rb = r[b, mask[b]]
        if across_paths_agg == "attn":
            H, dk = 2, D // 2
            qq = (agg.fc_q.weight @ q[b]).view(H, dk)
            k = (rb @ agg.fc_k.weight.t()).view(-1, H, dk)
            a = torch.softmax((k * qq).sum(-1) / math.sqrt(dk), dim=0)  # [n, H]
            pooled = (a.t() @ rb).reshape(-1)
        else:
            pooled = rb.mean(0)
        assert torch.allclose(out[b], agg.fc_o(pooled), atol=1e-5)
    # Folding an affine map of the path features into the aggregator is exact.
    lin = torch.nn.Linear(7, D)
    u = torch.randn(B, P, 7)
    assert torch.allclose(agg._aggregate(u, q, mask, lin), agg(lin(u), q, mask), atol=1e-5)


def test_validation_of_modes():
    with pytest.raises(ValueError):
        PathEncoder(4, 4, within_path_agg="max")
    with pytest.raises(ValueError):
        PathAggregator(4, 4, across_paths_agg="sum")
    with pytest.raises(ValueError):
        PathAggregator(5, 4, num_heads=2)


# ------------------------------------------------- the fixed-cost (GPU / compiled) encoding
def test_fixed_cost_time_encoding_matches_the_exact_one(monkeypatch):
    from tbdfs_dgl.nn import time_encoder as te

    torch.manual_seed(0)
    enc = TimeEncoder(16)
    dt = torch.cat([torch.rand(300, dtype=torch.float64) * 1e8,
                    torch.tensor([0.0, 1.0, 5e8, 2.0**28], dtype=torch.float64)])
    exact = enc(dt)
    g = torch.randn(exact.shape)
    (exact * g).sum().backward()
    grad_exact = enc.weight.grad.clone()
    enc.weight.grad = None
    monkeypatch.setattr(te, "compiling", lambda: True)  # take the GPU / compiled path on CPU
    fixed = enc(dt)
    (fixed * g).sum().backward()
    scale = (1.0 / 8) ** 0.5
    assert float((fixed - exact).abs().max()) <= 1e-6 * scale
    assert float((enc.weight.grad - grad_exact).abs().max()) <= 1e-5 * float(grad_exact.abs().max())
    enc.check_range()  # all phases below 2**29 rad: no error
    assert not bool(enc.range_exceeded)


def test_fixed_cost_time_encoding_flags_phases_it_cannot_reduce(monkeypatch):
    from tbdfs_dgl.nn import time_encoder as te

    enc = TimeEncoder(8)
    monkeypatch.setattr(te, "compiling", lambda: True)
    enc(torch.tensor([1.0, 2.0**30], dtype=torch.float64))
    with pytest.raises(te.TimeEncodingRangeError, match="coarser units"):
        enc.check_range()
    # The flag is not part of the state dict: old checkpoints load unchanged.
    assert "range_exceeded" not in enc.state_dict()
