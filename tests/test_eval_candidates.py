"""The trainer's evaluation negatives: DyGLib's strategies, one-vs-K ranking (MRR, Hits@k),
and the default (TGAT's one random negative) left exactly as it was."""
import numpy as np
import pytest
import torch

from tbdfs_dgl import TBDFSModel
from tbdfs_dgl.data import make_wikipedia_like
from tbdfs_dgl.eval_negatives import EvalNegativeSampler
from tbdfs_dgl.linkpred import (EventBatch, LinkPredictionTrainer, NegativeSampler, TrainConfig,
                                chronological_batches)
from tbdfs_dgl.linkpred import streams
from tbdfs_dgl.linkpred import EvaluationCandidates
from tbdfs_dgl.metrics import link_prediction_metrics, ranking_metrics


@pytest.fixture(scope="module")
def small():
    return make_wikipedia_like(num_users=300, num_pages=60, num_events=6000, seed=1)


def make_trainer(data, **cfg):
    torch.manual_seed(0)
    model = TBDFSModel(node_dim=0, edge_dim=0, time_dim=8, hidden_dim=8, num_heads=2,
                       num_nodes=data.num_nodes, node_embedding_dim=8)
    base = dict(batch_size=100, fanouts=(3, 3), progress=False, seed=2, test_events=500)
    base.update(cfg)
    return LinkPredictionTrainer(model, data, TrainConfig(**base), log=lambda s: None)


def _negatives(batches):
    return np.concatenate([b.neg_dst for b in batches]), np.concatenate([b.rows for b in batches])


def test_default_evaluation_negatives_are_unchanged(small):
    # The default ('random', K = 1) keeps NegativeSampler and its streams: these sums were
    # taken at the commit before evaluation negatives became configurable (aea2bd4).
    golden = {"val": (9, 296851, 133473964, 4184550), "test": (5, 164435, 40982591, 2775555)}
    default = make_trainer(small)
    explicit = make_trainer(small, eval_negatives="random", eval_candidates=1)
    try:
        assert default.config.default_eval_negatives
        for part, (n, s, ws, rs) in golden.items():
            batches = default.evaluation_batches(part)
            neg, rows = _negatives(batches)
            assert (len(batches), int(neg.sum()), int((neg * np.arange(len(neg))).sum()),
                    int(rows.sum())) == (n, s, ws, rs)
            # ... which is the old recipe, written out
            old_rows = rows
            rng = streams.generator(2, streams.PART_INDEX[part], streams.Purpose.EVAL_NEGATIVES)
            old = chronological_batches(small, old_rows, 100, NegativeSampler(small), rng)
            np.testing.assert_array_equal(neg, np.concatenate([b.neg_dst for b in old]))
            assert all(b.neg_dst.ndim == 1 for b in batches)
        m = default.evaluate("test")
        assert m == explicit.evaluate("test")
        assert set(m["transductive"]) == {"count", "accuracy", "f1", "ap", "auc"}
    finally:
        default.close()
        explicit.close()


@pytest.mark.parametrize("strategy", ["random", "historical", "inductive"])
def test_candidates_are_the_samplers_for_each_interactions_whole_part_batch(small, strategy):
    k = 6
    trainer = make_trainer(small, eval_negatives=strategy, eval_candidates=k)
    try:
        batches = trainer.evaluation_batches("test")
        neg, rows = _negatives(batches)
        default_rows = _negatives(make_trainer(small).evaluation_batches("test"))[1]
        np.testing.assert_array_equal(rows, default_rows)  # the same interactions
        assert neg.shape == (500, k) and neg.dtype == np.int64
        # chunks: a forward pass embeds at most 3 * batch_size roots
        assert max(b.num_events for b in batches) == 3 * 100 // (k + 2)
        assert all(b.num_candidates == k and b.num_events * (k + 2) <= 300 for b in batches)
        # each drawn interaction gets what the sampler gives it in its chronological batch
        # of the whole part (so a subset scores a subsample of the full evaluation)
        sampler = EvalNegativeSampler.for_split(small, trainer.split, "test", strategy,
                                                num_candidates=k, same_source=True, seed=2)
        part = np.flatnonzero(trainer.split.test)
        for i in (0, 137, 499):
            at = int(np.searchsorted(part, rows[i]))
            lo = at - at % 100
            full = sampler.sample(part[lo:lo + 100]).dst
            np.testing.assert_array_equal(neg[i], full[at - lo])
        if strategy != "random":  # never the positive's own destination in its batch
            assert not (neg == small.dst[rows][:, None]).any()
    finally:
        trainer.close()


