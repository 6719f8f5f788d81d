"""TemporalGraph.add_edges: streaming inserts give exactly what a full build gives."""
import pickle
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from tbdfs_dgl import TemporalGraph, TemporalSampler, _C

import reference as ref

LAYER_FIELDS = ("src_nodes", "src_ts", "nbr", "mask", "dt", "eid")
PATH_FIELDS = ("nodes", "eids", "ts", "mask", "src_index")
SAMPLERS = [dict(strategy="recent", time_rule="strict"),
            dict(strategy="recent", time_rule="inclusive"),
            dict(strategy="uniform", time_rule="strict"),
            dict(strategy="uniform", time_rule="inclusive"),
            dict(strategy="uniform", replace=True, time_rule="strict")]


def streamed(src, dst, ts, first, chunks, **kw):
    """A graph of rows [0, first) with the rest appended in chunks of the given sizes."""
    g = TemporalGraph(src[:first], dst[:first], ts[:first], **kw)
    i, c = first, 0
    while i < len(src):
        k = chunks[c % len(chunks)]
        if k == 1 and c % 2:  # one event at a time, as scalars (the fast path)
            g.add_edges(int(src[i]), int(dst[i]), float(ts[i]))
        else:
            g.add_edges(src[i:i + k], dst[i:i + k], ts[i:i + k])
        i, c = i + k, c + 1
    return g


def assert_same_batches(a: TemporalGraph, b: TemporalGraph, nodes, times, fanouts=(4, 3)):
    for kw in SAMPLERS:
        x = TemporalSampler(a, list(fanouts), seed=11, num_threads=2, **kw)
        y = TemporalSampler(b, list(fanouts), seed=11, num_threads=1, **kw)
        for batch_id in (0, 5):
            p, q = x.sample(nodes, times, batch_id=batch_id), y.sample(nodes, times, batch_id=batch_id)
            for lp, lq in zip(p.layers, q.layers):
                for f in LAYER_FIELDS:
                    assert torch.equal(getattr(lp, f), getattr(lq, f)), (kw, f)
            for f in PATH_FIELDS:
                assert torch.equal(getattr(p.paths, f), getattr(q.paths, f)), (kw, f)


def assert_same_csr(a: TemporalGraph, b: TemporalGraph):
    a.csr.validate()
    b.csr.validate()
    x, y = a.csr.arrays(), b.csr.arrays()
    for k in x:
        np.testing.assert_array_equal(x[k], y[k], err_msg=k)
    assert a.csr.max_degree == b.csr.max_degree
    for u, v in zip(a.edges(), b.edges()):
        np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("chunks", [[1], [3, 1, 7], [50], [10_000]])
def test_streaming_equals_a_full_build_on_random_graphs(directed, chunks, _seed_everything):
    rng = np.random.default_rng(_seed_everything)
    src, dst, ts = ref.random_graph(rng, 30, 600, num_times=120)
    order = np.argsort(ts, kind="stable")
    src, dst, ts = src[order], dst[order], ts[order]
    full = TemporalGraph(src, dst, ts, directed=directed)
    for first in (0, 1, 250):
        g = streamed(src, dst, ts, first, chunks, directed=directed)
        assert g.num_nodes == full.num_nodes and g.num_edges == full.num_edges
        assert_same_csr(g, full)
        nodes = rng.integers(0, full.num_nodes, 40)
        times = rng.choice(np.unique(ts), 40) + rng.choice([0.0, 0.5], 40)
        assert_same_batches(full, g, nodes, times)


def test_many_appends_move_and_repack_lists_and_stay_exact(_seed_everything):
    # Enough entries to pass the repacking floor, with a hub and a long tail.
    rng = np.random.default_rng(_seed_everything)
    E, N = 12_000, 300
    src = np.minimum(rng.zipf(1.6, E) - 1, N - 1)
    dst = rng.integers(0, N, E)
    ts = np.sort(rng.integers(0, 3000, E)).astype(np.float64)
    full = TemporalGraph(src, dst, ts, num_nodes=N)
    g = streamed(src, dst, ts, 2000, [1, 1, 37, 400])
    layout = _C.csr_layout(g.csr)
    assert layout["relocations"] > 0 and layout["compactions"] > 0
    assert layout["live_entries"] == _C.csr_layout(full.csr)["live_entries"]
    assert layout["pool_entries"] <= 1.5 * layout["live_entries"] + 4096
    assert_same_csr(g, full)
    assert_same_batches(full, g, rng.integers(0, N, 64), rng.uniform(0, 3100, 64), (5, 5))


def test_rows_of_a_chunk_may_come_in_any_order_after_the_latest_time():
    g = TemporalGraph([0, 1], [1, 2], [1.0, 2.0])
    g.add_edges([2, 0, 3, 1], [3, 2, 0, 3], [9.0, 2.0, 5.0, 5.0])
    full = TemporalGraph([0, 1, 2, 0, 3, 1], [1, 2, 3, 2, 0, 3], [1.0, 2.0, 9.0, 2.0, 5.0, 5.0])
    assert_same_csr(g, full)


