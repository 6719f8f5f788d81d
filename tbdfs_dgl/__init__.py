"""tbdfs-dgl: the tBDFS temporal graph neural network for DGL, on a C++ temporal sampler."""
__version__ = "0.1.0"

from .batch import PathBatch, TemporalBatch
from .graph import TemporalGraph
from .model import TBDFSModel
from .sampler import TemporalSampler

__all__ = ["PathBatch", "TemporalBatch", "TemporalGraph", "TemporalSampler", "TBDFSModel"]
