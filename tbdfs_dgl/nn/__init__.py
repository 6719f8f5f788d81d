"""Neural modules of tBDFS: time encoding, BFS (TGAT) attention, the DFS path branch and the
link scorer.

Pure PyTorch/DGL: importing them does not need the compiled sampler.
"""
from ._common import NodeRows, masked_softmax
from ._gemm import cpu_gemm_backend
from .link_scorer import LinkScorer
from .path_aggregator import PathAggregator
from .path_encoder import PathEncoder
from .temporal_attention import TemporalAttentionConv
from .time_encoder import TimeEncoder

__all__ = ["LinkScorer", "NodeRows", "PathAggregator", "PathEncoder", "TemporalAttentionConv",
           "TimeEncoder", "cpu_gemm_backend", "masked_softmax"]
