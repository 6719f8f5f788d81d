"""Reliability: bad input gives a clear Python exception (never a crash, OOM kill or silent
garbage), and the C++ parts stay inside their buffers.

No DGL here: ``make sanitize`` runs this file against the AddressSanitizer build.
"""
import math
import os
import pickle
import time

import numpy as np
import pytest
import torch

from tbdfs_dgl import TemporalGraph, TemporalSampler, _C
from tbdfs_dgl.graph import relabel_nodes
from tbdfs_dgl.sampler import BatchTooLargeError

import reference as ref


def star(degree: int, directed: bool = False) -> TemporalGraph:
    """Node 0 linked to 1..degree at times 0..degree-1."""
    return TemporalGraph(np.zeros(degree, np.int64), np.arange(1, degree + 1),
                         np.arange(degree, dtype=np.float64), directed=directed)


# ------------------------------------------------------------------ D1: sparse raw ids
def test_sparse_ids_are_refused_before_allocating_with_how_to_relabel():
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="relabel=True"):
        TemporalGraph([0, 2**31 - 2], [1, 0], [1.0, 2.0])
    assert time.perf_counter() - t0 < 5  # refused up front, nothing built


def test_memory_estimate_refuses_an_explicit_huge_num_nodes(monkeypatch):
    monkeypatch.setenv("TBDFS_MAX_GRAPH_BYTES", str(2**30))
    with pytest.raises(MemoryError, match=r"relabel=True.*"):
        TemporalGraph([0, 1], [1, 0], [1.0, 2.0], num_nodes=2**31 - 1)
    with pytest.raises(ValueError, match="supports"):
        TemporalGraph([0, 1], [1, 0], [1.0, 2.0], num_nodes=2**40)


def test_relabel_maps_sparse_ids_and_keeps_them():
    raw_src, raw_dst = np.array([7, 2**31 - 2, 7]), np.array([10**12, 7, 5])
    g = TemporalGraph(raw_src, raw_dst, [1.0, 2.0, 3.0], relabel=True)
    assert g.num_nodes == 4
    assert g.node_ids.tolist() == [5, 7, 2**31 - 2, 10**12]
    assert not g.node_ids.flags.writeable
    src, dst, _ = g.edges()
    assert g.node_ids[src].tolist() == raw_src.tolist()
    assert g.node_ids[dst].tolist() == raw_dst.tolist()
    assert g.compact_ids([10**12, 5]).tolist() == [3, 0]
    with pytest.raises(KeyError, match="not a node"):
        g.compact_ids([6])
    hops, _ = TemporalSampler(g, [5], num_threads=1).sample_arrays(g.compact_ids([7]), [9.0])
    assert sorted(g.node_ids[hops[0][1][1:]].tolist()) == [5, 2**31 - 2, 10**12]
    assert pickle.loads(pickle.dumps(g)).node_ids.tolist() == g.node_ids.tolist()
    with pytest.raises(ValueError, match="num_nodes"):
        TemporalGraph([0], [1], [1.0], num_nodes=5, relabel=True)
    s, d, ids = relabel_nodes([3, 9], [9, 100])
    assert s.tolist() == [0, 1] and d.tolist() == [1, 2] and ids.tolist() == [3, 9, 100]


