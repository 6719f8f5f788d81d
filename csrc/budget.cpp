#include "budget.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace tbdfs {

namespace {

// Bytes per source instance (node, time, eligible end), per destination (indptr) and per
// sampled edge (eid, dt, plus the pick scratch of sample_hop).
constexpr double kPerInstance = 3 * 8;
constexpr double kPerDst = 8;
constexpr double kPerEdge = 3 * 8;
constexpr double kPerSlot = 4 * 8 + 1;

std::string human(double bytes) {
  char buf[64];
  if (bytes >= 1e18) {
    std::snprintf(buf, sizeof buf, "%.3g bytes", bytes);
  } else {
    const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int i = 0;
    while (bytes >= 1024 && i < 6) {
      bytes /= 1024;
      ++i;
    }
    std::snprintf(buf, sizeof buf, "%.1f %s", bytes, unit[i]);
  }
  return buf;
}

}  // namespace

BatchEstimate estimate_batch(const TCSR& g, const std::vector<int64_t>& fanouts,
                             int64_t num_roots, bool replace, bool with_paths) {
  BatchEstimate est;
  const size_t L = fanouts.size();
  double dst = static_cast<double>(num_roots), paths = 1;
  for (size_t h = 0; h < L; ++h) {
    const double k = static_cast<double>(fanouts[L - 1 - h]);
    const double grow = replace ? k : std::min(k, static_cast<double>(g.max_degree));
    const double edges = dst * grow, src = dst + edges;
    // picks: dst * k slots are reserved before the counts are known.
    est.tree_bytes += dst * kPerDst + src * kPerInstance + edges * kPerEdge + dst * k * 8;
    est.instances += src;
    paths *= k;
    dst = src;
  }
  if (with_paths) {
    est.path_slots = static_cast<double>(num_roots) * paths * static_cast<double>(L);
    est.path_bytes = est.path_slots * kPerSlot;
  }
  return est;
}

double graph_build_bytes(int64_t num_nodes, int64_t num_edges, bool directed) {
  const double n = static_cast<double>(num_nodes), e = static_cast<double>(num_edges);
  return 40 * (n + 1) + (directed ? 1 : 2) * 24 * e + 12 * e;
}

double physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? static_cast<double>(pages) * static_cast<double>(size) : 0;
}

void check_batch_budget(const BatchEstimate& est, int64_t num_roots, double limit_bytes,
                        const char* how_to_raise) {
  if (!(est.total() > limit_bytes)) return;
  fail("this batch could need up to ", human(est.total()), " (", human(est.tree_bytes),
       " for ", est.instances, " sampled instances + ", human(est.path_bytes), " for ",
       est.path_slots, " path slots, for ", num_roots,
       " roots: every layer multiplies the frontier by fanout + 1 and each root has "
       "prod(fanouts) path slots), above the limit of ", human(limit_bytes),
       "; use fewer roots per batch or smaller/fewer fanouts", how_to_raise);
}

}  // namespace tbdfs
