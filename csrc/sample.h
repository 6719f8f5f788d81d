// Time-respecting neighbour sampling of an L-layer tree of (node, time) instances.
#pragma once

#include <cstdint>
#include <vector>

#include "buffer.h"
#include "strategy.h"
#include "tcsr.h"

namespace tbdfs {

struct SampleOptions {
  std::vector<int64_t> fanouts;  // DGL order: fanouts[L-1] is used for the roots' neighbours
  Strategy strategy = Strategy::kRecent;  // how each destination picks (strategy.h)
  bool strict = true;            // eligible: t_e < t (strict) or t_e <= t
  uint64_t seed = 0;
  uint64_t stream = 0;           // distinguishes batches: same (seed, stream) -> same tree
  int num_threads = 1;
};

// One sampled layer.  Its destinations are the previous hop's source instances (the roots
// for hop 0); its sources are those destinations, in order, followed by the sampled
// neighbour instances, each at the time of the edge that reached it.
struct Hop {
  int64_t num_dst = 0;
  Buffer<int64_t> src_node;  // [num_src]
  Buffer<double> src_ts;     // [num_src]
  Buffer<int64_t> src_end;   // [num_src] end of the eligible prefix of the node's list
                             // (absolute CSR position); empty on the last hop
  Buffer<int64_t> indptr;    // [num_dst + 1] destination d's neighbours are edges
                             // indptr[d]..indptr[d+1], i.e. sources num_dst + those
  Buffer<int64_t> eid;       // [num_edges] input row of each sampled edge
  Buffer<double> dt;         // [num_edges] destination time minus edge time

  int64_t num_src() const { return src_node.size(); }
  int64_t num_edges() const { return eid.size(); }
};

// Validates roots and options (throws InputError), then samples hop 0 (from the roots)
// to hop L-1.  Thread-count independent for a given (seed, stream).
std::vector<Hop> sample_tree(const TCSR& g, const int64_t* root_nodes, const double* root_times,
                             int64_t num_roots, const SampleOptions& opt);

void check_sample_inputs(const TCSR& g, const int64_t* root_nodes, const double* root_times,
                         int64_t num_roots, const SampleOptions& opt);

}  // namespace tbdfs
