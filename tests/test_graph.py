"""TemporalGraph: construction, validation, conversion and the CSR it builds."""
import pickle

import numpy as np
import pandas as pd
import pytest
import torch

from tbdfs_dgl import TemporalGraph

import reference as ref
from conftest import optional_dgl

dgl = optional_dgl()  # a stand-in in sanitizer mode: tests that use it are skipped


@pytest.mark.parametrize("directed", [False, True])
def test_csr_lists_are_the_reference_adjacency(directed):
    rng = np.random.default_rng(0)
    src, dst, ts = ref.random_graph(rng, 15, 80)
    g = TemporalGraph(src, dst, ts, num_nodes=15, directed=directed)
    g.csr.validate()
    a = g.csr.arrays()
    adj = ref.adjacency(src, dst, ts, 15, directed)
    for u in range(15):
        lo, hi = a["indptr"][u], a["indptr"][u + 1]
        got = list(zip(a["ts"][lo:hi].tolist(), a["row"][lo:hi].tolist(), a["nbr"][lo:hi].tolist()))
        assert got == adj[u]
    assert g.num_nodes == 15 and g.num_edges == 80 and g.directed == directed


def test_int64_times_and_num_nodes_default():
    g = TemporalGraph(np.array([0, 3]), np.array([1, 2]), np.array([1_600_000_000, 1_600_000_001]))
    assert g.num_nodes == 4
    assert g.edges()[2].dtype == np.float64
    assert g.edges()[2].tolist() == [1_600_000_000.0, 1_600_000_001.0]
    assert g.time_range == (1_600_000_000.0, 1_600_000_001.0)


def test_features_are_kept_and_counted():
    ef, nf = np.ones((3, 2), np.float32), torch.zeros(5, 4)
    g = TemporalGraph([0, 1, 2], [1, 2, 3], [1.0, 2.0, 3.0], num_nodes=5, edge_feat=ef, node_feat=nf)
    assert g.edge_feat.shape == (3, 2) and g.node_feat.shape == (5, 4)
    assert g.nbytes == g.csr.nbytes + 3 * 2 * 4 + 5 * 4 * 4
    assert "edge_feat_dim=2" in repr(g)


def test_dgl_round_trip():
    rng = np.random.default_rng(1)
    src, dst, ts = ref.random_graph(rng, 12, 40)
    ef = rng.random((40, 3)).astype(np.float32)
    g = TemporalGraph(src, dst, ts, num_nodes=12, edge_feat=ef)
    d = g.to_dgl()
    assert d.num_nodes() == 12 and d.num_edges() == 40
    u, v = d.edges(order="eid")
    assert u.tolist() == src.tolist() and v.tolist() == dst.tolist()
    assert d.edata["ts"].dtype == torch.float64 and d.edata["ts"].tolist() == ts.tolist()
    back = TemporalGraph.from_dgl(d, edge_feat_field="feat")
    for x, y in zip(back.edges(), g.edges()):
        np.testing.assert_array_equal(x, y)
    assert torch.equal(back.edge_feat, g.edge_feat)
    np.testing.assert_array_equal(back.csr.arrays()["nbr"], g.csr.arrays()["nbr"])


def test_from_dgl_needs_times():
    with pytest.raises(KeyError, match="no edge field 'ts'"):
        TemporalGraph.from_dgl(dgl.graph(([0], [1])))


def test_from_pandas():
    df = pd.DataFrame({"u": [0, 1, 2], "i": [3, 3, 4], "t": [5, 4, 6], "w": [0.5, 1.0, 2.0]})
    g = TemporalGraph.from_pandas(df, src="u", dst="i", time="t", edge_feat_cols=["w"])
    assert g.num_edges == 3 and g.edge_feat[:, 0].tolist() == [0.5, 1.0, 2.0]
    with pytest.raises(KeyError, match="'time'"):
        TemporalGraph.from_pandas(df, src="u", dst="i", time="time")


def test_pickle_round_trip_keeps_the_csr():
    rng = np.random.default_rng(2)
    src, dst, ts = ref.random_graph(rng, 10, 30)
    g = TemporalGraph(src, dst, ts, num_nodes=10, node_feat=np.ones((10, 2)))
    clone = pickle.loads(pickle.dumps(g))
    for k, v in g.csr.arrays().items():
        np.testing.assert_array_equal(clone.csr.arrays()[k], v)
    assert torch.equal(clone.node_feat, g.node_feat)


