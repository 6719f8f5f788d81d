"""Slow, obviously-correct pure-Python versions of the sampler, for the tests to compare with.

Nothing here is clever: lists of tuples, full scans, nested loops.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

Entry = Tuple[float, int, int]  # (time, input row, neighbour)


def adjacency(src, dst, ts, num_nodes: int, directed: bool) -> List[List[Entry]]:
    """Each node's temporal neighbours sorted by (time, row)."""
    adj: List[List[Entry]] = [[] for _ in range(num_nodes)]
    for r, (s, d, t) in enumerate(zip(src, dst, ts)):
        adj[int(d)].append((float(t), r, int(s)))
        if not directed and s != d:
            adj[int(s)].append((float(t), r, int(d)))
    for lst in adj:
        lst.sort()
    return adj


def eligible(adj: List[List[Entry]], u: int, t: float, strict: bool) -> List[Entry]:
    """Edges node u saw before time t."""
    return [x for x in adj[u] if (x[0] < t if strict else x[0] <= t)]


def most_recent(entries: List[Entry], k: int) -> List[Entry]:
    """The k latest entries (ties: larger row first), in (time, row) order."""
    return sorted(entries)[-k:] if k else []


def sample_tree(adj, nodes: Sequence[int], times: Sequence[float], fanouts: Sequence[int],
                strict: bool = True,
                choose: Callable[[List[Entry], int], List[Entry]] = most_recent) -> List[Dict]:
    """Hops from the roots outwards, each a dict of plain lists like the C++ output."""
    L = len(fanouts)
    dst = [(int(u), float(t)) for u, t in zip(nodes, times)]
    hops = []
    for h in range(L):
        k = fanouts[L - 1 - h]
        src = list(dst)
        indptr, eids, dts = [0], [], []
        for u, t in dst:
            for te, r, v in choose(eligible(adj, u, t, strict), k):
                src.append((v, te))
                eids.append(r)
                dts.append(t - te)
            indptr.append(len(eids))
        hops.append({"num_dst": len(dst), "src_nodes": [u for u, _ in src],
                     "src_ts": [t for _, t in src], "indptr": indptr, "eids": eids, "dt": dts})
        dst = src
    return hops


def explode_paths(hops: List[Dict], fanouts: Sequence[int]) -> Dict[str, np.ndarray]:
    """Root-to-leaf chains of a sampled tree in the documented slot layout."""
    L = len(hops)
    radix = [fanouts[L - 1 - h] for h in range(L)]  # child choices at hop h
    P = int(np.prod(radix))
    B = hops[0]["num_dst"]
    out = {
        "nodes": np.full((B, P, L), -1, np.int64),
        "eids": np.full((B, P, L), -1, np.int64),
        "ts": np.full((B, P, L), -1.0),
        "mask": np.zeros((B, P, L), bool),
        "src_index": np.full((B, P, L), -1, np.int64),
    }

    def chains(h: int, inst: int) -> List[Tuple[List[int], List[Tuple[int, int]]]]:
        """(digits, [(src position, edge position)]) of every chain below inst at hop h."""
        hop = hops[h]
        first, last = hop["indptr"][inst], hop["indptr"][inst + 1]
        if first == last:
            return [([], [])]
        result = []
        for i, e in enumerate(range(first, last)):
            s = hop["num_dst"] + e
            below = chains(h + 1, s) if h + 1 < L else [([], [])]
            for digits, steps in below:
                result.append(([i] + digits, [(s, e)] + steps))
        return result

    for b in range(B):
        for digits, steps in chains(0, b):
            if not steps:
                continue  # a root without history has no path
            digits = digits + [0] * (L - len(digits))
            p = 0
            for h in range(L):
                p = p * radix[h] + digits[h]
            for h, (s, e) in enumerate(steps):
                out["nodes"][b, p, h] = hops[h]["src_nodes"][s]
                out["ts"][b, p, h] = hops[h]["src_ts"][s]
                out["eids"][b, p, h] = hops[h]["eids"][e]
                out["src_index"][b, p, h] = s
                out["mask"][b, p, h] = True
    return out


def random_graph(rng: np.random.Generator, num_nodes: int, num_edges: int,
                 num_times: Optional[int] = None):
    """Small graph with repeated pairs, self-loops, equal times and isolated nodes."""
    active = max(1, num_nodes - 2)  # the last two nodes stay isolated
    src = rng.integers(0, active, num_edges)
    dst = rng.integers(0, active, num_edges)
    dst[: max(1, num_edges // 10)] = src[: max(1, num_edges // 10)]  # self-loops
    src[-3:], dst[-3:] = src[0], dst[0]  # repeated pair
    times = rng.integers(0, num_times or max(2, num_edges // 3), num_edges).astype(np.float64)
    return src.astype(np.int64), dst.astype(np.int64), times
