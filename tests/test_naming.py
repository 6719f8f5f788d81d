"""Release 0.2's names (widths ``*_dim``, tensors ``*_feat``, ``within_path_agg`` /
``across_paths_agg``), the old names kept as deprecated aliases, the checkpoints of release
0.1, and the link scorer as its own module."""
import argparse
import importlib.util
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from tbdfs_dgl import TBDFSModel, TemporalGraph, TemporalSampler
from tbdfs_dgl._deprecation import add_deprecated_flag, deprecated_alias, renamed_kwargs
from tbdfs_dgl.data import TemporalDataset
from tbdfs_dgl.linkpred import load_checkpoint, save_checkpoint
from tbdfs_dgl.nn import LinkScorer, PathAggregator, PathEncoder, TemporalAttentionConv

ROOT = Path(__file__).resolve().parents[1]
N, E = 30, 200

#: TBDFSModel(node_dim=4, edge_dim=3, time_dim=6, hidden_dim=8, alpha='learn', num_nodes=30,
#: node_embedding_dim=3).state_dict(), keys and shapes, as release 0.1 saved it.
RELEASE_0_1_STATE = [
    ("time_encoder.weight", [3]), ("node_embedding.weight", [30, 3]),
    ("node_proj.weight", [8, 7]), ("node_proj.bias", [8]),
    *[(f"layers.{i}.{k}", s) for i in (0, 1) for k, s in (
        ("time_encoder.weight", [3]), ("fc_q.weight", [8, 14]), ("fc_k.weight", [8, 17]),
        ("fc_v.weight", [8, 17]), ("fc1.weight", [8, 16]), ("fc1.bias", [8]),
        ("fc2.weight", [8, 8]), ("fc2.bias", [8]))],
    ("path_encoder.time_encoder.weight", [3]), ("path_encoder.fc_q.weight", [8, 14]),
    ("path_encoder.fc_k.weight", [8, 17]), ("path_encoder.fc_v.weight", [8, 17]),
    ("path_encoder.fc1.weight", [8, 16]), ("path_encoder.fc1.bias", [8]),
    ("path_encoder.fc2.weight", [8, 8]), ("path_encoder.fc2.bias", [8]),
    ("path_aggregator.fc_q.weight", [8, 8]), ("path_aggregator.fc_k.weight", [8, 8]),
    ("path_aggregator.fc_o.weight", [8, 16]), ("path_aggregator.fc_o.bias", [8]),
    ("gate.weight", [1, 16]), ("gate.bias", [1]),
    ("score_fc1.weight", [8, 16]), ("score_fc1.bias", [8]),
    ("score_fc2.weight", [1, 8]), ("score_fc2.bias", [1]),
]
FULL = dict(node_dim=4, edge_dim=3, time_dim=6, hidden_dim=8, alpha="learn", num_nodes=N,
            node_embedding_dim=3)


def graph_and_batch(seed=0):
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.uniform(0, 100, E))
    g = TemporalGraph(rng.integers(0, N, E), rng.integers(0, N, E), ts, num_nodes=N,
                      edge_feat=rng.normal(size=(E, 3)).astype(np.float32),
                      node_feat=rng.normal(size=(N, 4)).astype(np.float32))
    batch = TemporalSampler(g, fanouts=[3, 2], seed=seed).sample(np.arange(10),
                                                                  np.full(10, 90.0))
    return g, batch


def model(**kw):
    torch.manual_seed(0)
    return TBDFSModel(**{**FULL, **kw}).eval()


def one_deprecation(record, old, new):
    """The single warning of ``record`` names ``old`` and ``new`` and points at this file."""
    assert len(record) == 1, [str(w.message) for w in record]
    w = record[0]
    assert w.category is DeprecationWarning
    assert repr(old) in str(w.message) and repr(new) in str(w.message)
    assert w.filename == __file__


# ---------------------------------------------------------------- helper, in isolation
def test_renamed_kwargs_helper():
    @renamed_kwargs({"a_feats": "a_dim", "b_feats": "b_dim"}, old="new")
    def f(a_dim=0, new=1):
        return a_dim, new

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert f(2, 3) == (2, 3) and f(a_dim=2, new=3) == (2, 3)  # new names: silent
    with pytest.warns(DeprecationWarning) as rec:
        assert f(a_feats=5) == (5, 1)
    one_deprecation(rec, "a_feats", "a_dim")
    with pytest.raises(TypeError, match="both 'new' and its deprecated name 'old'"):
        f(old=1, new=2)
    # b_feats -> b_dim is not one of f's parameters: not a rename of f.
    with pytest.raises(TypeError, match="b_feats"):
        f(b_feats=1)


