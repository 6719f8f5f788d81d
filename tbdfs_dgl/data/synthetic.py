"""Seeded synthetic temporal graphs: a Wikipedia-like benchmark with a planted temporal-path
signal, and large power-law interaction streams for sampler benchmarks."""
from __future__ import annotations

from collections import deque
from typing import Tuple

import numpy as np

from .dataset import TemporalDataset

__all__ = ["make_wikipedia_like", "make_power_law"]


def _session_times(rng: np.random.Generator, num_users: int, num_events: int,
                   time_span: int, mean_session: float, mean_gap: float
                   ) -> Tuple[np.ndarray, np.ndarray]:
    """Users and int64 times of ``num_events`` edits grouped into bursty sessions, time-sorted.

    Session owners follow a Zipf-like law over users (a few very active editors, a long tail
    of occasional ones); edits inside a session are a few minutes apart.
    """
    weights = np.arange(1, num_users + 1, dtype=np.float64) ** -0.9
    weights = rng.permutation(weights / weights.sum())  # activity rank unrelated to user id
    lengths = rng.geometric(1.0 / mean_session, size=int(num_events / mean_session * 1.5) + 16)
    while lengths.sum() < num_events:
        lengths = np.concatenate([lengths, rng.geometric(1.0 / mean_session, size=lengths.size)])
    ends = np.cumsum(lengths)
    n_sess = int(np.searchsorted(ends, num_events)) + 1
    lengths = lengths[:n_sess].copy()
    lengths[-1] -= int(ends[n_sess - 1]) - num_events
    owner = rng.choice(num_users, size=n_sess, p=weights)
    start = rng.integers(0, time_span, size=n_sess)
    session = np.repeat(np.arange(n_sess), lengths)
    gaps = np.ceil(rng.exponential(mean_gap, size=num_events)).astype(np.int64)
    gaps[np.concatenate([[0], np.cumsum(lengths)[:-1]])] = 0  # first edit at session start
    offset = np.cumsum(gaps)
    offset -= np.repeat(offset[np.concatenate([[0], np.cumsum(lengths)[:-1]])], lengths)
    ts = start[session] + offset
    order = np.argsort(ts, kind="stable")
    return owner[session][order], ts[order]


def make_wikipedia_like(num_users: int = 1000, num_pages: int = 200, num_events: int = 20000,
                        path_strength: float = 0.6, seed: int = 0, edge_feat_dim: int = 0, *,
                        repeat_prob: float = 0.3, recent: int = 8,
                        time_span: int = 30 * 86400) -> TemporalDataset:
    """Generate a bipartite users-edit-pages stream shaped like JODIE Wikipedia, with a
    planted 3-hop temporal path pattern.

    Shape: user activity is heavy-tailed (Zipf-like), edits come in sessions of a few
    edits minutes apart, users often re-edit the page they edited last, and page popularity
    is Zipf-like.

    Each edit of user ``u``, whose last edit was page ``p``, re-edits ``p`` with probability
    ``repeat_prob``.  Otherwise the planted pattern applies with probability
    ``path_strength``: the page is one a co-editor already chose after ``p``:
    among the ``recent`` users ``v != u`` who last edited ``p``, those who have since moved
    on to a different page ``q`` ("next after ``p``") form the candidates, and one is taken
    uniformly.  So the new edge ``u -> q`` closes the temporal path
    ``u -(t1)- p -(t2)- v -(t3)- q`` with ``t2 < t3``; read from the destination's side,
    ``q -(t3)- v -(t2)- p -(t1)- u`` has decreasing times whenever ``u`` edited ``p``
    before ``v`` did.  Otherwise (or when there is no candidate, or ``u`` has no previous
    edit) the page is drawn by popularity.

    Parameters
    ----------
    num_users, num_pages : int
        Nodes per side; users are ids ``[0, num_users)``, pages
        ``[num_users, num_users + num_pages)``.
    num_events : int
        Number of interactions.
    path_strength : float
        Probability in ``[0, 1]`` of following the planted pattern when it applies; 0 gives
        the same stream without the pattern.
    seed : int
        Seed; equal arguments give identical datasets.
    edge_feat_dim : int
        If positive, float32 edge features: a per-page mean plus unit noise (like text
        features of an edit, informative about the page but not about the pattern).
    repeat_prob : float
        Probability that an edit re-edits the user's last page.
    recent : int
        How many most recent editors of a page count as co-editors.
    time_span : int
        Span of session start times in seconds (default 30 days, like Wikipedia).

    Returns
    -------
    TemporalDataset
        ``synthetic=True``, bipartite, int64 seconds.
    """
    if num_users < 2 or num_pages < 2 or num_events < 1:
        raise ValueError("need num_users >= 2, num_pages >= 2 and num_events >= 1")
    for nm, v in (("path_strength", path_strength), ("repeat_prob", repeat_prob)):
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"{nm} must be in [0, 1], got {v}")
    if edge_feat_dim < 0 or recent < 1:
        raise ValueError("edge_feat_dim must be >= 0 and recent >= 1")
    rng = np.random.default_rng(seed)
    users, ts = _session_times(rng, num_users, num_events, time_span, mean_session=4.0,
                               mean_gap=180.0)
    page_w = np.arange(1, num_pages + 1, dtype=np.float64) ** -0.8
    page_w = rng.permutation(page_w / page_w.sum())
    # Draw every random number up front (vectorised); the loop below only does bookkeeping
    # that depends on history and so cannot be vectorised.
    popular = rng.choice(num_pages, size=num_events, p=page_w).tolist()
    use_path = (rng.random(num_events) < path_strength).tolist()
    repeat = (rng.random(num_events) < repeat_prob).tolist()
    pick = rng.random(num_events).tolist()

    last_page = [-1] * num_users
    editors = [deque(maxlen=recent) for _ in range(num_pages)]
    next_after = {}  # u * num_pages + p -> first different page u edited after its last p
    pages = [0] * num_events
    for k, u in enumerate(users.tolist()):
        p = last_page[u]
        q = -1
        if p >= 0:
            if repeat[k]:
                q = p
            elif use_path[k]:
                cands = [c for c in (next_after.get(v * num_pages + p) for v in editors[p]
                                     if v != u) if c is not None]
                if cands:
                    q = cands[int(pick[k] * len(cands))]
        if q < 0:
            q = popular[k]
        pages[k] = q
        if p >= 0 and q != p:
            next_after[u * num_pages + p] = q
        ed = editors[q]
        if u in ed:
            ed.remove(u)
        ed.append(u)
        last_page[u] = q

    dst = np.asarray(pages, dtype=np.int64)
    edge_feat = None
    if edge_feat_dim > 0:
        centre = rng.normal(size=(num_pages, edge_feat_dim))
        edge_feat = (centre[dst] + rng.normal(size=(num_events, edge_feat_dim))).astype(np.float32)
    return TemporalDataset(
        name="wikipedia-like", src=users.astype(np.int64), dst=dst + num_users, ts=ts,
        num_nodes=num_users + num_pages, edge_feat=edge_feat, bipartite=True,
        num_src_nodes=num_users, synthetic=True,
        source=(f"make_wikipedia_like(num_users={num_users}, num_pages={num_pages}, "
                f"num_events={num_events}, path_strength={path_strength}, seed={seed}, "
                f"edge_feat_dim={edge_feat_dim}, repeat_prob={repeat_prob}, recent={recent}, "
                f"time_span={time_span})"))


