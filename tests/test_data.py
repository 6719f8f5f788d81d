"""Tests of tbdfs_dgl.data: readers on hand-made files, errors on malformed ones, the shared
real files, downloads without the internet, and the synthetic generators."""
from __future__ import annotations

import ast
import datetime as dt
import gzip
import hashlib
import http.server
import os
import re
import socket
import subprocess
import sys
import textwrap
import threading
import zipfile
from collections import deque
from pathlib import Path

import numpy as np
import pytest

from tbdfs_dgl.data import (SOURCES, ChecksumError, TemporalDataset, download, fetch_dataset,
                            load_dataset, make_power_law, make_wikipedia_like, read_act_mooc,
                            read_booking, read_edge_list, read_jodie_csv, read_movielens,
                            read_reddit_hyperlinks, read_snap_temporal, read_tgat_processed)

SHARED = Path(os.environ.get("TBDFS_DATA_DIR") or
              Path(__file__).resolve().parents[1].parent / "shared" / "data")


def write(path: Path, text: str, gz: bool = False) -> Path:
    data = text.encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def utc(s: str) -> int:
    fmt = "%Y-%m-%d %H:%M:%S" if " " in s else "%Y-%m-%d"
    return int(dt.datetime.strptime(s, fmt).replace(tzinfo=dt.timezone.utc).timestamp())


# ============================================================================ TemporalDataset
def _ds(**kw):
    base = dict(name="t", src=[0, 1, 2], dst=[1, 2, 0], ts=[1, 2, 2], num_nodes=3)
    base.update(kw)
    return TemporalDataset(**base)


def test_dataset_coerces_dtypes_and_reports_sizes():
    ds = _ds(edge_feat=np.ones((3, 2), np.float64), node_feat=np.zeros((3, 4)),
             labels=np.array([0, 1, 0]))
    assert ds.src.dtype == np.int64 and ds.dst.dtype == np.int64
    assert ds.ts.dtype == np.int64
    assert ds.edge_feat.dtype == np.float32 and ds.node_feat.dtype == np.float32
    assert (ds.num_edges, ds.edge_dim, ds.node_dim) == (3, 2, 4)
    assert _ds().edge_dim == 0 and _ds().node_dim == 0
    assert _ds(ts=np.array([0.5, 1.0, 2.0])).ts.dtype == np.float64
    s = ds.summary()
    assert "3 nodes" in s and "3 interactions" in s and "edge features: 2" in s
    assert "num_edges=3" in repr(ds) and "array" not in repr(ds)


@pytest.mark.parametrize("kw, match", [
    (dict(ts=np.array([1, 2, 3], np.float32)), "float32"),
    (dict(dst=[1, 2]), "equal length"),
    (dict(dst=[1, 2, 3]), r"dst\[2\] = 3 is outside"),
    (dict(src=[0, -1, 2]), r"src\[1\] = -1 is outside"),
    (dict(ts=[1.0, float("nan"), 2.0]), "not a finite time"),
    (dict(ts=[1, 3, 2]), "must be sorted"),
    (dict(src=[0.0, 1.0, 2.0]), "integer node ids"),
    (dict(edge_feat=np.ones((2, 1))), "edge_feat must have shape"),
    (dict(edge_feat=np.array([[1.0], [np.inf], [0]])), "row 1"),
    (dict(labels=[1, 0]), "labels must have shape"),
    (dict(bipartite=True), "num_src_nodes"),
    (dict(bipartite=True, num_src_nodes=1), r"src\[1\] = 1 is not a source"),
    (dict(num_src_nodes=1), "only meaningful for bipartite"),
])
def test_dataset_rejects_invalid(kw, match):
    with pytest.raises(ValueError, match=match):
        _ds(**kw)


def test_dataset_bipartite_ok():
    ds = TemporalDataset(name="b", src=[0, 1], dst=[2, 3], ts=[0, 1], num_nodes=4,
                         bipartite=True, num_src_nodes=2)
    assert ds.num_dst_nodes == 2 and "2 sources + 2 destinations" in ds.summary()


def test_to_graph():
    try:
        import tbdfs_dgl.graph  # noqa: F401
    except Exception as exc:  # the compiled sampler may not be built in this checkout
        pytest.skip(f"tbdfs_dgl.graph does not import: {exc}")
    ds = make_wikipedia_like(num_users=20, num_pages=5, num_events=200, edge_feat_dim=3)
    g = ds.to_graph()
    assert (g.num_nodes, g.num_edges, g.directed) == (25, 200, False)
    src, dst, ts = g.edges()
    np.testing.assert_array_equal(src, ds.src)
    np.testing.assert_array_equal(dst, ds.dst)
    np.testing.assert_array_equal(ts, ds.ts.astype(np.float64))
    assert tuple(g.edge_feat.shape) == (200, 3)
    assert ds.to_graph(directed=True).directed


def test_data_package_has_no_torch_or_extension_import_at_module_level():
    pkg = Path(__file__).resolve().parents[1] / "tbdfs_dgl" / "data"
    allowed = {"numpy", "pandas", "__future__"}
    for f in pkg.glob("*.py"):
        for node in ast.parse(f.read_text()).body:  # module level only: lazy imports are fine
            if isinstance(node, ast.Import):
                roots = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                roots = set() if node.level else {node.module.split(".")[0]}
            else:
                continue
            for r in roots:
                assert r in allowed or r in _stdlib(), f"{f.name} imports {r} at module level"


