// A sampled layer as dense, padded [num_dst, k] tables: what the torch model computes from.
#pragma once

#include <cstdint>

#include "buffer.h"
#include "sample.h"

namespace tbdfs {

// Row d holds destination d's sampled neighbours in edge order, then padding.  Every
// destination has at most k neighbours, so nothing is dropped (checked).
struct LayerTableArrays {
  int64_t num_dst = 0, k = 0;
  Buffer<int64_t> nbr;   // source position of the neighbour (num_dst + edge); 0 where padded
  Buffer<uint8_t> mask;  // 1 for a neighbour, 0 for padding
  Buffer<double> dt;     // destination time minus edge time; 0 where padded
  Buffer<int64_t> eid;   // input row of the edge; -1 where padded
};

// `rows` (>= hop.num_dst; -1 for hop.num_dst) rows: those past hop.num_dst are padding
// (fixed shapes for torch.compile).  Neighbour positions count the real destinations only,
// so padding rows change no index.  Throws InputError if a destination has more than k
// neighbours.
LayerTableArrays dense_table(const Hop& hop, int64_t k, int num_threads, int64_t rows = -1);

}  // namespace tbdfs
