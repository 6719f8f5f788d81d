"""Link scoring from two node embeddings: TGAT's affinity ``MergeLayer``."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

__all__ = ["LinkScorer"]


class LinkScorer(nn.Module):
    r"""Link logit of a (source, destination) pair from their embeddings.

    .. math::
        s(i, j) = W_2\, \mathrm{ReLU}\left(W_1 [h_i \| h_j] + b_1\right) + b_2

    TGAT's ``MergeLayer`` with a one-unit output, as used for temporal link prediction.

    Parameters
    ----------
    in_dim : int
        Width of each embedding (``h_i`` and ``h_j`` alike).
    hidden_dim : int, optional
        Width of the hidden layer.  Default: ``in_dim``.
    """

    def __init__(self, in_dim: int, hidden_dim: Optional[int] = None) -> None:
        super().__init__()
        hidden_dim = in_dim if hidden_dim is None else hidden_dim
        for name, value in (("in_dim", in_dim), ("hidden_dim", hidden_dim)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.fc1 = nn.Linear(2 * in_dim, hidden_dim)
        self.fc2 = nn.Linear(hidden_dim, 1)
        self.reset_parameters()

    @classmethod
    def from_layers(cls, fc1: nn.Linear, fc2: nn.Linear) -> "LinkScorer":
        """A scorer around existing layers, shared and left as they are (not reinitialised).

        For a model that registers the layers under its own names (as
        :class:`~tbdfs_dgl.TBDFSModel` does, so that its checkpoints keep their keys).

        Parameters
        ----------
        fc1 : torch.nn.Linear
            ``2 * in_dim -> hidden_dim``, with a bias.
        fc2 : torch.nn.Linear
            ``hidden_dim -> 1``, with a bias.
        """
        if (fc1.in_features % 2 or fc2.in_features != fc1.out_features
                or fc2.out_features != 1 or fc1.bias is None or fc2.bias is None):
            raise ValueError(f"fc1 must map 2 * in_dim -> hidden_dim and fc2 hidden_dim -> 1, "
                             f"both with a bias; got {fc1} and {fc2}")
        scorer = cls.__new__(cls)
        nn.Module.__init__(scorer)
        scorer.fc1, scorer.fc2 = fc1, fc2
        return scorer

    def reset_parameters(self) -> None:
        """Reinitialise the parameters (Xavier-normal weights, zero biases, as TGAT)."""
        for lin in (self.fc1, self.fc2):
            nn.init.xavier_normal_(lin.weight)
            nn.init.zeros_(lin.bias)

    def forward(self, src_emb: torch.Tensor, dst_emb: torch.Tensor) -> torch.Tensor:
        """Score pairs of embeddings.

        Parameters
        ----------
        src_emb, dst_emb : torch.Tensor
            ``[B, in_dim]`` embeddings of the sources and destinations.

        Returns
        -------
        torch.Tensor
            ``[B]`` logits.
        """
        hidden = torch.relu(self.fc1(torch.cat([src_emb, dst_emb], dim=-1)))
        return self.fc2(hidden).squeeze(-1)

    def extra_repr(self) -> str:
        return f"in_dim={self.fc1.in_features // 2}, hidden_dim={self.fc1.out_features}"