def _stdlib():
    import sys
    return set(sys.stdlib_module_names)


def test_data_package_and_its_checks_work_without_torch(tmp_path):
    # the checks are shared with the graph (tbdfs_dgl._validate), which must not pull torch in
    code = textwrap.dedent("""
        import sys
        sys.modules["torch"] = None  # any import of torch now fails
        import numpy as np
        from tbdfs_dgl.data import TemporalDataset, load_dataset
        ds = TemporalDataset(name="t", src=[0, 1], dst=[1, 2], ts=[1, 2], num_nodes=3,
                             edge_feat=[[1.0], [2.0]])
        assert ds.ts.dtype == np.int64 and ds.edge_feat.dtype == np.float32
        try:
            TemporalDataset(name="t", src=[0], dst=[1], ts=np.ones(1, np.float32), num_nodes=2)
            raise AssertionError("float32 times accepted")
        except (TypeError, ValueError) as err:
            assert "float32" in str(err)
        assert load_dataset("synthetic").num_edges == 20000
    """)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


# ============================================================================ read_edge_list
def test_edge_list_whitespace_relabel_and_int_times(tmp_path):
    f = write(tmp_path / "e.txt", "10 20 5\n20  30\t7\n30 10 9\n")
    ds = read_edge_list(f)
    assert ds.num_nodes == 3 and ds.ts.dtype == np.int64 and not ds.bipartite
    np.testing.assert_array_equal(ds.src, [0, 1, 2])
    np.testing.assert_array_equal(ds.dst, [1, 2, 0])
    np.testing.assert_array_equal(ds.original_ids, [10, 20, 30])
    assert ds.edge_feat is None and ds.name == "e" and ds.source == str(f)


def test_edge_list_comma_features_float_times(tmp_path):
    f = write(tmp_path / "e.csv", "0,1,0.5,1.5,2\n1, 2, 1.25, -3, 4\n")
    ds = read_edge_list(f)
    assert ds.ts.dtype == np.float64 and ds.ts.tolist() == [0.5, 1.25]
    assert ds.edge_feat.dtype == np.float32
    np.testing.assert_array_equal(ds.edge_feat, [[1.5, 2], [-3, 4]])
    assert read_edge_list(f, edge_feat_cols=None).edge_feat is None
    np.testing.assert_array_equal(read_edge_list(f, edge_feat_cols=[4]).edge_feat, [[2], [4]])


def test_edge_list_gzip_detected_by_magic_bytes(tmp_path):
    text = "1 2 3\n2 3 4\n"
    plain = read_edge_list(write(tmp_path / "a.txt", text))
    gz_no_ext = read_edge_list(write(tmp_path / "b.txt", text, gz=True))
    plain_gz_ext = read_edge_list(write(tmp_path / "c.txt.gz", text))
    for ds in (gz_no_ext, plain_gz_ext):
        np.testing.assert_array_equal(ds.src, plain.src)
        np.testing.assert_array_equal(ds.ts, plain.ts)


def test_edge_list_comments_blank_lines_and_header(tmp_path):
    f = write(tmp_path / "e.txt", "% konect style\n# snap style\nsrc dst time\n\n1 2 3\n"
                                  "  # indented comment\n2 3 4\n\n")
    ds = read_edge_list(f)
    assert ds.num_edges == 2 and ds.ts.tolist() == [3, 4]


def test_edge_list_column_mapping_by_position_and_name(tmp_path):
    f = write(tmp_path / "e.txt", "2 1 0.1 100 1\n3 1 0.2 50 0\n")
    ds = read_edge_list(f, columns={"src": 1, "dst": 0, "ts": 3, "label": 4}, relabel=False)
    np.testing.assert_array_equal(ds.ts, [50, 100])  # sorted
    np.testing.assert_array_equal(ds.src, [1, 1])
    np.testing.assert_array_equal(ds.dst, [3, 2])
    np.testing.assert_array_equal(ds.labels, [0, 1])
    np.testing.assert_allclose(ds.edge_feat[:, 0], [0.2, 0.1])  # the only remaining column
    h = write(tmp_path / "h.csv", "when,to,from\n5,1,2\n4,2,1\n")
    ds = read_edge_list(h, columns={"src": "from", "dst": "to", "ts": "when"}, relabel=False)
    assert ds.ts.tolist() == [4, 5] and ds.src.tolist() == [1, 2]
    with pytest.raises(ValueError, match="no column named 'who'"):
        read_edge_list(h, columns={"src": "who", "dst": "to", "ts": "when"})
    with pytest.raises(ValueError, match="rows have only 5 columns"):
        read_edge_list(f, columns={"ts": 7})


def test_edge_list_stable_sort(tmp_path):
    # column 3 records the original row; equal times must keep file order
    rows = [(1, 2, 5, 0), (2, 3, 1, 1), (3, 4, 5, 2), (4, 1, 1, 3), (1, 3, 3, 4), (2, 4, 5, 5)]
    f = write(tmp_path / "e.txt", "".join(f"{a} {b} {t} {r}\n" for a, b, t, r in rows))
    ds = read_edge_list(f)
    assert ds.edge_feat[:, 0].tolist() == [1, 3, 4, 0, 2, 5]
    assert ds.ts.tolist() == [1, 1, 3, 5, 5, 5]
    np.testing.assert_array_equal(ds.original_ids[ds.src], [2, 4, 1, 1, 3, 2])


