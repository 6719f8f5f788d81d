"""The chronological split of TGAT's protocol: train, validation and test by time, with some
late-appearing nodes held out of training for the inductive metrics."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data.dataset import TemporalDataset

__all__ = ["ChronologicalSplit", "chronological_split"]


@dataclass
class ChronologicalSplit:
    """Which interactions train, validate and test (boolean masks over the dataset's rows).

    Attributes
    ----------
    train, val, test : numpy.ndarray
        Rows used for training (after removing held-out nodes), validation and test.
    val_inductive, test_inductive : numpy.ndarray
        Validation/test rows with at least one endpoint never seen in training.
    held_out_nodes : numpy.ndarray
        The nodes removed from training for the inductive evaluation.
    val_time, test_time : float
        Split points: validation rows have ``val_time < t <= test_time``.
    """

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    val_inductive: np.ndarray
    test_inductive: np.ndarray
    held_out_nodes: np.ndarray
    val_time: float
    test_time: float

    def summary(self) -> str:
        """One line with the sizes of each part."""
        return (f"train {int(self.train.sum())} | val {int(self.val.sum())} "
                f"(inductive {int(self.val_inductive.sum())}) | test {int(self.test.sum())} "
                f"(inductive {int(self.test_inductive.sum())}) | held-out nodes "
                f"{len(self.held_out_nodes)}")


def chronological_split(data: TemporalDataset, val_ratio: float = 0.15, test_ratio: float = 0.15,
                        new_node_ratio: float = 0.1, seed: int = 0) -> ChronologicalSplit:
    """Split interactions by time, holding some late-appearing nodes out of training.

    Parameters
    ----------
    data : TemporalDataset
        Interactions in time order.
    val_ratio, test_ratio : float
        Fractions of interactions (by time quantile) for validation and test.
    new_node_ratio : float
        Fraction of *all* nodes to hold out, drawn from those that appear in validation or
        test (TGAT's rule).
    seed : int
        Seed for choosing the held-out nodes.
    """
    if data.num_edges < 3:
        raise ValueError(f"{data.name}: a split needs at least 3 interactions, got {data.num_edges}")
    if not (0 < val_ratio < 1 and 0 < test_ratio < 1 and val_ratio + test_ratio < 1):
        raise ValueError(f"bad split ratios: val={val_ratio}, test={test_ratio}")
    ts = data.ts.astype(np.float64)
    val_time, test_time = np.quantile(ts, [1 - val_ratio - test_ratio, 1 - test_ratio])
    late = ts > val_time
    late_nodes = np.union1d(data.src[late], data.dst[late])
    active = np.union1d(data.src, data.dst)
    rng = np.random.default_rng(seed)
    n_hold = min(len(late_nodes), int(new_node_ratio * len(active)))
    held_out = np.sort(rng.choice(late_nodes, n_hold, replace=False)) if n_hold else late_nodes[:0]
    is_held = np.zeros(data.num_nodes, bool)
    is_held[held_out] = True
    touches_held = is_held[data.src] | is_held[data.dst]
    train = (ts <= val_time) & ~touches_held
    seen = np.zeros(data.num_nodes, bool)
    seen[data.src[train]] = True
    seen[data.dst[train]] = True
    new_edge = ~seen[data.src] | ~seen[data.dst]
    val = (ts > val_time) & (ts <= test_time)
    test = ts > test_time
    return ChronologicalSplit(train, val, test, val & new_edge, test & new_edge, held_out,
                              float(val_time), float(test_time))