def test_deprecated_alias_helper():
    class A:
        old = deprecated_alias("new")

        def __init__(self):
            self.new = 1

    a = A()
    with pytest.warns(DeprecationWarning) as rec:
        assert a.old == 1
    one_deprecation(rec, "old", "new")
    with pytest.warns(DeprecationWarning):
        a.old = 2
    assert a.new == 2


# ---------------------------------------------------------------- model
def test_model_old_argument_names_warn_and_build_the_same_model():
    new = model(within_path_agg="mean", across_paths_agg="attn")
    with pytest.warns(DeprecationWarning) as rec:
        torch.manual_seed(0)
        old = TBDFSModel(**FULL, path_agg="mean").eval()
    one_deprecation(rec, "path_agg", "within_path_agg")
    assert old.within_path_agg == "mean" and old.across_paths_agg == "attn"
    for (k, a), (k2, b) in zip(new.state_dict().items(), old.state_dict().items()):
        assert k == k2 and torch.equal(a, b)
    with pytest.raises(TypeError, match="within_path_agg"):
        TBDFSModel(**FULL, path_agg="mean", within_path_agg="attn")
    with pytest.raises(ValueError, match="across_paths_agg must be one of"):
        TBDFSModel(**FULL, across_paths_agg="sum")
    with pytest.warns(DeprecationWarning) as rec:
        assert new.path_agg == "mean"
    one_deprecation(rec, "path_agg", "within_path_agg")
    with pytest.warns(DeprecationWarning) as rec:
        assert new.paths_agg == "attn"
    one_deprecation(rec, "paths_agg", "across_paths_agg")


@pytest.mark.parametrize("method", ["forward", "bfs"])
def test_model_forward_old_feature_names(method):
    g, batch = graph_and_batch()
    m = model()
    call = m if method == "forward" else m.bfs
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")
        ref = call(batch, node_feat=g.node_feat, edge_feat=g.edge_feat)
    with torch.no_grad(), pytest.warns(DeprecationWarning) as rec:
        out = call(batch, g.node_feat, edge_feats=g.edge_feat)
    # Attributed to this line, through nn.Module.__call__ for forward.
    one_deprecation(rec, "edge_feats", "edge_feat")
    for a, b in zip(ref if method == "bfs" else [ref], out if method == "bfs" else [out]):
        assert torch.equal(a, b)
    with pytest.raises(TypeError, match="both 'node_feat'"):
        call(batch, node_feat=g.node_feat, node_feats=g.node_feat)


def test_state_dict_keys_of_release_0_1():
    # release 0.1's form (the defaults changed since)
    m = model(time_encoding="cos_sin", attn_norm=False)
    assert [(k, list(v.shape)) for k, v in m.state_dict().items()] == RELEASE_0_1_STATE
    # A state dict of release 0.1 (these keys, any values) loads strictly, and the scorer
    # reads its score_fc1/score_fc2 entries.
    gen = torch.Generator().manual_seed(3)
    state = {k: torch.randn(s, generator=gen) for k, s in RELEASE_0_1_STATE}
    fresh = model(time_encoding="cos_sin", attn_norm=False)
    fresh.load_state_dict(state, strict=True)
    h_src, h_dst = torch.randn(5, 8, generator=gen), torch.randn(5, 8, generator=gen)
    hidden = torch.relu(torch.cat([h_src, h_dst], -1) @ state["score_fc1.weight"].t()
                        + state["score_fc1.bias"])
    expect = (hidden @ state["score_fc2.weight"].t() + state["score_fc2.bias"]).squeeze(-1)
    assert torch.allclose(fresh.score(h_src, h_dst), expect, atol=1e-6)