def test_edge_list_bipartite_offsets_each_side(tmp_path):
    # user and item ids overlap numerically: bipartite sides are separate id spaces
    f = write(tmp_path / "e.txt", "7 1 0\n3 7 1\n7 7 2\n")
    ds = read_edge_list(f, bipartite=True)
    assert (ds.num_src_nodes, ds.num_nodes) == (2, 4)
    np.testing.assert_array_equal(ds.src, [1, 0, 1])  # users 3, 7 -> 0, 1
    np.testing.assert_array_equal(ds.dst, [2, 3, 3])  # items 1, 7 -> 2, 3
    np.testing.assert_array_equal(ds.original_ids, [3, 7, 1, 7])
    g = write(tmp_path / "g.txt", "1 5 0\n2 6 1\n")
    ds = read_edge_list(g, bipartite=True, relabel=False)
    assert (ds.num_src_nodes, ds.num_nodes) == (3, 7)
    with pytest.raises(ValueError, match="relabel=True"):
        read_edge_list(f, bipartite=True, relabel=False)


@pytest.mark.parametrize("text, match", [
    ("1 2 3\n4 5 6\n7 8\n", r"line 3: expected 3 columns, found 2"),
    ("1 2 3\n4 5 6 7\n", r"line 2: expected 3 columns, found 4"),
    ("# c\n1 2 3\n\n4 5\n", r"line 4: expected 3 columns, found 2"),
    ("1,2,3\n4,5,\n", r"line 2: time \(column 3\) is missing or NaN"),
    ("1 2 3\n4 5 soon\n", r"line 2: time \(column 3\) is not a number: 'soon'"),
    ("1 2 3\n4 5 NaN\n", r"line 2: time \(column 3\) is missing or NaN"),
    ("1 2 3\n4 5 inf\n", r"line 2: time \(column 3\) is not finite"),
    ("1 2 3\n# x\n4 -5 6\n", r"line 3: negative destination id -5"),
    ("1 2 3\n4.5 5 6\n", r"line 2: source id \(column 1\) is not an integer"),
    ("1 2 3\n1 99999999999999999999 3\n", r"line 2: destination id \(column 2\) is too large"),
    ("1 2\n3 4\n", r"expected at least 3 columns"),
    ("", r"no data rows"),
    ("# only\n% comments\n\n", r"no data rows"),
    ("src dst ts\n", r"no data rows"),
])
def test_edge_list_malformed(tmp_path, text, match):
    f = write(tmp_path / "bad.txt", text)
    with pytest.raises(ValueError, match=match) as info:
        read_edge_list(f)
    assert str(f) in str(info.value)


def test_edge_list_malformed_gzip_and_missing(tmp_path):
    with pytest.raises(ValueError, match=r"line 2: expected 3 columns, found 2 \(line reads "
                                         r"'1 2'\)"):
        read_edge_list(write(tmp_path / "bad.gz", "1 2 3\n1 2\n", gz=True))
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        read_edge_list(tmp_path / "nope.txt")
    with pytest.raises(FileNotFoundError, match="directory"):
        read_edge_list(tmp_path)
    (tmp_path / "trunc.gz").write_bytes(gzip.compress(b"1 2 3\n" * 100)[:30])
    with pytest.raises(ValueError, match="cannot decompress"):
        read_edge_list(tmp_path / "trunc.gz")


def test_snap_temporal_layouts(tmp_path):
    btc = write(tmp_path / "soc-sign-bitcoinotc.csv.gz",
                "6,2,4,1289241911.72836\n6,5,-2,1289241941.53378\n1,15,10,1289243140.39049\n",
                gz=True)
    ds = read_snap_temporal(btc)
    assert ds.name == "bitcoin-otc" and ds.ts.dtype == np.float64
    assert ds.ts[0] == 1289241911.72836
    np.testing.assert_array_equal(ds.edge_feat[:, 0], [4, -2, 10])
    msg = read_snap_temporal(write(tmp_path / "CollegeMsg.txt", "1 2 1082040961\n3 4 1082155839\n"))
    assert msg.name == "collegemsg" and msg.ts.dtype == np.int64 and msg.edge_feat is None
    with pytest.raises(ValueError, match="found 5 columns"):
        read_snap_temporal(write(tmp_path / "x.txt", "1 2 3 4 5\n"))


# ============================================================================ JODIE / TGAT
JODIE = ("user_id,item_id,timestamp,state_label,comma_separated_list_of_features\n"
         "0,0,0.0,0,0.1,0.2,0.3\n"
         "1,1,36.0,0,0.4,0.5,0.6\n"
         "2,0,36.0,1,0.7,0.8,0.9\n"
         "0,2,150.0,0,1.0,1.1,1.2\n")