def make_power_law(num_nodes: int, num_edges: int, alpha: float = 2.1, seed: int = 0
                   ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A large random interaction stream with power-law degrees, for sampler benchmarks.

    Endpoints are drawn independently from the Chung-Lu weights ``w_k ~ (k+1)^(-1/(alpha-1))``
    (expected degree distribution ``P(d) ~ d^-alpha``), node ids randomly permuted so hubs
    are scattered; self-loops are moved to the next id.  Times are a Poisson process of
    rate 1 (the last time is about ``num_edges``), so they come out sorted with no extra
    pass.  Work is done in chunks so the peak
    memory is the three outputs plus a few tens of MB.

    Parameters
    ----------
    num_nodes : int
        Number of nodes (``>= 2``).
    num_edges : int
        Number of interactions.
    alpha : float
        Degree exponent, ``> 1``; real interaction graphs are mostly 2-3.
    seed : int
        Seed; equal arguments give identical arrays.

    Returns
    -------
    src, dst : numpy.ndarray
        int64 ``[num_edges]``.
    ts : numpy.ndarray
        float64 ``[num_edges]``, sorted (ties are possible only by floating-point rounding).
    """
    if num_nodes < 2 or num_edges < 0:
        raise ValueError("need num_nodes >= 2 and num_edges >= 0")
    if not alpha > 1.0:
        raise ValueError(f"alpha must be > 1, got {alpha}")
    rng = np.random.default_rng(seed)
    b = 1.0 / (alpha - 1.0)
    top = float(num_nodes + 1)
    perm = rng.permutation(num_nodes).astype(np.int64)

    def draw(n: int) -> np.ndarray:
        u = rng.random(n)
        # inverse CDF of the continuous density ~ x^-b on [1, N+1): no searchsorted needed
        if abs(b - 1.0) < 1e-12:
            x = np.power(top, u)
        else:
            x = np.power(1.0 + u * (top ** (1.0 - b) - 1.0), 1.0 / (1.0 - b))
        rank = np.minimum(x.astype(np.int64) - 1, num_nodes - 1)
        return perm[np.maximum(rank, 0)]

    src = np.empty(num_edges, dtype=np.int64)
    dst = np.empty(num_edges, dtype=np.int64)
    ts = np.empty(num_edges, dtype=np.float64)
    chunk = 1 << 22
    clock = 0.0
    for lo in range(0, num_edges, chunk):
        hi = min(lo + chunk, num_edges)
        s, d = draw(hi - lo), draw(hi - lo)
        loop = s == d
        d[loop] = (d[loop] + 1) % num_nodes
        src[lo:hi], dst[lo:hi] = s, d
        gaps = rng.exponential(1.0, size=hi - lo)
        np.cumsum(gaps, out=ts[lo:hi])
        ts[lo:hi] += clock
        clock = float(ts[hi - 1])
    return src, dst, ts