def test_existing_samplers_see_appended_interactions():
    g = TemporalGraph([0], [1], [1.0])
    sampler = TemporalSampler(g, [5], seed=0)
    assert sampler.sample([0], [10.0]).layers[-1].eid.tolist() == [[0, -1, -1, -1, -1]]
    g.add_edges([0, 2, 0], [2, 0, 5], [3.0, 4.0, 4.0])  # node 5 is new: 6 nodes now
    batch = sampler.sample([0, 5], [10.0, 10.0])
    assert batch.layers[-1].eid.tolist() == [[0, 1, 2, 3, -1], [3, -1, -1, -1, -1]]
    assert g.num_nodes == 6 and g.num_edges == 4
    assert sampler.estimate_batch_bytes(10) > 0


def test_a_time_earlier_than_the_latest_is_refused_and_changes_nothing():
    g = TemporalGraph([0, 1], [1, 2], [1.0, 5.0], edge_feat=np.ones((2, 3), np.float32))
    before = {k: v.copy() for k, v in g.csr.arrays().items()}
    with pytest.raises(ValueError, match=r"ts\[2\] = 4(\.0)? is earlier than the graph.s latest time 5"):
        g.add_edges([0, 1, 2], [1, 1, 0], [5.0, 6.0, 4.0], edge_feat=np.ones((3, 3)))
    with pytest.raises(ValueError, match=r"ts\[0\] = 4(\.0)? is earlier"):
        g.add_edges(0, 1, 4.0, edge_feat=np.ones(3))
    for k, v in g.csr.arrays().items():
        np.testing.assert_array_equal(v, before[k])
    assert g.num_edges == 2 and g.edge_feat.shape == (2, 3)
    g.csr.validate()


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        (([0], [1], [6.0, 7.0]), {}, ValueError, "same length"),
        (([0], [-1], [6.0]), {}, ValueError, r"dst\[0\] = -1 is negative"),
        ((0, -1, 6.0), {}, ValueError, r"dst\[0\] = -1 is negative"),
        (([0.5], [1], [6.0]), {}, TypeError, "integer ids"),
        (([0], [1], [np.nan]), {}, ValueError, "not a finite"),
        ((0, 1, float("inf")), {}, ValueError, "not a finite"),
        (([0], [1], np.array([6.0], np.float32)), {}, TypeError, "float32"),
        (([0], [2**40], [6.0]), {}, ValueError, "sparse raw ids"),
        (([0], [1], [6.0]), dict(edge_feat=np.ones((1, 2))), ValueError, "no edge features"),
    ],
)
def test_bad_rows_give_clear_errors(args, kwargs, error, match):
    g = TemporalGraph([0, 1], [1, 2], [1.0, 5.0])
    with pytest.raises(error, match=match):
        g.add_edges(*args, **kwargs)
    assert g.num_edges == 2 and g.num_nodes == 3


def test_edge_and_node_features_grow_with_the_graph():
    ef = torch.arange(6, dtype=torch.float32).view(3, 2)
    g = TemporalGraph([0, 1, 2], [1, 2, 0], [1.0, 2.0, 3.0], edge_feat=ef,
                      node_feat=np.ones((3, 4), np.float32))
    with pytest.raises(ValueError, match="pass edge_feat"):
        g.add_edges([0], [1], [4.0])
    with pytest.raises(ValueError, match="3 columns"):
        g.add_edges([0], [1], [4.0], edge_feat=np.ones((1, 3)))
    with pytest.raises(TypeError, match="got both"):
        g.add_edges([0], [1], [4.0], edge_feat=np.ones((1, 2)), edge_feats=np.ones((1, 2)))
    g.add_edges(0, 4, 4.0, edge_feat=[10.0, 11.0])              # scalar fast path
    with pytest.warns(DeprecationWarning, match="edge_feat"):  # the release-0.1 name
        g.add_edges([1, 2], [0, 1], [5.0, 5.0], edge_feats=torch.full((2, 2), 7.0))
    for i in range(40):  # grows the tables' buffers several times
        g.add_edges([i % 5], [0], [6.0 + i], edge_feat=[[float(i), -1.0]])
    assert g.edge_feat.shape == (46, 2) and g.num_edges == 46
    assert g.edge_feat[3].tolist() == [10.0, 11.0] and g.edge_feat[5].tolist() == [7.0, 7.0]
    assert g.edge_feat[-1].tolist() == [39.0, -1.0] and torch.equal(g.edge_feat[:3], ef)
    assert g.node_feat.shape == (5, 4)
    assert g.node_feat[3:].abs().sum() == 0 and g.node_feat[:3].sum() == 12
    g.edge_feat = g.edge_feat.clone()  # replaced by the user: appends continue from it
    g.add_edges([0], [1], [100.0], edge_feat=[[1.0, 2.0]])
    assert g.edge_feat.shape == (47, 2)
    assert g.nbytes >= g.csr.nbytes + 47 * 2 * 4


