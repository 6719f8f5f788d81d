// Path explosion: the sampled tree read as root-to-leaf temporal paths.
#pragma once

#include <cstdint>
#include <vector>

#include "buffer.h"
#include "sample.h"

namespace tbdfs {

// Arrays of shape [num_roots, num_paths, num_hops], row-major.  Slot [b, p, h] is the
// instance reached after h + 1 steps on path p of root b.  Path p's child choice at hop h
// is digit h of p in the mixed radix of the hops' fanouts.  A chain that ends early (a node
// without eligible neighbours) occupies the slot whose remaining digits are all zero; every
// other slot under it is empty, so each root-to-leaf chain appears exactly once.
struct PathArrays {
  int64_t num_roots = 0, num_paths = 0, num_hops = 0;
  Buffer<int64_t> nodes;      // -1 where empty
  Buffer<int64_t> eids;       // -1 where empty
  Buffer<double> ts;          // -1 where empty
  Buffer<uint8_t> mask;       // 1 where the slot holds a hop
  Buffer<int64_t> src_index;  // source position in the block of that hop; -1 where empty
};

PathArrays explode_paths(const std::vector<Hop>& hops, const std::vector<int64_t>& fanouts,
                         int num_threads);

}  // namespace tbdfs
