"""Online scoring: ingest interactions as they arrive and score candidate links at once.

Torch only (no DGL): the graph grows in place (:meth:`TemporalGraph.add_edges`) and the
sampler, which reads the graph on every call, sees each ingested event on the next query.
"""
from __future__ import annotations

import time
from typing import Any, Optional

import numpy as np
import torch

from ._validate import index_array, time_array
from .graph import TemporalGraph
from .sampler import TemporalSampler

__all__ = ["OnlineScorer"]


class OnlineScorer:
    """Ingest chunks of events and score candidate links ``(u, v, t)`` as they come.

    A query at time ``t`` sees the interactions ingested so far that its sampler's time
    rule admits (strict: those before ``t``), so scoring an event before ingesting it, or
    after ingesting it with a strict sampler, scores it from its past only.

    Parameters
    ----------
    model : TBDFSModel
        A trained model (anything with ``forward(batch, node_feat, edge_feat)`` and
        ``score(h_src, h_dst)``); used in eval mode, without gradients.
    graph : TemporalGraph
        The interactions so far; grows in place with :meth:`ingest`.
    sampler : TemporalSampler
        A sampler of ``graph``.
    batch_size : int, optional
        Queries per model call (each query is two roots).  Default: 200.
    device : str or torch.device, optional
        Where the model runs; default: the device of its parameters.  Batches are sampled
        on the CPU and moved there.
    node_feat : torch.Tensor, optional
        Node features for the model; default: ``graph.node_feat`` (read at each query, so
        rows of nodes added by :meth:`ingest` are there).

    Notes
    -----
    Edge features are always the graph's own (``graph.edge_feat``), which :meth:`ingest`
    extends, so interaction ``i`` of the graph is row ``i`` of the features.  Each model
    call draws its sampler stream from a counter (``batch_id``), so a replay is repeatable.
    """

    def __init__(self, model: torch.nn.Module, graph: TemporalGraph, sampler: TemporalSampler,
                 batch_size: int = 200, device: Optional[Any] = None,
                 node_feat: Optional[torch.Tensor] = None) -> None:
        if not isinstance(graph, TemporalGraph):
            raise TypeError(f"graph must be a TemporalGraph, got {type(graph).__name__}")
        if sampler.graph is not graph:
            raise ValueError("the sampler must sample from the scorer's graph (it would not "
                             "see ingested events otherwise)")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        self.model = model
        self.graph = graph
        self.sampler = sampler
        self.batch_size = batch_size
        if device is None:
            param = next(model.parameters(), None)
            device = param.device if param is not None else "cpu"
        self.device = torch.device(device)
        self._node_feat = node_feat
        self._batch_id = 0
        self.events_ingested = 0
        self.ingest_seconds = 0.0

    @property
    def current_time(self) -> float:
        """Latest ingested interaction time (``-inf`` before any)."""
        return self.graph.time_range[1] if self.graph.num_edges else float("-inf")

    def ingest(self, src: Any, dst: Any, ts: Any, edge_feat: Any = None) -> None:
        """Add a chunk of events (see :meth:`TemporalGraph.add_edges`)."""
        t0 = time.perf_counter()
        self.graph.add_edges(src, dst, ts, edge_feat)
        self.ingest_seconds += time.perf_counter() - t0
        self.events_ingested += int(np.size(ts))

    def _features(self, t: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
        if t is None:
            return None
        return t if t.device == self.device else t.to(self.device)

    @torch.no_grad()
    def score(self, src: Any, dst: Any, ts: Any = None, probability: bool = False) -> np.ndarray:
        """Score candidate links.

        Parameters
        ----------
        src, dst : array-like of int
            Endpoints of each candidate (graph ids).
        ts : float or array-like, optional
            Query time of each candidate (one for all); default: :attr:`current_time`.
        probability : bool, optional
            Return ``sigmoid(logit)`` instead of the logits.  Default: ``False``.

        Returns
        -------
        numpy.ndarray
            float32 ``[n]`` scores.
        """
        src_a = index_array(np.atleast_1d(src), "src", upper=self.graph.num_nodes)
        dst_a = index_array(np.atleast_1d(dst), "dst", upper=self.graph.num_nodes)
        if len(src_a) != len(dst_a):
            raise ValueError(f"src and dst must have the same length, got {len(src_a)} and "
                             f"{len(dst_a)}")
        if ts is None:
            ts = self.current_time
            if not np.isfinite(ts):
                raise ValueError("no event ingested yet: pass the query times ts")
        ts_a = time_array(np.broadcast_to(np.asarray(ts, dtype=np.float64)
                                          if not isinstance(ts, torch.Tensor) else ts.numpy(),
                                          src_a.shape), "ts")
        was_training = self.model.training
        self.model.eval()
        try:
            out = [self._score_batch(src_a[i:i + self.batch_size], dst_a[i:i + self.batch_size],
                                     ts_a[i:i + self.batch_size])
                   for i in range(0, len(src_a), self.batch_size)]
        finally:
            self.model.train(was_training)
        logits = np.concatenate(out) if out else np.zeros(0, np.float32)
        return 1.0 / (1.0 + np.exp(-logits)) if probability else logits

    def _score_batch(self, src: np.ndarray, dst: np.ndarray, ts: np.ndarray) -> np.ndarray:
        n = len(src)
        batch = self.sampler.sample(np.concatenate([src, dst]), np.concatenate([ts, ts]),
                                    batch_id=self._batch_id, paths=False)
        self._batch_id += 1
        if self.device.type != "cpu":
            batch = batch.to(self.device)
        node_feat = self._node_feat if self._node_feat is not None else self.graph.node_feat
        h = self.model(batch, self._features(node_feat), self._features(self.graph.edge_feat))
        return self.model.score(h[:n], h[n:]).float().cpu().numpy()