def test_corrupt_pickled_csr_is_rejected():
    g = TemporalGraph([0, 1], [1, 2], [1.0, 2.0])
    state = g.__getstate__()
    state["arrays"]["ts"] = state["arrays"]["ts"][::-1].copy()
    with pytest.raises(ValueError, match="not sorted"):
        TemporalGraph.__new__(TemporalGraph).__setstate__(state)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(src=[0, 1], dst=[1], ts=[1.0, 2.0]), ValueError, "same length"),
        (dict(src=[0, -1], dst=[1, 2], ts=[1.0, 2.0]), ValueError, r"src\[1\] = -1 is negative"),
        (dict(src=[0.0, 1.0], dst=[1, 2], ts=[1.0, 2.0]), TypeError, "integer ids"),
        (dict(src=[[0, 1]], dst=[[1, 2]], ts=[[1.0, 2.0]]), ValueError, "1-D"),
        (dict(src=[0, 1], dst=[1, 2], ts=[1.0, np.nan]), ValueError, r"ts\[1\] = nan is not a finite"),
        (dict(src=[0, 1], dst=[1, 2], ts=[1.0, np.inf]), ValueError, "not a finite"),
        (dict(src=[0, 1], dst=[1, 2], ts=np.array([1.0, 2.0], np.float32)), TypeError, "float32"),
        (dict(src=[0, 1], dst=[1, 2], ts=["a", "b"]), TypeError, "times"),
        (dict(src=[0, 1], dst=[1, 5], ts=[1.0, 2.0], num_nodes=3), ValueError, "num_nodes=3 is too small"),
        (dict(src=[0], dst=[1], ts=[1.0], num_nodes=2.5), TypeError, "num_nodes must be an int"),
        (dict(src=[0], dst=[1], ts=[2**60]), ValueError, "2\\*\\*53"),
        (dict(src=[0], dst=[1], ts=[1.0], edge_feat=np.ones((2, 3))), ValueError, "edge_feat has 2 rows"),
        (dict(src=[0], dst=[1], ts=[1.0], node_feat=np.ones((2, 3, 1))), ValueError, "node_feat must be 2-D"),
        (dict(src=[0], dst=[1], ts=[1.0], edge_feat=[[np.nan]]), ValueError, "NaN"),
    ],
)
def test_bad_input_raises_a_clear_error(kwargs, error, match):
    with pytest.raises(error, match=match):
        TemporalGraph(**kwargs)


def test_empty_graph():
    g = TemporalGraph([], [], [], num_nodes=0)
    assert g.num_nodes == 0 and g.num_edges == 0
    g = TemporalGraph(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), num_nodes=3)
    assert g.to_dgl().num_nodes() == 3


@pytest.mark.parametrize("bad, error", [
    (dict(ts=np.array([1, 2, 3], np.float32)), "DtypeError"),
    (dict(src=[0.0, 1.0, 2.0]), "DtypeError"),
    (dict(ts=["a", "b", "c"]), "DtypeError"),
    (dict(feat=np.array([["a"], ["b"], ["c"]])), "DtypeError"),
    (dict(ts=[1.0, np.nan, 2.0]), "ValueError"),
    (dict(src=[0, -1, 2]), "ValueError"),
    (dict(src=[[0, 1, 2]]), "ValueError"),
    (dict(feat=np.ones((2, 1))), "ValueError"),
    (dict(feat=np.array([[1.0], [np.inf], [0.0]])), "ValueError"),
])
def test_graph_and_dataset_reject_bad_input_with_the_same_exception(bad, error):
    """One validation module: the same problem raises the same exception type in both."""
    from tbdfs_dgl._validate import DtypeError
    from tbdfs_dgl.data import TemporalDataset

    kw = dict(src=[0, 1, 2], dst=[1, 2, 0], ts=[1.0, 2.0, 2.0], feat=None)
    kw.update(bad)
    with pytest.raises(ValueError) as from_dataset:
        TemporalDataset(name="t", src=kw["src"], dst=kw["dst"], ts=kw["ts"], num_nodes=3,
                        edge_feat=kw["feat"])
    with pytest.raises((TypeError, ValueError)) as from_graph:
        TemporalGraph(kw["src"], kw["dst"], kw["ts"], 3, kw["feat"])
    assert type(from_dataset.value) is type(from_graph.value)
    assert type(from_graph.value).__name__ == error
    if error == "DtypeError":  # a TypeError that every `except ValueError` also catches
        assert isinstance(from_graph.value, TypeError) and issubclass(DtypeError, ValueError)


@pytest.mark.parametrize("src, hint", [([0.0, 1.0], r"\.astype\('int64'\)"),
                                       (["a", "b"], r"np\.unique\(ids, return_inverse=True\)")])
def test_non_integer_ids_get_the_hint_that_fits_them(src, hint):
    from tbdfs_dgl._validate import DtypeError

    with pytest.raises(DtypeError, match=hint):
        TemporalGraph(src, [1, 0], [1.0, 2.0])