def test_jodie_csv(tmp_path):
    ds = read_jodie_csv(write(tmp_path / "wikipedia.csv", JODIE))
    assert ds.name == "wikipedia" and ds.bipartite
    assert (ds.num_src_nodes, ds.num_nodes, ds.num_edges) == (3, 6, 4)
    np.testing.assert_array_equal(ds.src, [0, 1, 2, 0])
    np.testing.assert_array_equal(ds.dst, [3, 4, 3, 5])  # items offset by num_users = 3
    np.testing.assert_array_equal(ds.labels, [0, 0, 1, 0])
    assert ds.edge_feat.shape == (4, 3) and ds.edge_feat[3, 2] == np.float32(1.2)
    assert ds.ts.dtype == np.float64


def test_jodie_csv_malformed(tmp_path):
    bad = JODIE.replace("2,0,36.0,1,0.7,0.8,0.9", "2,0,36.0,1,0.7,0.8")
    with pytest.raises(ValueError, match=r"line 4: expected 7 columns, found 6"):
        read_jodie_csv(write(tmp_path / "w.csv", bad))
    with pytest.raises(ValueError, match=r"line 3: negative user_id"):
        read_jodie_csv(write(tmp_path / "w.csv", JODIE.replace("\n1,1,", "\n-1,1,")))
    with pytest.raises(ValueError, match="at least 4 columns"):
        read_jodie_csv(write(tmp_path / "w.csv", "user_id,item_id,timestamp\n0,0,1\n"))


def _write_tgat(d: Path, name: str = "toy"):
    # TGN's layout: 1-based ids, users 1..2, items 3..4; idx points into the feature rows
    (d / f"ml_{name}.csv").write_text(",u,i,ts,label,idx\n0,1,3,0.0,0,2\n1,2,4,5.0,1,1\n"
                                      "2,1,4,3.0,0,3\n")
    e = np.arange(4 * 2, dtype=np.float64).reshape(4, 2)  # row 0 is padding
    np.save(d / f"ml_{name}.npy", e)
    np.save(d / f"ml_{name}_node.npy", np.arange(5 * 3, dtype=np.float64).reshape(5, 3))
    return e


def test_tgat_processed(tmp_path):
    e = _write_tgat(tmp_path)
    ds = read_tgat_processed(tmp_path, "toy")
    assert ds.bipartite and (ds.num_src_nodes, ds.num_nodes) == (2, 4)
    np.testing.assert_array_equal(ds.ts, [0.0, 3.0, 5.0])
    np.testing.assert_array_equal(ds.src, [0, 0, 1])
    np.testing.assert_array_equal(ds.dst, [2, 3, 3])
    np.testing.assert_array_equal(ds.edge_feat, e[[2, 3, 1]])  # rows follow idx after sorting
    np.testing.assert_array_equal(ds.labels, [0, 0, 1])
    np.testing.assert_array_equal(ds.node_feat[0], [3, 4, 5])  # padding row dropped


def test_tgat_processed_errors(tmp_path):
    _write_tgat(tmp_path)
    np.save(tmp_path / "ml_toy.npy", np.zeros((3, 2)))  # idx 3 now has no row
    with pytest.raises(ValueError, match=r"line 4: idx 3 has no row"):
        read_tgat_processed(tmp_path, "toy")
    os.remove(tmp_path / "ml_toy.npy")
    with pytest.raises(FileNotFoundError, match="ml_toy.npy"):
        read_tgat_processed(tmp_path, "toy")


# ============================================================================ publishers' layouts
def _reddit_row(s, t, when, sent, n=86, first="0.5"):
    props = ",".join([first] + [str(k / 10) for k in range(1, n)])
    return f"{s}\t{t}\tpost{when[-2:]}\t{when}\t{sent}\t{props}\n"


REDDIT_HEAD = "SOURCE_SUBREDDIT\tTARGET_SUBREDDIT\tPOST_ID\tTIMESTAMP\tLINK_SENTIMENT\tPROPERTIES\n"


def test_reddit_hyperlinks(tmp_path):
    f = write(tmp_path / "r.tsv", REDDIT_HEAD
              + _reddit_row("leagueoflegends", "teamredditteams", "2014-01-01 02:00:00", 1)
              + _reddit_row("askreddit", "leagueoflegends", "2014-01-01 00:00:10", -1)
              + _reddit_row("askreddit", "teamredditteams", "2014-01-01 00:00:10", 1))
    ds = read_reddit_hyperlinks(f)
    assert ds.num_nodes == 3 and ds.num_edges == 3 and not ds.bipartite
    assert ds.original_ids.tolist() == ["askreddit", "leagueoflegends", "teamredditteams"]
    assert ds.ts.dtype == np.int64
    assert ds.ts.tolist() == [utc("2014-01-01 00:00:10")] * 2 + [utc("2014-01-01 02:00:00")]
    np.testing.assert_array_equal(ds.src, [0, 0, 1])
    np.testing.assert_array_equal(ds.dst, [1, 2, 2])
    assert ds.edge_feat.shape == (3, 87)
    np.testing.assert_array_equal(ds.edge_feat[:, 0], [-1, 1, 1])
    np.testing.assert_allclose(ds.edge_feat[0, 1:3], [0.5, 0.1])
    np.testing.assert_array_equal(ds.labels, [-1, 1, 1])


