"""Work done once per distinct key (interaction id, time gap) and gathered per slot.

A sampled batch reaches the same interaction, and the same time gap, from many slots: the
roots of one event share its time, and a tree reaches an interaction along several chains
(Wikipedia, the path encoder's leaves: 3-3.5 per distinct gap at [10, 10] recent, 2-3.6 at
[20, 20] uniform).  On a CPU a linear map of an input part that depends only on such a key
(an edge row, a time encoding) is cheaper applied once per distinct key and gathered: the
GEMM rows saved outweigh the sort, the gather and its scatter backward.  The time encoding
alone does not pay (60,000 gaps, 15,000 distinct, one thread: 19-25 ms forward and
backward per slot, 27-28 ms per distinct gap with the gather), so layers that never map a
slot's encoding by itself (the BFS layers) keep encoding per slot.  Off the CPU the
data-dependent ``unique`` would synchronise the device and break ``torch.compile``'s
static shapes, so the per-slot computation stays there.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch

from ._compile import compiling
from ._slots import autocast_dtype

__all__ = ["MAX_SHARE", "distinct_rows", "encode_gaps", "pays"]

#: Share of distinct keys above which the per-slot computation is kept: the gather forward
#: and the scatter backward would then cost more than the rows saved.
MAX_SHARE = 0.75


def pays(key: torch.Tensor, width: int, out_dim: int) -> bool:
    """Whether computing a ``width``-wide part mapped to ``out_dim`` columns once per
    distinct key can pay: on a CPU, outside autocast and ``torch.compile``, for maps wide
    enough that the rows saved outweigh the sort."""
    return (key.device.type == "cpu" and width * out_dim >= 1024
            and autocast_dtype("cpu") is None and not compiling())


#: Integer types of the same width, whose ``unique`` finds the distinct floats by bits.
_BITS = {torch.float64: torch.int64, torch.float32: torch.int32}


def distinct_rows(key: torch.Tensor) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
    """``(distinct keys, inverse index)`` of the flattened ``key``, or ``None`` when more
    than :data:`MAX_SHARE` of the keys are distinct.

    Float keys (time gaps) are told apart by their bits, ``-0.0`` taken as ``0.0``: equal
    floats have equal bits but for the zeros (and NaN, never equal anyway), and torch's
    CPU ``unique`` of integers is 4-5x faster than of floats (60,000 gaps: 1.2 against
    5.7 ms, one thread).  The distinct keys then come in the order of their bits."""
    flat = key.reshape(-1)
    bits = _BITS.get(flat.dtype) if flat.device.type == "cpu" else None
    if bits is not None:
        uniq, inv = torch.unique((flat + 0.0).view(bits), return_inverse=True)  # -0.0 + 0.0 = 0.0
        uniq = uniq.view(flat.dtype)
    else:
        uniq, inv = torch.unique(flat, return_inverse=True)
    if uniq.numel() > MAX_SHARE * inv.numel():
        return None
    return uniq, inv


def encode_gaps(time_encoder: torch.nn.Module, dt: torch.Tensor, dtype: torch.dtype,
                out_dim: int, gather: bool = True
                ) -> Tuple[Optional[torch.Tensor], Optional[Tuple[torch.Tensor, torch.Tensor]]]:
    """``time_encoder(dt)`` in ``dtype``, ``[*dt.shape, T]``, computed once per distinct gap
    where that :func:`pays` (for a map to ``out_dim`` columns) and the gaps repeat.

    Returns
    -------
    (torch.Tensor or None, (torch.Tensor, torch.Tensor) or None)
        The encodings per slot (``None`` if they were computed per distinct gap and
        ``gather`` is false: the caller reads the rows), and, in that case, the encodings
        per distinct gap ``[U, T]`` with the slots' ``[dt.numel()]`` index into them (for
        a caller that maps them once per distinct gap too); ``None`` otherwise.
    """
    T = time_encoder.effective_dim
    shared = distinct_rows(dt) if pays(dt, T, out_dim) else None
    if shared is None:
        return time_encoder(dt).to(dtype), None
    uniq, inv = shared
    phi_u = time_encoder(uniq).to(dtype)
    if not gather:
        return None, (phi_u, inv)
    return phi_u.index_select(0, inv).view(*dt.shape, T), (phi_u, inv)
