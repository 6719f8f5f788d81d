#include "sample.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "budget.h"
#include "parallel.h"
#include "rng.h"

namespace tbdfs {

namespace {

// Items per chunk: a chunk must outweigh waking a sleeping helper (tens of microseconds).
constexpr int64_t kMinChunk = 4096;
constexpr int64_t kPrefetchAhead = 4;

// Above this many picks Floyd's membership test uses a hash set instead of a scan.
constexpr int64_t kFloydScanMax = 64;

// Open-addressing set of non-negative offsets, one per thread, reused across destinations:
// its table grows only when a larger k arrives, so the sampling loop does not allocate.
class OffsetSet {
 public:
  // Empties the set and sizes it for up to n insertions (load factor <= 1/2).
  void reset(int64_t n) {
    size_t cap = 16;
    while (cap < static_cast<size_t>(2 * n)) cap <<= 1;
    if (table_.size() < cap) table_.resize(cap);
    mask_ = cap - 1;
    std::fill(table_.begin(), table_.begin() + cap, int64_t{-1});
  }
  // Inserts v; returns false when it was already there.
  bool insert(int64_t v) {
    size_t i = static_cast<size_t>(mix64(static_cast<uint64_t>(v))) & mask_;
    while (table_[i] != -1) {
      if (table_[i] == v) return false;
      i = (i + 1) & mask_;
    }
    table_[i] = v;
    return true;
  }