def test_release_0_1_checkpoint_loads_silently_with_the_same_embeddings(tmp_path):
    g, batch = graph_and_batch()
    # Saved as release 0.1 saved it: the old argument names in model_kwargs.
    old_kwargs = {**FULL, "path_agg": "mean", "paths_agg": "attn"}
    torch.manual_seed(1)
    with pytest.warns(DeprecationWarning):
        saved = TBDFSModel(**old_kwargs).eval()
    save_checkpoint(str(tmp_path / "old.pt"), saved, old_kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded, _ = load_checkpoint(str(tmp_path / "old.pt"))
    loaded.eval()
    assert loaded.within_path_agg == "mean"
    with torch.no_grad():
        h, h_ref = loaded(batch, g.node_feat, g.edge_feat), saved(batch, g.node_feat,
                                                                 g.edge_feat)
        assert torch.equal(h, h_ref)
        assert torch.equal(loaded.score(h[:5], h[5:]), saved.score(h[:5], h[5:]))


# ---------------------------------------------------------------- layers
@pytest.mark.parametrize("cls,old,new", [
    (TemporalAttentionConv, dict(in_feats=6, out_feats=8, edge_feats=3, time_feats=4),
     dict(in_dim=6, out_dim=8, edge_dim=3, time_dim=4)),
    (PathEncoder, dict(in_feats=6, out_feats=8, edge_feats=3, time_feats=4, path_agg="mean"),
     dict(in_dim=6, out_dim=8, edge_dim=3, time_dim=4, within_path_agg="mean")),
    (PathAggregator, dict(in_feats=6, out_feats=8, query_feats=4, paths_agg="mean"),
     dict(in_dim=6, out_dim=8, query_dim=4, across_paths_agg="mean")),
])
def test_layer_old_argument_names(cls, old, new):
    torch.manual_seed(0)
    ref = cls(**new)
    torch.manual_seed(0)
    with pytest.warns(DeprecationWarning) as rec:
        layer = cls(**old)
    assert len(rec) == len(old)
    assert all(w.filename == __file__ for w in rec)
    assert repr(layer) == repr(ref)
    for (k, a), (k2, b) in zip(ref.state_dict().items(), layer.state_dict().items()):
        assert k == k2 and torch.equal(a, b)
    first_old, first_new = next(iter(old)), next(iter(new))
    with pytest.raises(TypeError, match=f"both '{first_new}'"):
        cls(**new, **{first_old: old[first_old]})


# ---------------------------------------------------------------- graph and dataset
def test_graph_old_feature_names():
    ef, nf = np.ones((3, 2), np.float32), np.ones((4, 5), np.float32)
    with pytest.warns(DeprecationWarning) as rec:
        g = TemporalGraph([0, 1, 2], [1, 2, 3], [1.0, 2.0, 3.0], edge_feats=ef)
    one_deprecation(rec, "edge_feats", "edge_feat")
    assert g.edge_feat.shape == (3, 2)
    with pytest.warns(DeprecationWarning) as rec:
        assert g.edge_feats is g.edge_feat
    one_deprecation(rec, "edge_feats", "edge_feat")
    with pytest.warns(DeprecationWarning):
        g.node_feats = nf
    assert g.node_feat.shape == (4, 5)
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="node_feat has 2"):
        g.node_feats = nf[:2]  # checked as the new name is
    with pytest.raises(TypeError, match="both 'edge_feat'"):
        TemporalGraph([0], [1], [1.0], edge_feat=ef[:1], edge_feats=ef[:1])


def test_graph_pickles_of_release_0_1_load():
    g = TemporalGraph([0, 1, 2], [1, 2, 3], [1.0, 2.0, 3.0],
                      edge_feat=np.arange(6, dtype=np.float32).reshape(3, 2))
    state = g.__getstate__()
    state["edge_feats"], state["node_feats"] = state.pop("edge_feat"), state.pop("node_feat")
    back = TemporalGraph.__new__(TemporalGraph)
    back.__setstate__(state)
    assert torch.equal(back.edge_feat, g.edge_feat) and back.node_feat is None


def test_dataset_width_names():
    ds = TemporalDataset(name="t", src=[0, 1], dst=[1, 2], ts=[1, 2], num_nodes=3,
                         edge_feat=np.ones((2, 3)))
    assert (ds.edge_dim, ds.node_dim) == (3, 0)
    with pytest.warns(DeprecationWarning) as rec:
        assert ds.edge_feat_dim == 3
    one_deprecation(rec, "edge_feat_dim", "edge_dim")
    with pytest.warns(DeprecationWarning), pytest.raises(AttributeError):
        ds.node_feat_dim = 2  # a width is read-only, under either name