@pytest.mark.parametrize("row, match", [
    (_reddit_row("a", "b", "2014-01-01 00:00:10", 1, n=85), r"line 3: PROPERTIES holds 85"),
    (_reddit_row("a", "b", "2014-13-01 00:00:10", 1), r"line 3: TIMESTAMP '2014-13-01"),
    (_reddit_row("a", "b", "2014-01-01 00:00:10", 0), r"line 3: LINK_SENTIMENT must be"),
    (_reddit_row("a", "b", "2014-01-01 00:00:10", 1, first="x"),
     r"line 3: PROPERTIES value 1 is not a finite number: 'x'"),
    ("a\tb\tpost\n", r"line 3: expected 6 columns, found 3"),
])
def test_reddit_hyperlinks_malformed(tmp_path, row, match):
    f = write(tmp_path / "r.tsv", REDDIT_HEAD + _reddit_row("a", "b", "2014-01-01 00:00:00", 1)
              + row)
    with pytest.raises(ValueError, match=match):
        read_reddit_hyperlinks(f)
    with pytest.raises(ValueError, match="missing column"):
        read_reddit_hyperlinks(write(tmp_path / "x.tsv", "A\tB\n1\t2\n"))


def _write_mooc(d: Path):
    d.mkdir(exist_ok=True)
    (d / "mooc_actions.tsv").write_text("ACTIONID\tUSERID\tTARGETID\tTIMESTAMP\n"
                                        "0\t5\t0\t0.0\n1\t2\t3\t6.0\n2\t5\t3\t6.0\n3\t2\t0\t41.0\n")
    # features and labels listed in another order: they must be joined on ACTIONID
    (d / "mooc_action_features.tsv").write_text(
        "ACTIONID\tFEATURE0\tFEATURE1\tFEATURE2\tFEATURE3\n"
        "3\t3.0\t0\t0\t0\n0\t0.0\t0\t0\t0\n2\t2.0\t0\t0\t0\n1\t1.0\t0\t0\t0\n")
    (d / "mooc_action_labels.tsv").write_text("ACTIONID\tLABEL\n2\t1\n3\t0\n1\t0\n0\t0\n")


def test_act_mooc(tmp_path):
    _write_mooc(tmp_path / "act-mooc")
    for where in (tmp_path / "act-mooc", tmp_path):  # the folder or the one it was extracted in
        ds = read_act_mooc(where)
        assert ds.bipartite and (ds.num_src_nodes, ds.num_nodes) == (2, 4)
        np.testing.assert_array_equal(ds.src, [1, 0, 1, 0])  # users 2, 5 -> 0, 1
        np.testing.assert_array_equal(ds.dst, [2, 3, 3, 2])  # targets 0, 3 -> 2, 3
        np.testing.assert_array_equal(ds.edge_feat[:, 0], [0, 1, 2, 3])
        np.testing.assert_array_equal(ds.labels, [0, 0, 1, 0])


def test_act_mooc_errors(tmp_path):
    d = tmp_path / "m"
    _write_mooc(d)
    (d / "mooc_action_labels.tsv").write_text("ACTIONID\tLABEL\n2\t1\n3\t0\n1\t0\n")
    with pytest.raises(ValueError, match="do not match"):
        read_act_mooc(d)
    os.remove(d / "mooc_action_labels.tsv")
    with pytest.raises(FileNotFoundError, match="mooc_action_labels.tsv"):
        read_act_mooc(d)


def test_movielens_100k_1m_and_zip(tmp_path):
    u = write(tmp_path / "u.data", "196\t242\t3\t881250949\n186\t302\t3\t891717742\n"
                                   "196\t302\t1\t878887116\n")
    ds = read_movielens(u)
    assert ds.name == "movielens-100k" and ds.bipartite and ds.num_src_nodes == 2
    assert ds.ts.tolist() == [878887116, 881250949, 891717742]
    np.testing.assert_array_equal(ds.src, [1, 1, 0])
    np.testing.assert_array_equal(ds.dst, [3, 2, 3])
    np.testing.assert_array_equal(ds.edge_feat[:, 0], [1, 3, 3])
    r = write(tmp_path / "ratings.dat", "1::1193::5::978300760\n1::661::3::978302109\n")
    ds = read_movielens(r)
    assert ds.name == "movielens-1m" and ds.num_nodes == 3 and ds.edge_feat[0, 0] == 5
    z = tmp_path / "ml-100k.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.write(u, "ml-100k/u.data")
    assert read_movielens(z).num_edges == 3
    with pytest.raises(ValueError, match=r"line 2: rating \(column 3\) is not a number"):
        read_movielens(write(tmp_path / "u.data", "1\t2\t3\t4\n1\t2\tx\t5\n"))


BOOKING = (",user_id,checkin,checkout,city_id,device_class,affiliate_id,booker_country,"
           "hotel_country,utrip_id\n"
           "0,1000027,2016-08-13,2016-08-14,8183,desktop,7168,Elbonia,Gondal,1000027_1\n"
           "1,1000027,2016-08-14,2016-08-16,15626,desktop,7168,Elbonia,Gondal,1000027_1\n"
           "2,1000033,2016-08-13,2016-08-14,0,mobile,359,Gondal,,1000033_1\n"
           "3,1000033,2016-08-09,2016-08-13,8183,mobile,359,Gondal,Gondal,1000033_1\n")


