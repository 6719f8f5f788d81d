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


# ------------------------------------------------------------------ random streams
_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def mix64(z: int) -> int:
    """SplitMix64's finaliser, as csrc/rng.h."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


class InstanceRng:
    """The sampler's per-(seed, stream, hop, destination) random stream (csrc/rng.h)."""

    def __init__(self, seed: int, stream: int, hop: int, index: int) -> None:
        self.state = mix64(mix64(mix64((seed + _GOLDEN) & _M64) ^ stream)
                           ^ (((hop << 56) & _M64) ^ index))

    def below(self, n: int) -> int:
        self.state = (self.state + _GOLDEN) & _M64
        return (mix64(self.state) * n) >> 64


# ------------------------------------------------------------------ strategies
# As csrc/strategy.h: the time rule has narrowed a destination's list to its eligible
# window (``eligible``), offsets [0, n) of the time-sorted entries; each strategy's chooser
# picks ascending offsets inside it, drawing from the destination's own stream.

def take_window(first: int, n: int) -> List[int]:
    """Every offset of the window [first, n)."""
    return list(range(first, n))


def recent_offsets(n: int, k: int, rng: Optional[InstanceRng] = None) -> List[int]:
    """The window narrowed to its last k entries, all taken (no randomness)."""
    return take_window(max(0, n - k), n)


def uniform_offsets(n: int, k: int, rng: InstanceRng) -> List[int]:
    """k distinct offsets by Floyd's algorithm (a plain set here); all when n <= k."""
    if n <= k:
        return take_window(0, n)
    chosen: List[int] = []
    seen = set()
    for j in range(n - k, n):
        t = rng.below(j + 1)
        v = j if t in seen else t
        seen.add(v)
        chosen.append(v)
    return sorted(chosen)


def uniform_replace_offsets(n: int, k: int, rng: InstanceRng) -> List[int]:
    """k independent draws, sorted; none from an empty window."""
    if n == 0:
        return []
    return sorted(rng.below(n) for _ in range(k))


# Keyed by the lower-case names of tbdfs_dgl.Strategy's members.
CHOOSERS: Dict[str, Callable[[int, int, Optional[InstanceRng]], List[int]]] = {
    "recent": recent_offsets,
    "uniform": uniform_offsets,
    "uniform_replace": uniform_replace_offsets,
}


def chooser(strategy: str, seed: int = 0, stream: int = 0):
    """A ``choose_at`` for :func:`sample_tree` drawing exactly what the C++ sampler draws
    with this strategy (a key of ``CHOOSERS``) for (seed, stream)."""
    offsets = CHOOSERS[strategy]

    def choose_at(entries: List[Entry], k: int, hop: int, index: int) -> List[Entry]:
        window = sorted(entries)
        return [window[o] for o in offsets(len(window), k, InstanceRng(seed, stream, hop, index))]
    return choose_at


def most_recent(entries: List[Entry], k: int) -> List[Entry]:
    """The k latest entries (ties: larger row first), in (time, row) order."""
    window = sorted(entries)
    return [window[o] for o in recent_offsets(len(window), k)]


def uniform_chooser(seed: int, stream: int, replace: bool):
    """The ``choose_at`` of uniform sampling, with or without replacement."""
    return chooser("uniform_replace" if replace else "uniform", seed, stream)


def sample_tree(adj, nodes: Sequence[int], times: Sequence[float], fanouts: Sequence[int],
                strict: bool = True,
                choose: Callable[[List[Entry], int], List[Entry]] = most_recent,
                choose_at: Optional[Callable[[List[Entry], int, int, int], List[Entry]]] = None
                ) -> List[Dict]:
    """Hops from the roots outwards, each a dict of plain lists like the C++ output.

    ``choose_at(entries, k, hop, destination index)``, when given, replaces ``choose``
    (random strategies need to know which stream they draw from)."""
    L = len(fanouts)
    dst = [(int(u), float(t)) for u, t in zip(nodes, times)]
    hops = []
    for h in range(L):
        k = fanouts[L - 1 - h]
        src = list(dst)
        indptr, eids, dts = [0], [], []
        for d_index, (u, t) in enumerate(dst):
            window = eligible(adj, u, t, strict)  # the time rule narrows the list once
            picked = choose_at(window, k, h, d_index) if choose_at else choose(window, k)
            for te, r, v in picked:
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


# ------------------------------------------------------------------ time encoding
def _two_over_pi(bits: int) -> int:
    """floor(2/pi * 2**bits), from Machin's formula in integers."""
    prec = bits + 64

    def arctan_inv(x: int) -> int:
        total = term = (1 << prec) // x
        n, sign = 1, -1
        while term:
            term //= x * x
            n += 2
            total += sign * (term // n)
            sign = -sign
        return total

    pi = 4 * (4 * arctan_inv(5) - arctan_inv(239))
    return (2 << (prec + bits)) // pi


_TOP_BITS = 1500
_TOP = None


def exact_cos_sin(w: float, dt: float) -> Tuple[float, float]:
    """cos and sin of the exact product w * dt (rational arithmetic; float64 result)."""
    import math
    from fractions import Fraction

    global _TOP
    if _TOP is None:
        _TOP = _two_over_pi(_TOP_BITS)
    t = Fraction(w) * Fraction(dt) * Fraction(_TOP, 1 << _TOP_BITS)  # phase / (pi/2)
    q = round(t)
    y = float(t - q) * (math.pi / 2)
    c, s = math.cos(y), math.sin(y)
    return [(c, s), (-s, c), (-c, -s), (s, -c)][q % 4]
