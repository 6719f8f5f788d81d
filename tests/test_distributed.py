"""Saved and memory-mapped graphs; data-parallel training equal to one process."""
import json
import os
import pickle
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tbdfs_dgl import TemporalGraph
from tbdfs_dgl.linkpred import EventBatch
from tbdfs_dgl.linkpred.distributed import Ranks, share_batch_id, share_of

import reference as ref
from test_append import assert_same_batches, assert_same_csr

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- save / load
def _graph(rng, directed=False, feats=True, relabel=False):
    src, dst, ts = ref.random_graph(rng, 40, 700, num_times=150)
    if relabel:
        src, dst = src * 1000 + 7, dst * 1000 + 7
    kw = dict(directed=directed, relabel=relabel)
    if feats:
        kw["edge_feat"] = rng.standard_normal((len(src), 3)).astype(np.float32)
    g = TemporalGraph(src, dst, ts, **kw)
    if feats:
        g.node_feat = rng.standard_normal((g.num_nodes, 2)).astype(np.float32)
    return g


@pytest.mark.parametrize("mmap", [True, False])
@pytest.mark.parametrize("directed", [False, True])
def test_save_load_round_trip_samples_alike(tmp_path, mmap, directed, _seed_everything):
    rng = np.random.default_rng(_seed_everything)
    g = _graph(rng, directed=directed)
    g.save(tmp_path / "g")
    h = TemporalGraph.load(tmp_path / "g", mmap=mmap, verify=True)
    assert h.is_mapped == mmap and not g.is_mapped
    assert (h.num_nodes, h.num_edges, h.directed) == (g.num_nodes, g.num_edges, g.directed)
    assert_same_csr(g, h)
    assert torch.equal(g.edge_feat, h.edge_feat) and torch.equal(g.node_feat, h.node_feat)
    nodes = rng.integers(0, g.num_nodes, 60)
    times = rng.uniform(0, 160, 60)
    assert_same_batches(g, h, nodes, times)
    # Pickling a mapped graph carries its arrays, not the mapping.
    assert_same_csr(g, pickle.loads(pickle.dumps(h)))


def test_appending_to_a_mapped_graph_copies_it_first(tmp_path, _seed_everything):
    rng = np.random.default_rng(_seed_everything)
    g = _graph(rng, feats=False)
    g.save(tmp_path / "g")
    h = TemporalGraph.load(tmp_path / "g")
    before = (tmp_path / "g" / "entries.npy").read_bytes()
    t = g.time_range[1]
    for x in (g, h):
        x.add_edges([0, 3, 45], [1, 3, 2], [t, t + 1, t + 1])  # 45: a new node
    assert not h.is_mapped
    assert_same_csr(g, h)
    assert (tmp_path / "g" / "entries.npy").read_bytes() == before  # the file is untouched
    assert_same_batches(g, h, np.array([0, 3, 45, 1]), np.full(4, t + 2))


def test_relabelled_graph_keeps_its_raw_ids(tmp_path, _seed_everything):
    g = _graph(np.random.default_rng(_seed_everything), relabel=True, feats=False)
    g.save(tmp_path / "g")
    h = TemporalGraph.load(tmp_path / "g")
    np.testing.assert_array_equal(g.node_ids, h.node_ids)
    np.testing.assert_array_equal(h.compact_ids(g.node_ids[:5]), np.arange(5))


def test_save_replaces_only_saved_graphs(tmp_path):
    g = TemporalGraph([0, 1], [1, 2], [1.0, 2.0])
    g.save(tmp_path / "g")
    g.save(tmp_path / "g")  # a saved graph is replaced
    (tmp_path / "other").mkdir()
    with pytest.raises(FileExistsError, match="not a saved TemporalGraph"):
        g.save(tmp_path / "other")
    empty = TemporalGraph(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), num_nodes=3)
    empty.save(tmp_path / "empty")
    assert TemporalGraph.load(tmp_path / "empty").num_nodes == 3


def _corrupt(path: Path, how: str) -> None:
    header = json.loads((path / "header.json").read_text())
    if how == "no header":
        (path / "header.json").unlink()
    elif how == "format":
        header["format"] = "something else"
    elif how == "version":
        header["version"] = 99
    elif how == "truncated":
        data = (path / "entries.npy").read_bytes()
        (path / "entries.npy").write_bytes(data[:-24])
    elif how == "missing":
        (path / "src.npy").unlink()
    elif how == "dtype":
        np.save(path / "src.npy", np.zeros(header["arrays"]["src"]["shape"], np.int64))
    elif how == "foreign":
        (path / "dst.npy").write_bytes(b"not numpy at all")
    elif how == "sizes":
        header["num_edges"] += 1
    if how in ("format", "version", "sizes"):
        (path / "header.json").write_text(json.dumps(header))