def test_booking(tmp_path):
    f = write(tmp_path / "booking_train_set.csv", BOOKING)
    ds = read_booking(f)
    assert ds.bipartite and ds.num_edges == 3 and (ds.num_src_nodes, ds.num_nodes) == (2, 4)
    assert ds.ts.tolist() == [utc("2016-08-09"), utc("2016-08-13"), utc("2016-08-14")]
    np.testing.assert_array_equal(ds.edge_feat[:, 0], [4, 1, 2])  # nights
    np.testing.assert_array_equal(ds.src, [1, 0, 0])
    np.testing.assert_array_equal(ds.dst, [2, 2, 3])
    assert read_booking(f, drop_hidden=False).num_edges == 4
    with pytest.raises(ValueError, match=r"line 3: checkin '2016-08-32'"):
        read_booking(write(tmp_path / "b.csv", BOOKING.replace("2016-08-14,2016-08-16",
                                                               "2016-08-32,2016-08-16")))


# ============================================================================ load_dataset
def test_load_dataset_by_name_env_and_path(tmp_path, monkeypatch):
    write(tmp_path / "CollegeMsg.txt.gz", "1 2 10\n2 3 5\n", gz=True)
    ds = load_dataset("CollegeMsg", data_dir=tmp_path)
    assert ds.name == "collegemsg" and ds.ts.tolist() == [5, 10]
    monkeypatch.setenv("TBDFS_DATA_DIR", str(tmp_path))
    assert load_dataset("collegemsg").num_edges == 2
    j = write(tmp_path / "anything.csv", JODIE)
    assert load_dataset(j).bipartite  # read by the reader its header calls for
    assert load_dataset(str(tmp_path / "CollegeMsg.txt.gz")).num_nodes == 3
    syn = load_dataset("synthetic")
    assert syn.synthetic and syn.num_edges == 20000


