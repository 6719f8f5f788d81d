"""DGL GraphBolt's temporal sampler on the benchmark's graph: measurement (d)."""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .log import log
from .workload import integer_times

#: What GraphBolt's temporal sampling does, printed under the table and kept in the JSON.
SEMANTICS = (
    "temporal_sample_neighbors keeps an edge when its time is strictly before "
    "the seed's time (t_e < t, like tbdfs' default time_rule='strict') and "
    "samples uniformly without replacement (no most-recent strategy), so it is "
    "compared in the uniform rows. It takes int64 times only (float times are "
    "mapped to their order-preserving rank). 'Per hop' calls it once per layer "
    "and gives each sampled neighbour its edge's time, the same tree semantics "
    "as tbdfs (no paths, no DGL blocks: compare with (a) paths=False). "
    "'As shipped' is TemporalNeighborSampler.sample_subgraphs, which gives each "
    "sampled neighbour its destination's time (compact_csc_format broadcasts "
    "it), so every hop only has to precede the root's time, not the previous "
    "edge: a looser rule that admits more edges, and it also compacts.")


class GraphBoltRunner:
    """DGL GraphBolt's temporal neighbour sampling on the same graph and batches."""

    def __init__(self, w: Dict[str, Any], directed: bool, int_ts: np.ndarray) -> None:
        import torch
        import dgl.graphbolt as gb

        self.gb, self.torch = gb, torch
        src, dst, N, E = w["src"], w["dst"], w["num_nodes"], w["num_edges"]
        t0 = time.perf_counter()
        if directed:  # a node sees the sources of its in-edges
            col, row, eid = dst, src, np.arange(E, dtype=np.int64)
        else:  # both endpoints see the interaction; a self-loop once (as tbdfs does)
            back = np.flatnonzero(src != dst)
            col = np.concatenate([dst, src[back]])
            row = np.concatenate([src, dst[back]])
            eid = np.concatenate([np.arange(E, dtype=np.int64), back])
        # CSC by destination; GraphBolt filters each neighbour list by time itself, so the
        # order inside a list does not matter (a stable sort keeps input-row order).
        order = np.argsort(col, kind="stable")
        indptr = np.zeros(N + 1, np.int64)
        np.cumsum(np.bincount(col, minlength=N), out=indptr[1:])
        eid_sorted = eid[order]
        self.ts_by_row = torch.from_numpy(int_ts)
        attrs = {"ts": torch.from_numpy(int_ts[eid_sorted]),
                 gb.ORIGINAL_EDGE_ID: torch.from_numpy(eid_sorted)}
        self.graph = gb.fused_csc_sampling_graph(torch.from_numpy(indptr),
                                                 torch.from_numpy(row[order]),
                                                 edge_attributes=attrs)
        self.build_s = time.perf_counter() - t0
        self.nbytes = int(indptr.nbytes + 8 * len(order) * 3)
        del col, row, eid, order

    def per_hop(self, fanouts: Sequence[int]) -> Callable[[Any, Any], Tuple[int, Any]]:
        """Hop by hop, each sampled neighbour at the time of its edge (tbdfs semantics)."""
        torch, g, ts_by_row = self.torch, self.graph, self.ts_by_row
        fans = [torch.LongTensor([k]) for k in reversed(list(fanouts))]

        def run(nodes: Any, times: Any) -> Tuple[int, Any]:
            m = 0
            first = None
            for f in fans:
                sg = g.temporal_sample_neighbors(nodes, times, f,
                                                 edge_timestamp_attr_name="ts")
                nbr, eids = sg.sampled_csc.indices, sg.original_edge_ids
                if first is None:
                    first = sg.sampled_csc.indptr
                m += len(nbr)
                nodes = torch.cat([nodes, nbr])
                times = torch.cat([times, ts_by_row[eids]])
            return m, first

        return run

    def shipped(self, fanouts: Sequence[int]) -> Callable[[Any, Any], Tuple[int, Any]]:
        """``TemporalNeighborSampler.sample_subgraphs`` exactly as DGL 2.1.0 ships it."""
        import types
        from dgl.graphbolt.impl.temporal_neighbor_sampler import TemporalNeighborSampler

        torch, g = self.torch, self.graph
        fans: List[Any] = []
        for k in fanouts:  # the constructor's own conversion (outermost first -> reversed)
            fans.insert(0, torch.LongTensor([int(k)]))
        state = types.SimpleNamespace(graph=g, fanouts=fans, replace=False, prob_name=None,
                                      node_timestamp_attr_name=None,
                                      edge_timestamp_attr_name="ts",
                                      sampler=g.temporal_sample_neighbors)

        def run(nodes: Any, times: Any) -> Tuple[int, Any]:
            _, subgraphs = TemporalNeighborSampler.sample_subgraphs(state, nodes, times)
            return sum(len(s.sampled_csc.indices) for s in subgraphs), None

        return run



def build_graphbolt(w: Dict[str, Any], directed: bool
                    ) -> Tuple[Optional[GraphBoltRunner], Optional[str], Dict[str, Any]]:
    """GraphBolt's graph for workload ``w`` (sets ``w["int_ts"]``), or why it failed.

    Returns
    -------
    runner, error, info
        The runner (``None`` on failure), the error text (``None`` on success) and the
        figures the report shows (build time and bytes, or the error).
    """
    try:
        w["int_ts"] = integer_times(w["ts"])
        log("building the GraphBolt graph")
        gbr = GraphBoltRunner(w, directed, w["int_ts"])
        return gbr, None, {"build_s": gbr.build_s, "nbytes": gbr.nbytes, "semantics": SEMANTICS}
    except Exception as err:  # noqa: BLE001 - report, don't crash the benchmark
        gb_error = f"{type(err).__name__}: {err}"
        log(f"GraphBolt failed: {gb_error}")
        return None, gb_error, {"error": f"failed: {gb_error}"}
