// Memory budget of a sampled batch: an upper bound on its output, known before sampling.
//
// Every layer multiplies the frontier: a layer's sources are its destinations followed by
// at most k neighbours each, so at most dst * (k + 1) instances, and the next layer starts
// from those.  The bound is computed in floating point so that absurd fanouts (2^40 paths,
// 65 layers) give a huge number instead of an overflowed one.
#pragma once

#include <cstdint>
#include <vector>

#include "tcsr.h"

namespace tbdfs {

// Layers above this are refused (the path walker keeps one slot per layer on its stack).
constexpr int64_t kMaxLayers = 64;

struct BatchEstimate {
  double tree_bytes = 0;   // hops: instances, edges and scratch while sampling
  double path_bytes = 0;   // path arrays [B, P, L] (5 arrays, 33 bytes per slot)
  double instances = 0;    // source instances summed over the layers
  double path_slots = 0;   // B * P * L
  double total() const { return tree_bytes + path_bytes; }
};

// Upper bound for `num_roots` roots on `g` with these fanouts (DGL order).  Without
// replacement a node never gets more neighbours than the longest list, so the per-layer
// growth uses min(k, g.max_degree) + 1 there; path slots always use the full fanouts.
BatchEstimate estimate_batch(const TCSR& g, const std::vector<int64_t>& fanouts,
                             int64_t num_roots, bool replace, bool with_paths);

// Peak bytes of build_tcsr for these sizes: indptr, the fill cursors and the list layout
// (start, degree, capacity: 5 x 8 bytes per node), up to two 24-byte entries per edge, the
// endpoint copies and the sort order.
double graph_build_bytes(int64_t num_nodes, int64_t num_edges, bool directed);

// Physical memory of this machine, in bytes (0 when unknown): no batch may need more.
double physical_memory_bytes();

// Throws InputError when the estimate exceeds `limit_bytes`, naming both and what to change.
void check_batch_budget(const BatchEstimate& est, int64_t num_roots, double limit_bytes,
                        const char* how_to_raise);

}  // namespace tbdfs
