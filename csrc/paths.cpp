#include "paths.h"

#include <algorithm>

#include "budget.h"
#include "parallel.h"

namespace tbdfs {

namespace {

constexpr int kMaxHops = static_cast<int>(kMaxLayers);

// Walks one root's subtree depth-first and writes every slot of its [P, L] block exactly
// once: the arrays are megabytes per batch, so a separate fill pass would double the traffic.
struct Walker {
  const std::vector<Hop>& hops;
  const int64_t* stride;  // slots spanned by one child choice at each hop
  const int64_t* fanout;  // child choices at each hop
  int64_t L;
  PathArrays& out;
  int64_t node[kMaxHops], eid[kMaxHops], src_index[kMaxHops];
  double ts[kMaxHops];

  void write_chain(int64_t slot, int64_t depth) {
    const int64_t base = slot * L;
    for (int64_t h = 0; h < depth; ++h) {
      out.nodes[base + h] = node[h];
      out.eids[base + h] = eid[h];
      out.ts[base + h] = ts[h];
      out.src_index[base + h] = src_index[h];
      out.mask[base + h] = 1;
    }
    for (int64_t h = depth; h < L; ++h) {
      out.nodes[base + h] = -1;
      out.eids[base + h] = -1;
      out.ts[base + h] = -1.0;
      out.src_index[base + h] = -1;
      out.mask[base + h] = 0;
    }
  }

  void write_empty(int64_t first_slot, int64_t end_slot) {
    const int64_t b = first_slot * L, e = end_slot * L;
    std::fill(out.nodes.data() + b, out.nodes.data() + e, int64_t{-1});
    std::fill(out.eids.data() + b, out.eids.data() + e, int64_t{-1});
    std::fill(out.ts.data() + b, out.ts.data() + e, -1.0);
    std::fill(out.src_index.data() + b, out.src_index.data() + e, int64_t{-1});
    std::fill(out.mask.data() + b, out.mask.data() + e, uint8_t{0});
  }

  // Fills slots [slot, slot + fanout[h] * stride[h]) for the instance `inst` among hop
  // h's destinations.
  void visit(int64_t h, int64_t inst, int64_t slot) {
    const Hop& hop = hops[h];
    const int64_t first = hop.indptr[inst], c = hop.indptr[inst + 1] - first;
    const int64_t span = fanout[h] * stride[h];
    if (c == 0) {
      // The chain ends here: one slot keeps it (none for a root without history).
      if (h > 0) {
        write_chain(slot, h);
        write_empty(slot + 1, slot + span);
      } else {
        write_empty(slot, slot + span);
      }
      return;
    }
    for (int64_t i = 0; i < c; ++i) {
      const int64_t s = hop.num_dst + first + i;
      node[h] = hop.src_node[s];
      ts[h] = hop.src_ts[s];
      eid[h] = hop.eid[first + i];
      src_index[h] = s;
      if (h + 1 == L) {
        write_chain(slot + i, L);
      } else {
        visit(h + 1, s, slot + i * stride[h]);
      }
    }
    write_empty(slot + c * stride[h], slot + span);
  }
};

}  // namespace

PathArrays explode_paths(const std::vector<Hop>& hops, const std::vector<int64_t>& fanouts,
                         int num_threads) {
  const int64_t L = static_cast<int64_t>(hops.size());
  if (L > kMaxHops) throw InputError("at most 64 layers are supported");
  PathArrays out;
  out.num_hops = L;
  out.num_roots = L ? hops[0].num_dst : 0;
  std::vector<int64_t> fanout(L), stride(L, 1);
  for (int64_t h = 0; h < L; ++h) fanout[h] = fanouts[L - 1 - h];
  // Refuse before allocating (and before the strides, which could overflow int64).
  BatchEstimate est;
  est.path_slots = static_cast<double>(out.num_roots) * static_cast<double>(L);
  for (int64_t h = 0; h < L; ++h) est.path_slots *= static_cast<double>(fanout[h]);
  est.path_bytes = est.path_slots * 33;
  if (est.path_slots / std::max<double>(1.0, static_cast<double>(out.num_roots)) > 0x1p53)
    fail("prod(fanouts) * layers = ", est.path_slots / std::max<double>(1.0, out.num_roots),
         " path slots per root: too many for any batch");
  check_batch_budget(est, out.num_roots, physical_memory_bytes(),
                     " (the path arrays alone exceed this machine's physical memory)");
  for (int64_t h = L - 2; h >= 0; --h) stride[h] = stride[h + 1] * fanout[h + 1];
  out.num_paths = L ? stride[0] * fanout[0] : 0;

  const int64_t n = out.num_roots * out.num_paths * L;
  out.nodes = Buffer<int64_t>(n);
  out.eids = Buffer<int64_t>(n);
  out.ts = Buffer<double>(n);
  out.mask = Buffer<uint8_t>(n);
  out.src_index = Buffer<int64_t>(n);

  // Roots write disjoint slices, so any split over threads gives the same arrays.
  parallel_for(out.num_roots, num_threads, 512, [&](int64_t b, int64_t e) {
    Walker w{hops, stride.data(), fanout.data(), L, out, {}, {}, {}, {}};
    for (int64_t r = b; r < e; ++r) w.visit(0, r, r * out.num_paths);
  });
  return out;
}

}  // namespace tbdfs