def test_candidates_refuse_rows_outside_the_part(small):
    trainer = make_trainer(small)
    cands = EvaluationCandidates(small, trainer.split, "val", "historical", 2, 100, 0)
    with pytest.raises(ValueError, match="not in the evaluated part"):
        cands(np.flatnonzero(trainer.split.test)[:3])
    trainer.close()


def test_k_candidates_score_as_one_negative_batches_and_rank(small):
    k = 4
    trainer = make_trainer(small, eval_negatives="historical", eval_candidates=k,
                           prefetch=False)
    try:
        trainer.model.eval()
        batches = trainer.evaluation_batches("test")[:3]
        with torch.no_grad():
            for i, item in enumerate(batches):
                n = item.num_events
                batch, _, _ = trainer._sample(trainer.eval_sampler, item, 10 + i, False)
                pos, neg = trainer._embed(batch, n, k)
                neg = neg.reshape(n, k)
                for j in range(k):  # the same scores as K one-negative batches
                    one = item._replace(neg_dst=item.neg_dst[:, j])
                    b1, _, _ = trainer._sample(trainer.eval_sampler, one, 10 + i, False)
                    p1, n1 = trainer._embed(b1, n)
                    torch.testing.assert_close(p1, pos, rtol=1e-5, atol=1e-6)
                    torch.testing.assert_close(n1, neg[:, j], rtol=1e-5, atol=1e-6)
        m = trainer.evaluate("test")
        for setting in ("transductive", "inductive"):
            got = m[setting]
            assert got["candidates"] == k and got["count"] > 0
            assert 1 / (k + 1) <= got["mrr"] <= 1
            assert got["hits@1"] <= got["hits@3"] <= got["hits@10"] == 1.0  # K + 1 <= 10
        # AP & co. against the first candidate, ranking against all of them
        pos_all, neg_all = [], []
        with torch.no_grad():
            for i, item in enumerate(trainer.evaluation_batches("test")):
                batch, _, _ = trainer._sample(trainer.eval_sampler, item,
                                           streams.first_batch_id("test") + i, False)
                p, q = trainer._embed(batch, item.num_events, k)
                pos_all.append(p.numpy())
                neg_all.append(q.numpy().reshape(-1, k))
        pos, neg = np.concatenate(pos_all), np.concatenate(neg_all)
        want = link_prediction_metrics(pos, neg[:, 0])
        want.update(ranking_metrics(pos, neg))
        assert m["transductive"] == pytest.approx(want, rel=1e-6)
    finally:
        trainer.close()


def test_empty_part_with_candidates_gives_nan_ranking(small):
    trainer = make_trainer(small, eval_negatives="inductive", eval_candidates=3)
    trainer.evaluation_batches = lambda part: []
    m = trainer.evaluate("test")
    assert np.isnan(m["inductive"]["mrr"]) and m["inductive"]["candidates"] == 3
    trainer.close()


@pytest.mark.parametrize("kw", [dict(eval_negatives="hard"), dict(eval_candidates=0),
                                dict(eval_candidates=2.0), dict(eval_candidates=True)])
def test_config_rejects_bad_evaluation_negatives(kw):
    with pytest.raises(ValueError, match=next(iter(kw))):
        TrainConfig(**kw)


def test_event_batch_candidates():
    one = EventBatch(np.zeros(3), np.zeros(3), np.zeros(3, np.int64), np.zeros(3), np.arange(3))
    assert one.num_candidates == 1
    assert one._replace(neg_dst=np.zeros((3, 5), np.int64)).num_candidates == 5
