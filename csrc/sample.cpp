#include "sample.h"

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

struct Instances {
  const int64_t* node;
  const double* ts;
  const int64_t* end;
  int64_t size;
};

// Picks the neighbours of destinations [b, e) with one strategy's chooser, called as
// choose(eligible window size, destination, out): the absolute CSR positions of d's picks
// go to picks[d * k..], their number to counts[d].
template <class Choose>
void pick_range(const TCSR& g, const Instances& dst, int64_t k, int64_t b, int64_t e,
                int64_t* picks, int64_t* counts, Choose choose) {
  for (int64_t d = b; d < e; ++d) {
    const int64_t lo = g.list_begin(dst.node[d]);
    int64_t* mine = picks + d * k;
    const int64_t c = choose(dst.end[d] - lo, d, mine);
    for (int64_t i = 0; i < c; ++i) mine[i] += lo;
    counts[d] = c;
  }
}

// The strategy is looked at here, once per chunk; each destination draws from its own
// stream, so the result does not depend on how destinations are split into chunks.
void pick(const TCSR& g, int64_t hop, const Instances& dst, int64_t k, const SampleOptions& opt,
          int64_t b, int64_t e, int64_t* picks, int64_t* counts) {
  const auto rng = [&](int64_t d) { return InstanceRng(opt.seed, opt.stream, hop, d); };
  switch (opt.strategy) {
    case Strategy::kRecent:
      return pick_range(g, dst, k, b, e, picks, counts, [&](int64_t n, int64_t, int64_t* out) {
        return choose_recent(n, k, out);
      });
    case Strategy::kUniform:
      return pick_range(g, dst, k, b, e, picks, counts, [&](int64_t n, int64_t d, int64_t* out) {
        return choose_uniform(n, k, rng(d), out);
      });
    case Strategy::kUniformReplace:
      return pick_range(g, dst, k, b, e, picks, counts, [&](int64_t n, int64_t d, int64_t* out) {
        return choose_uniform_replace(n, k, rng(d), out);
      });
  }
}

void sample_hop(const TCSR& g, int64_t hop, const Instances& dst, int64_t k, bool last,
                const SampleOptions& opt, Hop& out) {
  const int64_t num_dst = dst.size;
  out.num_dst = num_dst;
  out.indptr = Buffer<int64_t>(num_dst + 1);
  Buffer<int64_t> picks(num_dst * k);  // absolute CSR positions of the chosen entries
  int64_t* counts = out.indptr.data() + 1;

  parallel_for(num_dst, opt.num_threads, kMinChunk, [&](int64_t b, int64_t e) {
    pick(g, hop, dst, k, opt, b, e, picks.data(), counts);
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
  check_strategy(opt.strategy);
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
  check_batch_budget(
      estimate_batch(g, opt.fanouts, num_roots, draws_with_replacement(opt.strategy), false),
      num_roots, physical_memory_bytes(),
      " (the sampled tree alone exceeds this machine's physical memory)");
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