# ---------------------------------------------------------------- link scorer
def test_link_scorer_module():
    torch.manual_seed(0)
    scorer = LinkScorer(8, hidden_dim=5)
    assert [k for k in scorer.state_dict()] == ["fc1.weight", "fc1.bias", "fc2.weight",
                                                "fc2.bias"]
    assert scorer.fc1.weight.shape == (5, 16) and scorer.fc2.weight.shape == (1, 5)
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    hidden = torch.relu(scorer.fc1(torch.cat([a, b], -1)))
    assert torch.equal(scorer(a, b), scorer.fc2(hidden).squeeze(-1))
    scorer.fc1.bias.data.fill_(1.0)
    scorer.reset_parameters()
    assert torch.count_nonzero(scorer.fc1.bias) == 0
    with pytest.raises(ValueError, match="in_dim"):
        LinkScorer(0)
    with pytest.raises(ValueError, match="fc2"):
        LinkScorer.from_layers(torch.nn.Linear(16, 8), torch.nn.Linear(8, 2))


def test_model_scores_with_its_link_scorer():
    m = model()
    assert isinstance(m.link_scorer, LinkScorer)
    assert m.link_scorer.fc1 is m.score_fc1 and m.link_scorer.fc2 is m.score_fc2
    # Not registered twice: its layers appear once, under the release-0.1 names.
    assert not any("link_scorer" in k for k in m.state_dict())
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    assert torch.equal(m.score(a, b), m.link_scorer(a, b))
    copy = __import__("copy").deepcopy(m)
    assert copy.link_scorer.fc1 is copy.score_fc1
    copy.score_fc1.weight.data.zero_()
    assert torch.equal(copy.score(a, b), copy.link_scorer(a, b))
    assert not torch.equal(copy.score(a, b), m.score(a, b))


# ---------------------------------------------------------------- command line
def test_deprecated_flag_helper():
    p = argparse.ArgumentParser()
    p.add_argument("--new-flag", dest="new_flag", default="a", choices=["a", "b"])
    add_deprecated_flag(p, "--old-flag", "--new-flag", "new_flag", choices=["a", "b"])
    assert "--old-flag" not in p.format_help()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert p.parse_args([]).new_flag == "a"
        assert p.parse_args(["--new-flag", "b"]).new_flag == "b"
    with pytest.warns(DeprecationWarning, match="--old-flag is deprecated, use --new-flag"):
        assert p.parse_args(["--old-flag", "b"]).new_flag == "b"


def test_train_wikipedia_aggregation_flags():
    spec = importlib.util.spec_from_file_location(
        "train_wikipedia_for_tests", ROOT / "examples" / "train_wikipedia.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    args = script.parse_args(["--within-path-agg", "mean"])
    assert (args.within_path_agg, args.across_paths_agg) == ("mean", "attn")
    with pytest.warns(DeprecationWarning, match="--paths-agg is deprecated"):
        args = script.parse_args(["--paths-agg", "mean"])
    assert (args.within_path_agg, args.across_paths_agg) == ("attn", "mean")
    ds = TemporalDataset(name="t", src=[0, 1], dst=[1, 2], ts=[1, 2], num_nodes=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kw = script.model_kwargs(args, ds, 0.5)
        TBDFSModel(**kw)
    assert kw["across_paths_agg"] == "mean" and "paths_agg" not in kw


def test_train_wikipedia_attention_form_flags():
    spec = importlib.util.spec_from_file_location(
        "train_wikipedia_for_tests", ROOT / "examples" / "train_wikipedia.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    ds = TemporalDataset(name="t", src=[0, 1], dst=[1, 2], ts=[1, 2], num_nodes=3)
    # Not given: the model's defaults, not a value the script fixes.
    kw = script.model_kwargs(script.parse_args([]), ds, 1.0)
    assert "attn_dim" not in kw and "attn_norm" not in kw
    kw = script.model_kwargs(script.parse_args(["--attn-norm", "--attn-dim", "200",
                                                "--attn-init", "torch"]), ds, 1.0)
    assert (kw["attn_dim"], kw["attn_norm"], kw["attn_init"]) == (200, True, "torch")
    model = TBDFSModel(**kw)
    assert (model.attn_dim, model.attn_norm, model.attn_init) == (200, True, "torch")
    assert model.layers[0].fc_o is not None
    kw = script.model_kwargs(script.parse_args(["--no-attn-norm"]), ds, 1.0)
    assert kw["attn_norm"] is False
    assert "attn_residual" not in script.model_kwargs(script.parse_args([]), ds, 1.0)
    kw = script.model_kwargs(script.parse_args(["--attn-residual"]), ds, 1.0)
    assert kw["attn_residual"] is True and TBDFSModel(**kw).attn_residual
