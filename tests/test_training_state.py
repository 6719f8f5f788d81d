"""Resumable training (TrainConfig.resume_path): a stopped run goes on as if it had not."""
import io
import os

import pytest
import torch

from tbdfs_dgl import TBDFSModel
from tbdfs_dgl.data import make_wikipedia_like
from tbdfs_dgl.linkpred import LinkPredictionTrainer, TrainConfig
from tbdfs_dgl.linkpred.checkpoints import write_checked


@pytest.fixture(scope="module")
def small():
    return make_wikipedia_like(num_users=300, num_pages=60, num_events=4000, seed=2)


class _Killed(Exception):
    """Stands for the process being killed during an epoch."""


class _KilledAt(LinkPredictionTrainer):
    """Dies when it starts epoch ``kill_at`` (after the previous epoch's state was saved)."""

    kill_at = None
    trained = None

    def train_epoch(self, epoch):
        if epoch == self.kill_at:
            raise _Killed(epoch)
        type(self).trained.append(epoch)
        return super().train_epoch(epoch)


def _fit(data, path, kill_at=None, init_seed=0, epochs=4, **cfg_kw):
    torch.manual_seed(init_seed)
    kwargs = dict(node_dim=0, edge_dim=0, time_dim=8, hidden_dim=16, num_heads=2,
                  dropout=0.2, alpha=0.5, num_nodes=data.num_nodes, node_embedding_dim=8)
    model = TBDFSModel(**kwargs)
    cfg = dict(epochs=epochs, batch_size=200, lr=3e-3, fanouts=(4, 4), seed=5, patience=5,
               progress=False, resume_path=None if path is None else str(path))
    cfg.update(cfg_kw)
    _KilledAt.kill_at, _KilledAt.trained = kill_at, []
    trainer = _KilledAt(model, data, TrainConfig(**cfg), model_kwargs=kwargs,
                        log=lambda s: None)
    try:
        return trainer.fit()
    finally:
        trainer.close()


def _same_run(a, b):
    assert [h.loss for h in a.history] == [h.loss for h in b.history]
    assert [h.val for h in a.history] == [h.val for h in b.history]
    assert (a.best_epoch, a.best_val_ap) == (b.best_epoch, b.best_val_ap)
    assert a.test == b.test and a.val == b.val


# 'uniform' is the `full` budget's sampler: its trees come from the sampler's seeded
# per-batch streams, which a resumed run must draw again exactly.
@pytest.mark.parametrize("strategy", ["recent", "uniform"])
def test_a_resumed_run_is_the_run_that_did_not_stop(small, tmp_path, strategy):
    straight = _fit(small, None, strategy=strategy)
    path = tmp_path / "state" / "run.state"
    with pytest.raises(_Killed):
        _fit(small, path, kill_at=2, strategy=strategy)
    assert path.exists()
    # Another initialisation (its weights are replaced) and no prefetching thread (a
    # setting outside the run's identity): the resumed run is still the same run.
    resumed = _fit(small, path, init_seed=99, prefetch=False, strategy=strategy)
    assert _KilledAt.trained == [2, 3], "the resumed fit trained again what was done"
    _same_run(straight, resumed)
    assert resumed.resumed_at_epoch == 2 and resumed.earlier_seconds > 0
    assert straight.resumed_at_epoch is None and straight.earlier_seconds == 0


def test_a_finished_state_only_tests_again(small, tmp_path):
    path = tmp_path / "run.state"
    first = _fit(small, path, epochs=2)
    again = _fit(small, path, epochs=2, init_seed=7)
    assert _KilledAt.trained == []
    _same_run(first, again)


def test_the_state_of_another_run_is_refused(small, tmp_path):
    path = tmp_path / "run.state"
    with pytest.raises(_Killed):
        _fit(small, path, kill_at=1)
    with pytest.raises(ValueError, match=r"another run \(differs in: config\.lr\).*delete it"):
        _fit(small, path, lr=1e-3)


def test_a_damaged_state_is_refused_by_name(small, tmp_path):
    path = tmp_path / "run.state"
    with pytest.raises(_Killed):
        _fit(small, path, kill_at=1)
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    with pytest.raises(ValueError, match="training state is truncated"):
        _fit(small, path)
    path.write_bytes(b"not a state")
    with pytest.raises(ValueError, match="not a training state file"):
        _fit(small, path)
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="training state file is empty"):
        _fit(small, path)
    # A state of a version with other fields, under the same format number.
    buf = io.BytesIO()
    torch.save({"format": 1, "identity": {}, "a_later_field": 1}, buf)
    write_checked(str(path), b"TBDFS-TRAINING-STATE\n", buf.getvalue())
    with pytest.raises(ValueError, match="a training state of another version.*delete it"):
        _fit(small, path)
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".ckpt")]


def test_a_distributed_run_cannot_resume(small, tmp_path, monkeypatch):
    from tbdfs_dgl.linkpred import distributed

    monkeypatch.setattr(distributed, "current_ranks", lambda: distributed.Ranks(0, 2))
    with pytest.raises(ValueError, match="resume_path is for one-process runs"):
        _fit(small, tmp_path / "run.state")