 private:
  std::vector<int64_t> table_;
  size_t mask_ = 0;
};

OffsetSet& scratch_set() {
  thread_local OffsetSet set;
  return set;
}

// Writes the chosen offsets into the eligible prefix (ascending) for one destination into
// out[0..return value).
int64_t choose(int64_t eligible, int64_t k, const SampleOptions& opt, InstanceRng&& rng,
               int64_t* out) {
  if (eligible == 0) return 0;
  if (opt.recent) {
    const int64_t take = std::min(k, eligible);
    for (int64_t i = 0; i < take; ++i) out[i] = eligible - take + i;
    return take;
  }
  if (opt.replace) {
    for (int64_t i = 0; i < k; ++i) out[i] = static_cast<int64_t>(rng.below(eligible));
    std::sort(out, out + k);
    return k;
  }
  if (eligible <= k) {
    for (int64_t i = 0; i < eligible; ++i) out[i] = i;
    return eligible;
  }
  // Floyd's algorithm: k distinct offsets, every k-subset equally likely.  The membership
  // test is a scan of the picks so far for small k (fastest there) and a hash set above:
  // both answer the same question, so the draws for a (seed, stream) do not depend on k's
  // side of the threshold, and the work is O(k) expected instead of O(k^2).
  if (k <= kFloydScanMax) {
    int64_t c = 0;
    for (int64_t j = eligible - k; j < eligible; ++j) {
      const int64_t t = static_cast<int64_t>(rng.below(j + 1));
      bool seen = false;
      for (int64_t i = 0; i < c; ++i) seen |= (out[i] == t);
      out[c++] = seen ? j : t;
    }
  } else {
    OffsetSet& set = scratch_set();
    set.reset(k);
    int64_t c = 0;
    for (int64_t j = eligible - k; j < eligible; ++j) {
      const int64_t t = static_cast<int64_t>(rng.below(j + 1));
      // j itself is never in the set yet (offsets so far are < j), so it is always new.
      const int64_t v = set.insert(t) ? t : j;
      if (v == j) set.insert(j);
      out[c++] = v;
    }
  }
  std::sort(out, out + k);
  return k;
}

struct Instances {
  const int64_t* node;
  const double* ts;
  const int64_t* end;
  int64_t size;
};

void sample_hop(const TCSR& g, int64_t hop, const Instances& dst, int64_t k, bool last,
                const SampleOptions& opt, Hop& out) {
  const int64_t num_dst = dst.size;
  out.num_dst = num_dst;
  out.indptr = Buffer<int64_t>(num_dst + 1);
  Buffer<int64_t> picks(num_dst * k);  // absolute CSR positions of the chosen entries
  int64_t* counts = out.indptr.data() + 1;

  parallel_for(num_dst, opt.num_threads, kMinChunk, [&](int64_t b, int64_t e) {
    for (int64_t d = b; d < e; ++d) {
      const int64_t lo = g.list_begin(dst.node[d]);
      int64_t* mine = picks.data() + d * k;
      const int64_t c = choose(dst.end[d] - lo, k, opt, InstanceRng(opt.seed, opt.stream, hop, d), mine);
      for (int64_t i = 0; i < c; ++i) mine[i] += lo;
      counts[d] = c;
    }
  });
  out.indptr[0] = 0;
  for (int64_t d = 0; d < num_dst; ++d) out.indptr[d + 1] += out.indptr[d];

  const int64_t m = out.indptr[num_dst], num_src = num_dst + m;
  out.src_node = Buffer<int64_t>(num_src);
  out.src_ts = Buffer<double>(num_src);
  if (!last) out.src_end = Buffer<int64_t>(num_src);
  out.eid = Buffer<int64_t>(m);
  out.dt = Buffer<double>(m);
  // An empty batch has null buffers, and memcpy's pointers must be valid even for size 0.
  if (num_dst > 0) {
    std::memcpy(out.src_node.data(), dst.node, num_dst * sizeof(int64_t));
    std::memcpy(out.src_ts.data(), dst.ts, num_dst * sizeof(double));
    if (!last) std::memcpy(out.src_end.data(), dst.end, num_dst * sizeof(int64_t));
  }

  parallel_for(num_dst, opt.num_threads, kMinChunk, [&](int64_t b, int64_t e) {
    for (int64_t d = b; d < e; ++d) {
      // Uniform picks land anywhere in long lists: ask for the entries of a destination a
      // few steps ahead so their cache misses overlap with this one's work.
      if (d + kPrefetchAhead < e) {
        const int64_t ahead = d + kPrefetchAhead;
        const int64_t n = out.indptr[ahead + 1] - out.indptr[ahead];
        for (int64_t i = 0; i < n; ++i)
          __builtin_prefetch(&g.entries[picks[ahead * k + i]], 0, 1);
      }
      const int64_t first = out.indptr[d], c = out.indptr[d + 1] - first;
      const int64_t* mine = picks.data() + d * k;
      const double t = dst.ts[d];
      for (int64_t i = 0; i < c; ++i) {
        const int64_t j = mine[i], pos = first + i, s = num_dst + pos;
        const Entry& x = g.entries[j];
        out.src_node[s] = x.nbr;
        out.src_ts[s] = x.ts;
        if (!last) out.src_end[s] = g.child_eligible_end(j, opt.strict);
        out.eid[pos] = x.row;
        out.dt[pos] = t - x.ts;
      }
    }
  });
}

}  // namespace

void check_sample_inputs(const TCSR& g, const int64_t* root_nodes, const double* root_times,
                         int64_t num_roots, const SampleOptions& opt) {
  if (opt.fanouts.empty()) fail("fanouts must name at least one layer");
  if (static_cast<int64_t>(opt.fanouts.size()) > kMaxLayers)
    fail("at most ", kMaxLayers, " layers are supported, got ", opt.fanouts.size(), " fanouts");
  double slots = static_cast<double>(opt.fanouts.size());
  for (size_t i = 0; i < opt.fanouts.size(); ++i) {
    if (opt.fanouts[i] < 1) fail("fanouts[", i, "] = ", opt.fanouts[i], " must be >= 1");
    slots *= static_cast<double>(opt.fanouts[i]);
  }
  // Beyond this, slot indices of even one root overflow (and no memory could hold them).
  if (slots > 0x1p53)
    fail("prod(fanouts) * layers = ", slots, " path slots per root: too many for any batch");
  if (num_roots < 0) fail("the number of roots must be >= 0, got ", num_roots);
  // The last line of defence for callers of the extension itself: the Python sampler checks
  // the tree and the paths against its own, configurable limit before getting here.
  check_batch_budget(estimate_batch(g, opt.fanouts, num_roots, opt.replace, false), num_roots,
                     physical_memory_bytes(), " (the sampled tree alone exceeds this machine's "
                     "physical memory)");
  if (opt.num_threads < 1) fail("num_threads must be >= 1, got ", opt.num_threads);
  for (int64_t i = 0; i < num_roots; ++i) {
    if (root_nodes[i] < 0 || root_nodes[i] >= g.num_nodes)
      fail("nodes[", i, "] = ", root_nodes[i], " is out of range [0, num_nodes=", g.num_nodes, ")");
    if (!std::isfinite(root_times[i])) fail("times[", i, "] = ", root_times[i], " is not finite");
  }
}

std::vector<Hop> sample_tree(const TCSR& g, const int64_t* root_nodes, const double* root_times,
                             int64_t num_roots, const SampleOptions& opt) {
  check_sample_inputs(g, root_nodes, root_times, num_roots, opt);
  const int64_t L = static_cast<int64_t>(opt.fanouts.size());
  Buffer<int64_t> root_end(num_roots);
  parallel_for(num_roots, opt.num_threads, kMinChunk, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) root_end[i] = g.eligible_end(root_nodes[i], root_times[i], opt.strict);
  });

  std::vector<Hop> hops(L);
  Instances dst{root_nodes, root_times, root_end.data(), num_roots};
  for (int64_t h = 0; h < L; ++h) {
    sample_hop(g, h, dst, opt.fanouts[L - 1 - h], h == L - 1, opt, hops[h]);
    dst = Instances{hops[h].src_node.data(), hops[h].src_ts.data(), hops[h].src_end.data(),
                    hops[h].num_src()};
  }
  return hops;
}

}  // namespace tbdfs