def test_pickle_and_torch_save_of_an_appended_graph(tmp_path):
    g = TemporalGraph([0, 1], [1, 2], [1.0, 2.0], edge_feat=np.zeros((2, 1), np.float32))
    for i in range(30):
        g.add_edges([i % 4], [(i + 1) % 4], [3.0 + i], edge_feat=[[float(i)]])
    full = TemporalGraph(*g.edges(), edge_feat=g.edge_feat.clone())
    blob = pickle.dumps(g)
    # The features travel without the grown buffer's spare rows.
    assert len(blob) < len(pickle.dumps(full)) + 200
    for clone in (pickle.loads(blob), None):
        if clone is None:
            torch.save(g, tmp_path / "g.pt")
            clone = torch.load(tmp_path / "g.pt", weights_only=False)
        assert_same_csr(clone, full)
        assert torch.equal(clone.edge_feat, full.edge_feat)
        clone.add_edges([0], [3], [100.0], edge_feat=[[5.0]])  # still appendable
        assert clone.num_edges == 33


def test_relabelled_graphs_take_raw_ids_and_grow_by_larger_ones():
    g = TemporalGraph([100, 7], [7, 2**31 + 5], [1.0, 2.0], relabel=True)
    g.add_edges([7, 2**32], [100, 2**33], [3.0, 4.0])
    assert g.node_ids.tolist() == [7, 100, 2**31 + 5, 2**32, 2**33]
    assert g.compact_ids([2**33, 7]).tolist() == [4, 0]
    src, dst, _ = g.edges()
    assert src.tolist() == [1, 0, 0, 3] and dst.tolist() == [0, 2, 1, 4]
    with pytest.raises(ValueError, match="raw id 50 .* not larger than its largest raw id"):
        g.add_edges([50], [7], [5.0])
    with pytest.raises(ValueError, match="earlier than the graph's latest time"):
        g.add_edges([2**40], [7], [0.0])
    assert g.num_nodes == 5 and len(g.node_ids) == 5


def test_arrays_are_a_snapshot_that_later_appends_leave_alone():
    g = TemporalGraph([0, 1], [1, 2], [1.0, 2.0])
    views = g.csr.arrays()
    for i in range(5000):  # moves every list and reallocates the pool many times
        g.add_edges(i % 3, (i + 1) % 3, 3.0 + i)
    assert views["indptr"].tolist() == [0, 1, 3, 4] and views["row"].tolist() == [0, 0, 1, 1]
    assert g.csr.arrays()["indptr"][-1] == 2 * 5002


def test_sampling_while_another_thread_appends():
    rng = np.random.default_rng(0)
    g = TemporalGraph([0], [1], [0.0], num_nodes=50)
    sampler = TemporalSampler(g, [4, 4], strategy="uniform", seed=1, num_threads=2)
    stop = threading.Event()
    errors = []

    def read():
        try:
            while not stop.is_set():
                sampler.sample(rng.integers(0, 50, 200), np.full(200, 1e9))
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    t = threading.Thread(target=read)
    t.start()
    for i in range(300):
        g.add_edges(np.arange(20) % 50, (np.arange(20) * 7 + i) % 50, np.full(20, 1.0 + i))
    stop.set()
    t.join()
    assert not errors
    g.csr.validate()


def _wikipedia_path():
    for d in (Path("/work/shared/data"), Path(__file__).resolve().parents[2] / "shared" / "data"):
        if (d / "wikipedia").is_dir():
            return d
    return None


@pytest.mark.skipif(_wikipedia_path() is None, reason="no real data (/work/shared/data)")
def test_streaming_equals_a_full_build_on_wikipedia(_seed_everything):
    from tbdfs_dgl.data import load_dataset

    data = load_dataset("wikipedia", data_dir=_wikipedia_path())
    src, dst, ts = data.src, data.dst, data.ts.astype(np.float64)
    full = TemporalGraph(src, dst, ts, num_nodes=data.num_nodes)
    first = int(0.7 * len(src))
    g = TemporalGraph(src[:first], dst[:first], ts[:first])
    sizes = iter([1] * 300 + [100] * 50 + [10_000] * 100)
    i = first
    while i < len(src):
        k = next(sizes)
        g.add_edges(src[i:i + k], dst[i:i + k], ts[i:i + k])
        i += k
    assert_same_csr(g, full)
    rng = np.random.default_rng(_seed_everything)
    rows = rng.integers(first, len(src), 100)
    nodes = np.concatenate([src[rows], dst[rows]])
    times = np.concatenate([ts[rows], ts[rows]])
    assert_same_batches(full, g, nodes, times, (10, 10))
