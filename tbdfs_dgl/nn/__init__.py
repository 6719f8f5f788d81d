"""Neural modules of tBDFS: time encoding, BFS (TGAT) attention and the DFS path branch.

Pure PyTorch/DGL: importing them does not need the compiled sampler.
"""
from ._common import masked_softmax
from .path_aggregator import PathAggregator
from .path_encoder import PathEncoder
from .temporal_attention import TemporalAttentionConv
from .time_encoder import TimeEncoder

__all__ = ["PathAggregator", "PathEncoder", "TemporalAttentionConv", "TimeEncoder",
           "masked_softmax"]