def test_uint64_ids_beyond_int64_and_bfloat16_inputs_are_named():
    with pytest.raises(ValueError, match=r"src\[0\] = 9223372036854775813 does not fit in int64"):
        TemporalGraph(np.array([2**63 + 5, 1], np.uint64), [1, 0], [1.0, 2.0])
    with pytest.raises(TypeError, match="ts has dtype torch.bfloat16"):
        TemporalGraph([0, 1], [1, 0], torch.tensor([1.0, 2.0], dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="src has dtype torch.bfloat16"):
        TemporalGraph(torch.tensor([0.0], dtype=torch.bfloat16), [1], [1.0])
    with pytest.raises(ValueError, match="beyond 2\\*\\*53"):
        TemporalGraph([0], [1], np.array([2**63 + 1], np.uint64))


# ------------------------------------------------------------------ D2: batch size guards
def test_deep_fanouts_are_refused_before_sampling():
    g = star(3)
    with pytest.raises(BatchTooLargeError, match=r"max_batch_bytes.*TBDFS_MAX_BATCH_BYTES") as e:
        TemporalSampler(g, [1] * 40).sample_arrays([0], [10.0])
    assert isinstance(e.value, MemoryError) and isinstance(e.value, ValueError)
    assert "GiB" in str(e.value) and "fanout + 1" in str(e.value)


@pytest.mark.parametrize("fanouts, roots", [([10] * 5, 600), ([10, 10], 10_000_000)])
def test_batches_past_the_limit_are_refused_with_the_estimate(fanouts, roots):
    g = star(20)  # degree 20 >= every fanout: the bound is the plain fanout product
    sampler = TemporalSampler(g, fanouts, max_batch_bytes=8 * 2**30)
    est = sampler.estimate_batch_bytes(roots)
    assert est > 8 * 2**30
    nodes = np.zeros(roots, np.int64)
    with pytest.raises(BatchTooLargeError, match=f"a batch of {roots} roots"):
        sampler.sample_arrays(nodes, np.full(roots, 100.0))


def test_estimate_bounds_the_real_output_and_the_limit_can_be_raised(monkeypatch):
    g = star(20)
    sampler = TemporalSampler(g, [3, 4], num_threads=1)
    hops, paths = sampler.sample_arrays(np.zeros(50, np.int64), np.full(50, 100.0))
    real = sum(a.nbytes for h in hops for a in h[1:]) + sum(a.nbytes for a in paths)
    assert real <= sampler.estimate_batch_bytes(50)
    small = TemporalSampler(g, [3, 4], max_batch_bytes=1000)
    with pytest.raises(BatchTooLargeError):
        small.sample_arrays(np.zeros(50, np.int64), np.full(50, 100.0))
    monkeypatch.setenv("TBDFS_MAX_BATCH_BYTES", "1000")
    with pytest.raises(BatchTooLargeError):
        TemporalSampler(g, [3, 4]).sample_arrays(np.zeros(50, np.int64), np.full(50, 100.0))
    monkeypatch.setenv("TBDFS_MAX_BATCH_BYTES", "1e9")
    TemporalSampler(g, [3, 4]).sample_arrays(np.zeros(50, np.int64), np.full(50, 100.0))
    # without replacement, growth is bounded by the longest list: fanout 1000 on degree 20
    assert TemporalSampler(g, [1000]).estimate_batch_bytes(1, paths=False) < 10_000


def test_absurd_layer_counts_are_refused_up_front():
    g = star(3)
    with pytest.raises(ValueError, match="at most 64 layers"):
        TemporalSampler(g, [1] * 65)
    with pytest.raises(ValueError, match="path slots per root"):
        TemporalSampler(g, [2] * 60)
    # the extension itself refuses too, before sampling anything
    with pytest.raises(ValueError, match="at most 64 layers"):
        _C.sample(g.csr, np.zeros(1, np.int64), np.ones(1), [1] * 65, _C.Strategy.RECENT, True, 0,
                  0, 1, True)
    with pytest.raises(ValueError, match="could need up to"):
        _C.sample(g.csr, np.zeros(1, np.int64), np.full(1, 9.0), [1] * 40, _C.Strategy.RECENT,
                  True, 0, 0, 1, True)


# ------------------------------------------------------------------ D5, D6, D7: the CSR
def test_csr_views_are_read_only_and_stay_so():
    g = star(5)
    arrays = g.csr.arrays()
    assert set(arrays) == {"indptr", "nbr", "row", "ts", "twin", "src", "dst"}
    for name, a in arrays.items():
        assert not a.flags.writeable, name
        with pytest.raises(ValueError, match="read-only"):
            a[:] = 1000
        with pytest.raises(ValueError):
            a.flags.writeable = True
    g.csr.validate()


def _state(g: TemporalGraph) -> dict:
    st = g.__getstate__()
    st["arrays"] = {k: v.copy() for k, v in st["arrays"].items()}
    return st


def test_crafted_pickles_give_value_errors():
    g = TemporalGraph([0, 1, 2, 0], [1, 2, 0, 2], [1.0, 2.0, 3.0, 4.0])
    cases = []
    st = _state(g)
    st["arrays"]["indptr"][1] = 10**6  # indptr[u + 1] > M: used to read past the end
    cases.append(st)
    st = _state(g)
    st["arrays"]["indptr"][1:-1] = st["arrays"]["indptr"][-1] + 3
    cases.append(st)
    st = _state(g)
    st["arrays"]["twin"][0] = 2**30
    cases.append(st)
    st = _state(g)
    st["arrays"]["nbr"][0] = -5
    cases.append(st)
    st = _state(g)
    st["arrays"]["indptr"] = st["arrays"]["indptr"][:-1]
    cases.append(st)
    for st in cases:
        blob = pickle.dumps(st)
        clone = TemporalGraph.__new__(TemporalGraph)
        with pytest.raises(ValueError, match="CSR"):
            clone.__setstate__(pickle.loads(blob))


def test_a_row_listed_hundreds_of_times_is_refused():
    # 257 copies would wrap an 8-bit counter back to 1.
    n = 257
    with pytest.raises(ValueError, match="CSR"):
        _C.TCSR.from_arrays(2, 1, True, np.array([0, 0, n]), np.zeros(n, np.int32),
                            np.zeros(n, np.int32), np.arange(n, dtype=np.float64),
                            np.full(n, -1, np.int32), np.array([0], np.int32),
                            np.array([1], np.int32))


@pytest.mark.parametrize("strategy, replace", [("recent", False), ("uniform", False),
                                               ("uniform", True)])
def test_empty_batches(strategy, replace):
    g = star(4)
    hops, paths = TemporalSampler(g, [2, 3], strategy=strategy, replace=replace,
                                  num_threads=2).sample_arrays([], [])
    assert [h[0] for h in hops] == [0, 0]
    assert all(len(a) == 0 for h in hops for a in h[1:3])
    assert all(a.shape == (0, 6, 2) for a in paths)


# ------------------------------------------------------------------ output block cache
def test_block_cache_stays_bounded_after_a_big_batch():
    g = star(12)
    sampler = TemporalSampler(g, [10, 10], num_threads=1)
    roots = 45_000  # path arrays of 72 MB each, above the 64 MiB cacheable block size
    hops, paths = sampler.sample_arrays(np.zeros(roots, np.int64), np.full(roots, 50.0))
    del hops, paths
    assert _C.cached_bytes() <= 256 * 2**20
    _C.trim_cache()
    assert _C.cached_bytes() == 0


# ------------------------------------------------------------------ uniform sampling
@pytest.mark.parametrize("k", [5, 64, 65, 300])
def test_uniform_draws_are_the_reference_floyd_draws(k):
    n = 500
    g = star(n)
    times = np.array([1e9, 400.5, 70.0, 3.0])
    hops, _, _ = _C.sample(g.csr, np.zeros(4, np.int64), times, [k], _C.Strategy.UNIFORM, True,
                           123, 9, 1, False)
    adj = ref.adjacency(np.zeros(n), np.arange(1, n + 1), np.arange(n, dtype=float), n + 1, False)
    want = ref.sample_tree(adj, [0] * 4, times, [k], choose_at=ref.uniform_chooser(123, 9, False))
    assert hops[0][4].tolist() == want[0]["eids"]


def test_uniform_without_replacement_is_linear_in_k():
    n, k = 200_000, 20_000
    g = star(n)
    sampler = TemporalSampler(g, [k], strategy="uniform", num_threads=1, seed=4)
    t0 = time.perf_counter()
    hops, _ = sampler.sample_arrays([0, 0], [1e9, 1e9], paths=False)
    took = time.perf_counter() - t0
    eids = hops[0][4]
    assert len(eids) == 2 * k
    for part in (eids[:k], eids[k:]):
        assert len(np.unique(part)) == k
    # O(k^2) took ~0.5 s per root here; O(k) takes milliseconds.  Generous for busy CI.
    assert took < 0.5, took
    one = TemporalSampler(g, [k], strategy="uniform", num_threads=1, seed=4)
    two = TemporalSampler(g, [k], strategy="uniform", num_threads=2, seed=4)
    a = one.sample_arrays(np.zeros(3, np.int64), np.full(3, 1e9), batch_id=7, paths=False)[0]
    b = two.sample_arrays(np.zeros(3, np.int64), np.full(3, 1e9), batch_id=7, paths=False)[0]
    assert np.array_equal(a[0][4], b[0][4])


@pytest.mark.parametrize("n, k", [(10, 3), (100, 70)])
def test_uniform_without_replacement_is_uniform(n, k):
    """Each eligible edge is drawn with probability k/n: chi-square over many destinations
    (fixed seed, so the statistic is a fixed number, far below the 1e-6 critical value)."""
    g = star(n)
    roots = 20_000
    hops, _, _ = _C.sample(g.csr, np.zeros(roots, np.int64), np.full(roots, 1e9), [k],
                           _C.Strategy.UNIFORM, True, 2024, 1, 1, False)
    counts = np.bincount(hops[0][4], minlength=n)
    expected = roots * k / n
    # Inclusion indicators of one draw are negatively correlated, so the plain statistic is
    # conservative; bounds are the 1e-6 upper quantiles of chi2(n - 1): 44.8 and 180.8.
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < {10: 44.8, 100: 180.8}[n], chi2
    per_root = hops[0][4].reshape(roots, k)
    assert (np.diff(per_root, axis=1) > 0).all()  # sorted and distinct


# ------------------------------------------------------------------ D3: time encoding
@pytest.mark.parametrize("dt", [[1e16, 1.6e18], [3e15, -1e16, 2.0**52, 2.0**60 + 3],
                                [0.0, 1e-300, 5e-324, 12345.678, 1e8, 2.0**29, -(2.0**30)],
                                [1e300, -1e300, 1.7e308]])
def test_native_time_encoding_is_exact_for_any_phase(dt):
    w = np.concatenate([1.0 / 10 ** np.linspace(0, 9, 8), [3.7, 1e-300]])
    dt = np.asarray(dt, dtype=np.float64)
    scale = 0.5
    out = np.empty((len(dt), 2 * len(w)), np.float32)
    _C.time_encode(dt, w, scale, out, 2)
    for i, t in enumerate(dt):
        for k, wk in enumerate(w):
            if not math.isfinite(float(wk) * float(t)):
                assert np.isnan(out[i, 2 * k])
                continue
            c, s = ref.exact_cos_sin(float(wk), float(t))
            # float32 output: a few ulps of the scale
            assert abs(out[i, 2 * k] - scale * c) <= 4e-7 * scale, (t, wk)
            assert abs(out[i, 2 * k + 1] - scale * s) <= 4e-7 * scale, (t, wk)


def test_native_time_encoding_blocks_of_frequencies_are_classified_on_their_own():
    # 150 frequencies = blocks of 64, 64, 22 with very different reaches; shuffled so a
    # huge frequency sits among tiny ones.
    rng = np.random.default_rng(3)
    w = rng.permutation(np.concatenate([10 ** rng.uniform(-12, -6, 100),
                                        10 ** rng.uniform(-2, 3, 50)]))
    dt = np.array([0.5, 7e7, 3e9, 1.6e18, -2e12])
    out = np.empty((len(dt), 2 * len(w)), np.float32)
    _C.time_encode(dt, w, 1.0, out, 1)
    for i, t in enumerate(dt):
        for k, wk in enumerate(w):
            c, s = ref.exact_cos_sin(float(wk), float(t))
            assert abs(out[i, 2 * k] - c) <= 4e-7 and abs(out[i, 2 * k + 1] - s) <= 4e-7, (t, wk)


def test_native_time_encoding_is_exact_across_the_reduction_regimes():
    # Phases around each switch: 2^26 (plain / exact product), 2^29 (Cody-Waite / wide
    # reduction), 2^52 (coarse quotients), 2^61 (wide / Payne-Hanek).
    rng = np.random.default_rng(11)
    w = 10 ** rng.uniform(-3, 1, 12)
    edges = np.array([2.0**26, 2.0**29, 2.0**52, 2.0**61])
    near = rng.choice(edges, 120) * rng.uniform(0.5, 2.0, 120) / rng.choice(w, 120)
    dt = np.concatenate([near, 10 ** rng.uniform(0, 20, 80)]) * rng.choice([-1, 1], 200)
    out = np.empty((len(dt), 2 * len(w)), np.float32)
    _C.time_encode(dt, w, 1.0, out, 2)
    worst = 0.0
    for i, t in enumerate(dt):
        for k, wk in enumerate(w):
            c, s = ref.exact_cos_sin(float(wk), float(t))
            worst = max(worst, abs(out[i, 2 * k] - c), abs(out[i, 2 * k + 1] - s))
    assert worst <= 4e-7, worst


def test_reduce_phases_matches_the_exact_reduction():
    rng = np.random.default_rng(7)
    w = 10 ** rng.uniform(-9, 2, 400)
    dt = 10 ** rng.uniform(-3, 19, 400) * rng.choice([-1, 1], 400)
    q, y = _C.reduce_phases(w, dt)
    assert ((q >= 0) & (q < 4)).all() and (np.abs(y) <= math.pi / 4 + 1e-12).all()
    for qi, yi, wi, ti in zip(q, y, w, dt):
        c, s = ref.exact_cos_sin(float(wi), float(ti))
        got = [(math.cos(yi), math.sin(yi)), (-math.sin(yi), math.cos(yi)),
               (-math.cos(yi), -math.sin(yi)), (math.sin(yi), -math.cos(yi))][qi]
        assert abs(got[0] - c) < 1e-12 and abs(got[1] - s) < 1e-12


# ------------------------------------------------------------------ checkpoints, config
def _model():
    return torch.nn.Linear(3, 2)


def test_checkpoint_errors_are_clear(tmp_path):
    from tbdfs_dgl.linkpred import _read_checkpoint, load_checkpoint, save_checkpoint

    path = tmp_path / "m.pt"
    save_checkpoint(str(path), _model(), {"a": 1}, {"epoch": 2})
    payload = _read_checkpoint(str(path), "cpu")
    assert payload["extra"] == {"epoch": 2} and set(payload["state_dict"]) == {"weight", "bias"}
    good = path.read_bytes()
    cases = {
        "empty": (b"", "empty"),
        "truncated": (good[: len(good) - 40], "truncated"),
        "garbage": (b"\x00\x01not a checkpoint" * 10, "not a readable"),
        "bitflip": (good[:-30] + bytes([good[-30] ^ 0x10]) + good[-29:], "corrupted"),
        "header": (good[:25] + good[40:], "header"),
        "legacy-truncated": (good[good.index(b"}\n") + 2:][:100], "not a readable"),
    }
    for name, (blob, match) in cases.items():
        bad = tmp_path / f"{name}.pt"
        bad.write_bytes(blob)
        with pytest.raises(ValueError, match=match):
            load_checkpoint(str(bad))
    with pytest.raises(FileNotFoundError):
        load_checkpoint(str(tmp_path / "missing.pt"))
    foreign = tmp_path / "foreign.pt"
    torch.save([1, 2, 3], str(foreign))
    with pytest.raises(ValueError, match="not a tbdfs checkpoint"):
        load_checkpoint(str(foreign))


def test_checkpoint_save_is_durable_and_cleans_up(tmp_path, monkeypatch):
    from tbdfs_dgl import linkpred

    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    # a temp file of a killed save (no such process) and one of a live save (this one)
    (tmp_path / ".ckpt-999999999-abc").write_bytes(b"partial")
    (tmp_path / f".ckpt-{os.getpid()}-live").write_bytes(b"partial")
    linkpred.save_checkpoint(str(tmp_path / "m.pt"), _model(), {})
    assert len(synced) >= 2  # the file, then the folder
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [f".ckpt-{os.getpid()}-live", "m.pt"]

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        linkpred.save_checkpoint(str(tmp_path / "n.pt"), _model(), {})
    assert sorted(p.name for p in tmp_path.iterdir()) == left


def test_previous_release_checkpoints_still_load(tmp_path):
    from tbdfs_dgl.linkpred import load_checkpoint
    from tbdfs_dgl.model import TBDFSModel

    kwargs = dict(node_dim=0, edge_dim=2, time_dim=8, hidden_dim=8, num_nodes=10)
    # release 0.1's only form
    model = TBDFSModel(**kwargs, time_encoding="cos_sin", attn_norm=False)
    path = tmp_path / "old.pt"
    torch.save({"model_kwargs": kwargs, "state_dict": model.state_dict(), "extra": {"e": 1}},
               str(path))
    clone, extra = load_checkpoint(str(path))
    assert extra == {"e": 1}
    for (k, a), (_, b) in zip(model.state_dict().items(), clone.state_dict().items()):
        assert torch.equal(a, b), k


@pytest.mark.parametrize("kwargs, match", [
    (dict(batch_size=0), "batch_size"), (dict(batch_size=2.5), "batch_size"),
    (dict(lr=-1), "lr"), (dict(lr=float("nan")), "lr"), (dict(lr=0), "lr"),
    (dict(epochs=0), "epochs"), (dict(patience=-1), "patience"), (dict(seed=-3), "seed"),
    (dict(fanouts=(10, 0)), "fanouts must be a non-empty sequence"),
    (dict(fanouts=()), "fanouts"), (dict(fanouts="10,10"), "fanouts"),
    (dict(fanouts=(2.5,)), "fanouts"), (dict(strategy="latest"), "TrainConfig.strategy"),
    (dict(device="tpu"), "TrainConfig.device must name a torch device"),
    (dict(num_threads=0), "num_threads"),
])
def test_train_config_rejects_bad_values(kwargs, match):
    from tbdfs_dgl.linkpred import TrainConfig

    with pytest.raises(ValueError, match=match):
        TrainConfig(**kwargs)


# ------------------------------------------------------------------ data and feature tables
def test_feature_tables_with_too_few_rows_are_named():
    from tbdfs_dgl.data import TemporalDataset

    ds = TemporalDataset(name="x", src=[0, 1], dst=[1, 2], ts=[1, 2], num_nodes=3)
    with pytest.raises(ValueError, match=r"node_feat must have shape \[num_nodes=3, d\]"):
        ds.node_feat = np.zeros((2, 4))
    with pytest.raises(ValueError, match=r"edge_feat must have shape \[E=2, d\]"):
        ds.edge_feat = np.zeros((1, 4))
    ds.edge_feat = np.ones((2, 3))
    g = ds.to_graph()
    with pytest.raises(ValueError, match=r"edge_feat has 1 rows, expected 2 \(one per edge\)"):
        g.edge_feat = np.zeros((1, 3))
    with pytest.raises(ValueError, match=r"node_feat has 2 rows, expected 3 \(one per node\)"):
        g.node_feat = torch.zeros(2, 5)
    with pytest.raises(ValueError, match="node_feat has 2 rows"):
        TemporalGraph([0, 1], [1, 2], [1.0, 2.0], node_feat=np.zeros((2, 2)))
    assert g.edge_feat.shape == (2, 3)


def test_model_feature_tables_too_short_for_the_batch_are_named():
    """A feature table (or embedding) with fewer rows than the sampled ids need used to
    fail inside the gather with a bare "index out of range"."""
    from tbdfs_dgl import TBDFSModel

    g = TemporalGraph([0, 1, 2, 0], [1, 2, 0, 2], [1.0, 2.0, 3.0, 3.5])
    batch = TemporalSampler(g, [2, 2], seed=0).sample([0, 1, 2], [4.0, 4.0, 4.0])
    torch.manual_seed(0)
    model = TBDFSModel(node_dim=3, edge_dim=3, time_dim=4, hidden_dim=4)
    nf, ef = torch.randn(3, 3), torch.randn(4, 3)
    assert model(batch, nf, ef).shape == (3, 4)
    with pytest.raises(ValueError, match="refers to node 2, but node_feat has 2 rows"):
        model(batch, nf[:2], ef)
    with pytest.raises(ValueError, match="refers to interaction 3, but edge_feat has 1 row:"):
        model(batch, nf, ef[:1])
    with pytest.raises(TypeError, match="node_feat must be a torch.Tensor, got ndarray"):
        model(batch, nf.numpy(), ef)
    emb = TBDFSModel(node_dim=0, edge_dim=0, time_dim=4, hidden_dim=4, num_nodes=2,
                     node_embedding_dim=2)
    with pytest.raises(ValueError, match=r"node embedding \(num_nodes=2\) has 2 rows"):
        emb(batch)


def test_quoted_numeric_first_row_is_data(tmp_path):
    from tbdfs_dgl.data import read_edge_list

    f = tmp_path / "q.csv"
    f.write_text('"1","2","3"\n"2","3","4"\n')
    ds = read_edge_list(f, relabel=False)
    assert ds.num_edges == 2
    assert ds.src.tolist() == [1, 2] and ds.dst.tolist() == [2, 3] and ds.ts.tolist() == [3, 4]


def test_non_utf8_bytes_name_file_and_line(tmp_path):
    from tbdfs_dgl.data import read_edge_list

    f = tmp_path / "latin1.txt"
    f.write_bytes(b"1 2 3 ok\n2 3 4 caf\xe9\n")
    with pytest.raises(ValueError, match=r"latin1.txt, line 2, column 10: byte 0xe9"):
        read_edge_list(f)


def test_jodie_header_with_swapped_columns_is_refused(tmp_path):
    from tbdfs_dgl.data.readers import read_jodie_csv

    f = tmp_path / "wiki.csv"
    f.write_text("item_id,user_id,timestamp,state_label,f\n0,1,1.0,0,0.5\n1,0,2.0,0,0.1\n")
    with pytest.raises(ValueError, match="'item_id' in column 1"):
        read_jodie_csv(f)
    f.write_text("user_id,item_id,timestamp,state_label,f\n0,1,1.0,0,0.5\n1,0,2.0,0,0.1\n")
    assert read_jodie_csv(f).num_edges == 2