def test_load_dataset_missing_and_unknown(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError) as info:
        load_dataset("email-eu", data_dir=tmp_path)
    msg = str(info.value)
    assert str(tmp_path / "email-eu" / "email-Eu-core-temporal.txt.gz") in msg
    assert "https://snap.stanford.edu/data/email-Eu-core-temporal.txt.gz" in msg
    with pytest.raises(FileNotFoundError, match="no public URL"):
        load_dataset("booking", data_dir=tmp_path)
    with pytest.raises(ValueError, match="unknown dataset 'nosuchthing'"):
        load_dataset("nosuchthing", data_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_dataset(str(tmp_path / "absent.txt"))
    monkeypatch.setenv("TBDFS_DATA_DIR", str(tmp_path / "typo"))
    with pytest.raises(FileNotFoundError, match="typo"):
        load_dataset("wikipedia")


def test_load_dataset_sniffs_each_layout(tmp_path):
    """A path goes to the registered reader its folder, name or first line calls for."""
    _write_mooc(tmp_path / "act-mooc")
    ml = tmp_path / "ml"
    ml.mkdir()
    u = write(ml / "u.data", "196\t242\t3\t881250949\n186\t302\t3\t891717742\n")
    z = tmp_path / "ratings.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.write(u, "ml-100k/u.data")
    tgat = tmp_path / "tgat"
    tgat.mkdir()
    _write_tgat(tgat)
    expected = {
        tmp_path / "act-mooc": "act-mooc", ml: "movielens-100k", u: "movielens-100k",
        z: "movielens-100k", tgat: "toy", tgat / "ml_toy.csv": "toy",
        write(tmp_path / "r.tsv", REDDIT_HEAD + _reddit_row("a", "b", "2014-01-01 00:00:00", 1)):
            "reddit-hyperlinks",
        write(tmp_path / "b.csv", BOOKING): "booking",
        write(tmp_path / "plain.txt", "1 2 3\n"): "plain",
    }
    for path, name in expected.items():
        assert load_dataset(path).name == name, path
    assert load_dataset(write(tmp_path / "j.csv", JODIE)).bipartite  # JODIE, not an edge list
    with pytest.raises(ValueError, match="SNAP layout"):  # SNAP by its name: 5 columns refused
        load_dataset(write(tmp_path / "sx-toy.txt", "1 2 3 4 5\n"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="pass a file instead"):
        load_dataset(tmp_path / "empty")


def _read_toy(path) -> TemporalDataset:
    rows = [line.split() for line in Path(path).read_text().splitlines()[1:]]
    src, dst, ts = (np.array(col, np.int64) for col in zip(*rows))
    return TemporalDataset(name="toy-from-its-reader", src=src, dst=dst, ts=ts,
                           num_nodes=int(max(src.max(), dst.max())) + 1, source=str(path))


def test_a_registered_reader_is_found_by_name_alias_sniffer_and_source(tmp_path):
    from tbdfs_dgl.data import DATASET_NAMES, DatasetSource, register_reader, unregister_reader

    (tmp_path / "www").mkdir()
    www = write(tmp_path / "www" / "toy.tsv", "#toy v1\n0 1 5\n1 2 7\n")
    data = tmp_path / "data"
    register_reader("toy-format", files=("toy/toy.tsv",), aliases=("toyfmt",),
                    sniff=lambda path, first_line: first_line.startswith("#toy"),
                    source=DatasetSource(www.as_uri(), "toy/toy.tsv"))(_read_toy)
    try:
        assert "toy-format" in DATASET_NAMES and SOURCES["toy-format"].url == www.as_uri()
        with pytest.raises(FileNotFoundError, match=re.escape(str(data / "toy" / "toy.tsv"))):
            load_dataset("toy-format", data_dir=data)
        assert fetch_dataset("toy-format", data, progress=False) == data / "toy" / "toy.tsv"
        for name in ("toy-format", "Toy_Format", "TOYFMT"):
            ds = load_dataset(name, data_dir=data)
            assert ds.name == "toy-from-its-reader" and ds.ts.tolist() == [5, 7]
        assert load_dataset(www).name == "toy-from-its-reader"  # sniffed
        with pytest.raises(ValueError, match="already names a dataset"):
            register_reader("wiki", files=("w.csv",))(_read_toy)
        with pytest.raises(ValueError, match="already names a dataset"):
            register_reader("other", files=("o.csv",), aliases=("toyfmt",))(_read_toy)
        with pytest.raises(ValueError, match="pass files"):
            register_reader("other")
    finally:
        unregister_reader(_read_toy)
    assert "toy-format" not in DATASET_NAMES and "toy-format" not in SOURCES
    with pytest.raises(ValueError, match="unknown dataset 'toyfmt'"):
        load_dataset("toyfmt", data_dir=data)
    assert load_dataset(www).name == "toy"  # read_edge_list: the comment line is skipped


# ============================================================================ shared real files
REAL = {  # name: (rows, nodes, num_src_nodes or None, file)  -- from shared/data/README.md
    "wikipedia": (157_474, 9_227, 8_227, "wikipedia/wikipedia-edges.txt.gz"),
    "collegemsg": (59_835, 1_899, None, "collegemsg/CollegeMsg.txt.gz"),
    "email-eu": (332_334, 986, None, "email-eu/email-Eu-core-temporal.txt.gz"),
    "bitcoin-otc": (35_592, 5_881, None, "bitcoin-otc/soc-sign-bitcoinotc.csv.gz"),
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_shared_files(name):
    rows, nodes, num_src, rel = REAL[name]
    if not (SHARED / rel).exists():
        pytest.skip(f"{SHARED / rel} not present")
    ds = load_dataset(name, data_dir=SHARED)
    assert (ds.num_edges, ds.num_nodes, ds.num_src_nodes) == (rows, nodes, num_src)
    assert not ds.synthetic and np.all(np.diff(ds.ts) >= 0)
    assert np.unique(np.concatenate([ds.src, ds.dst])).size == nodes  # compact ids
    if name == "wikipedia":
        # users 1..8227 -> 0..8226 and pages 8228..9227 -> 8227..9226, as in JODIE's csv
        np.testing.assert_array_equal(ds.original_ids, np.arange(1, 9228))
        assert ds.edge_feat is None and ds.labels is None
    if name == "bitcoin-otc":
        assert ds.ts.dtype == np.float64 and ds.edge_dim == 1
        assert ds.edge_feat.min() == -10 and ds.edge_feat.max() == 10
    else:
        assert ds.ts.dtype == np.int64


def test_real_email_eu_stable_sort():
    f = SHARED / REAL["email-eu"][3]
    if not f.exists():
        pytest.skip(f"{f} not present")
    raw = np.loadtxt(gzip.open(f), dtype=np.int64)
    assert np.any(np.diff(raw[:, 2]) < 0)  # the publisher's file is not in time order
    order = np.argsort(raw[:, 2], kind="stable")
    ds = read_snap_temporal(f)
    np.testing.assert_array_equal(ds.original_ids[ds.src], raw[order, 0])
    np.testing.assert_array_equal(ds.original_ids[ds.dst], raw[order, 1])
    np.testing.assert_array_equal(ds.ts, raw[order, 2])


# ============================================================================ download
def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def http_dir(tmp_path):
    root = tmp_path / "www"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(root), **kw)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_download_offline_error(tmp_path):
    url = f"http://127.0.0.1:{_unused_port()}/CollegeMsg.txt.gz"
    dest = tmp_path / "out" / "CollegeMsg.txt.gz"
    with pytest.raises(RuntimeError) as info:
        download(url, dest, progress=False, timeout=5)
    msg = str(info.value)
    assert msg.startswith(f"could not download {url}: ")
    assert "offline" in msg and str(dest) in msg and "synthetic" in msg
    assert not dest.exists() and list(dest.parent.iterdir()) == []  # no partial file left


def test_download_success_checksum_and_http_error(http_dir, tmp_path):
    root, base = http_dir
    payload = os.urandom(200_000)
    (root / "f.bin").write_bytes(payload)
    good = hashlib.sha256(payload).hexdigest()
    dest = tmp_path / "dl" / "f.bin"
    assert download(f"{base}/f.bin", dest, sha256=good, progress=False) == dest
    assert dest.read_bytes() == payload
    assert download(f"{base}/f.bin", dest, sha256=good, progress=False) == dest  # cached
    bad_dest = tmp_path / "dl" / "g.bin"
    with pytest.raises(ChecksumError, match="checksum mismatch"):
        download(f"{base}/f.bin", bad_dest, sha256="0" * 64, progress=False)
    assert not bad_dest.exists()
    assert sorted(p.name for p in dest.parent.iterdir()) == ["f.bin"]
    with pytest.raises(RuntimeError, match="HTTP 404"):
        download(f"{base}/missing.bin", tmp_path / "dl" / "m.bin", progress=False)
    file_dest = tmp_path / "dl" / "copy.bin"
    download((root / "f.bin").as_uri(), file_dest, sha256=good, progress=False)
    assert file_dest.read_bytes() == payload


def test_sources_table_and_fetch(http_dir, tmp_path, monkeypatch):
    assert SOURCES["wikipedia"].url == "http://snap.stanford.edu/jodie/wikipedia.csv"
    assert SOURCES["act-mooc"].url == "https://snap.stanford.edu/data/act-mooc.tar.gz"
    assert SOURCES["movielens-1m"].url.endswith("/movielens/ml-1m.zip")
    assert SOURCES["booking"].url is None and "no public URL" in SOURCES["booking"].note
    root, base = http_dir
    with zipfile.ZipFile(root / "ml-100k.zip", "w") as zf:
        zf.writestr("ml-100k/u.data", "1\t2\t3\t4\n")
    monkeypatch.setitem(SOURCES, "movielens-100k",
                        SOURCES["movielens-100k"].__class__(f"{base}/ml-100k.zip", "ml-100k.zip"))
    folder = fetch_dataset("movielens-100k", tmp_path / "data", progress=False)
    assert folder == tmp_path / "data" / "ml-100k" and (folder / "u.data").is_file()
    assert load_dataset("movielens-100k", data_dir=tmp_path / "data").num_edges == 1
    with pytest.raises(RuntimeError, match="cannot be downloaded"):
        fetch_dataset("booking", tmp_path)


# ============================================================================ synthetic
def _planted_rate(ds: TemporalDataset, recent: int = 8):
    """Share of non-repeat edits whose page some recent co-editor of the user's last page
    moved to next -- recomputed from the output alone."""
    U = ds.num_src_nodes
    last, nxt = {}, {}
    editors = [deque(maxlen=recent) for _ in range(ds.num_nodes - U)]
    hits = eligible = 0
    for u, q in zip(ds.src.tolist(), (ds.dst - U).tolist()):
        p = last.get(u)
        if p is not None and q != p:
            cands = {nxt.get((v, p)) for v in editors[p] if v != u} - {None}
            if cands:
                eligible += 1
                hits += q in cands
            nxt[(u, p)] = q
        if u in editors[q]:
            editors[q].remove(u)
        editors[q].append(u)
        last[u] = q
    return hits / eligible, eligible


def test_wikipedia_like_shape_and_determinism():
    a = make_wikipedia_like(seed=3, edge_feat_dim=4)
    b = make_wikipedia_like(seed=3, edge_feat_dim=4)
    c = make_wikipedia_like(seed=4, edge_feat_dim=4)
    for f in ("src", "dst", "ts", "edge_feat"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    assert not np.array_equal(a.dst, c.dst)
    assert a.synthetic and a.bipartite and (a.num_src_nodes, a.num_nodes) == (1000, 1200)
    assert a.num_edges == 20000 and a.ts.dtype == np.int64 and a.edge_feat.shape == (20000, 4)
    assert 25 * 86400 < a.ts[-1] - a.ts[0] <= 30 * 86400
    activity = np.bincount(a.src, minlength=1000)
    assert activity.max() > 20 * max(np.median(activity), 1)  # heavy-tailed editors
    same_user_gap = np.diff(a.ts)[a.src[1:] == a.src[:-1]]
    assert np.median(same_user_gap) < 600  # bursts: consecutive edits minutes apart
    prev = {}
    repeats = 0
    for u, q in zip(a.src.tolist(), a.dst.tolist()):
        repeats += prev.get(u) == q
        prev[u] = q
    assert repeats / a.num_edges > 0.2


def test_wikipedia_like_planted_pattern():
    strong, n = _planted_rate(make_wikipedia_like(path_strength=0.6))
    chance, _ = _planted_rate(make_wikipedia_like(path_strength=0.0))
    assert n > 5000
    assert chance < 0.2 and strong > 0.5 and strong - chance > 0.4


def test_wikipedia_like_validates_arguments():
    with pytest.raises(ValueError, match="path_strength"):
        make_wikipedia_like(path_strength=1.5)
    with pytest.raises(ValueError):
        make_wikipedia_like(num_users=1)


def test_power_law():
    src, dst, ts = make_power_law(50_000, 300_000, alpha=2.1, seed=1)
    assert src.dtype == dst.dtype == np.int64 and ts.dtype == np.float64
    assert src.shape == dst.shape == ts.shape == (300_000,)
    assert src.min() >= 0 and max(src.max(), dst.max()) < 50_000
    assert not np.any(src == dst) and np.all(np.diff(ts) >= 0)
    deg = np.bincount(np.concatenate([src, dst]), minlength=50_000)
    assert deg.max() > 100 * deg.mean()  # hubs
    again = make_power_law(50_000, 300_000, alpha=2.1, seed=1)
    for x, y in zip((src, dst, ts), again):
        np.testing.assert_array_equal(x, y)
    with pytest.raises(ValueError, match="alpha"):
        make_power_law(10, 10, alpha=1.0)