@pytest.mark.parametrize("how, message", [
    ("no header", "no header.json"), ("format", "not a TemporalGraph header"),
    ("version", "format version 99"), ("truncated", "entries.npy is truncated"),
    ("missing", "src.npy is missing"), ("dtype", "src.npy holds int64"),
    ("foreign", "dst.npy is not a .npy file"), ("sizes", "src.npy has shape")])
def test_corrupt_files_are_refused_clearly(tmp_path, how, message):
    g = TemporalGraph([0, 1, 2], [1, 2, 0], [1.0, 2.0, 3.0])
    g.save(tmp_path / "g")
    _corrupt(tmp_path / "g", how)
    for mmap in (True, False):
        with pytest.raises(ValueError, match=message):
            TemporalGraph.load(tmp_path / "g", mmap=mmap)


def test_changed_contents_are_caught(tmp_path):
    g = TemporalGraph([0, 1, 2], [1, 2, 0], [1.0, 2.0, 3.0])
    g.save(tmp_path / "g")
    entries = np.load(tmp_path / "g" / "entries.npy", mmap_mode="r+")
    entries["twin"][0] += 5  # sizes intact, lists broken
    entries.flush()
    del entries
    with pytest.raises(ValueError, match="checksum"):
        TemporalGraph.load(tmp_path / "g", verify=True)
    with pytest.raises(ValueError, match="twin"):  # the structural check, always on
        TemporalGraph.load(tmp_path / "g")
    with pytest.raises(FileNotFoundError):
        TemporalGraph.load(tmp_path / "nowhere")


# ---------------------------------------------------------------- rank shares
def test_rank_shares_partition_each_batch_and_weight_the_mean():
    n = 7
    item = EventBatch(*(np.arange(n) + k for k in range(4)), np.arange(n))
    for world in (1, 2, 3, 7, 9):
        rows, total = [], 0.0
        for r in range(world):
            part, w = share_of(item, Ranks(r, world))
            if w:
                rows.append(part.rows)
                total += w * part.num_events
            else:
                assert part.num_events == 1  # an empty share still runs one event
        np.testing.assert_array_equal(np.concatenate(rows), item.rows)
        assert total == pytest.approx(world)  # mean over ranks of weight * count = 1
    assert share_batch_id(5, Ranks(0, 2)) == 5 and share_batch_id(5, Ranks(1, 2)) > 4e9


# ---------------------------------------------------------------- DDP equivalence
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_ranks(world: int, out: Path, *args: str) -> list:
    port = str(_free_port())
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port, OMP_NUM_THREADS="1",
                   PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        procs.append(subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "distributed_worker.py"), "--out", str(out),
             *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    try:
        logs = [p.communicate(timeout=240)[0].decode() for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log
    return [torch.load(f"{out}.rank{r}.pt") for r in range(world)]


@pytest.mark.skipif(not (torch.distributed.is_available()
                         and torch.distributed.is_gloo_available()), reason="no gloo backend")
def test_two_gloo_ranks_train_as_one_process(tmp_path):
    # SGD and frozen time encoders: see tests/distributed_worker.py for why.
    args = ("--steps", "4", "--batch-size", "51", "--sgd", "0.05", "--freeze-time")
    (one,) = _run_ranks(1, tmp_path / "one", *args)
    two = _run_ranks(2, tmp_path / "two", *args)
    assert not one["mapped"] and all(r["mapped"] for r in two)  # ranks share mapped graphs
    for k, p in one["params"].items():
        assert torch.equal(two[0]["params"][k], two[1]["params"][k]), k  # DDP keeps them equal
        assert (p - two[0]["params"][k]).abs().max() <= 1e-5, k
    for k, g in one["grads"].items():  # the last step's gradients, both averaged the same
        assert (g - two[0]["grads"][k]).abs().max() <= 1e-4 * max(g.abs().max(), 1e-3), k
    assert two[0]["batches"] == one["batches"] == 4
    assert two[0]["loss"] == pytest.approx(one["loss"], rel=1e-6)
    # The metrics are rank and threshold statistics of 300 validation events: parameters
    # equal to 1e-5 can swap two near-tied scores (as in the sanitizer build, whose float
    # rounding differs), which moves AP, accuracy or F1 by at most about one event's share.
    one_event = 1.0 / 300
    for setting in ("transductive", "inductive"):
        for metric, v in one["val"][setting].items():
            assert two[0]["val"][setting][metric] == pytest.approx(v, abs=one_event), \
                (setting, metric)
            assert two[1]["val"][setting][metric] == two[0]["val"][setting][metric]
