#include "tcsr.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "budget.h"

namespace tbdfs {

namespace {

// Ties are rare except in coarse-grained data; a short scan beats a search then.
constexpr int kTieScan = 8;

// First position in [lo, hi) whose time is >= t (strict) or > t (inclusive).
int64_t search(const Entry* a, int64_t lo, int64_t hi, double t, bool strict) {
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (strict ? a[mid].ts < t : a[mid].ts <= t) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

}  // namespace

int64_t TCSR::eligible_end(int64_t u, double t, bool strict) const {
  return search(entries.data(), list_begin(u), list_end(u), t, strict);
}

int64_t TCSR::child_eligible_end(int64_t j, bool strict) const {
  const Entry& e = entries[j];
  if (directed) return eligible_end(e.nbr, e.ts, strict);
  const int64_t lo = list_begin(e.nbr), hi = list_end(e.nbr), pos = lo + e.twin;
  const Entry* a = entries.data();
  const double t = e.ts;
  if (strict) {
    int64_t p = pos;
    for (int i = 0; i < kTieScan; ++i, --p)
      if (p == lo || a[p - 1].ts < t) return p;
    return search(a, lo, p, t, true);
  }
  int64_t p = pos + 1;
  for (int i = 0; i < kTieScan; ++i, ++p)
    if (p == hi || a[p].ts > t) return p;
  return search(a, p, hi, t, false);
}

void TCSR::update_summary() {
  // Read through const: the arrays may be read-only views of a mapped file.
  const TCSR& g = *this;
  max_degree = 0;
  live_entries = 0;
  latest_time = -std::numeric_limits<double>::infinity();
  for (size_t u = 0; u < g.degree.size(); ++u) {
    max_degree = std::max(max_degree, g.degree[u]);
    live_entries += g.degree[u];
    // Lists are time-sorted: the last entry is the list's latest.
    if (g.degree[u] > 0) latest_time = std::max(latest_time, g.entries[list_end(u) - 1].ts);
  }
}

void TCSR::set_packed_layout(const std::vector<int64_t>& indptr) {
  const size_t N = static_cast<size_t>(num_nodes), M = entries.size();
  if (num_nodes < 0 || indptr.size() != N + 1) fail("CSR arrays have inconsistent lengths");
  if (indptr[0] != 0 || static_cast<size_t>(indptr[N]) != M)
    fail("CSR indptr must start at 0 and end at the number of entries");
  for (size_t u = 0; u < N; ++u)
    if (indptr[u] > indptr[u + 1] || indptr[u + 1] > static_cast<int64_t>(M))
      fail("CSR indptr is not non-decreasing within [0, ", M, "] at node ", u);
  start.assign(indptr.begin(), indptr.end() - 1);
  degree.resize(N);
  for (size_t u = 0; u < N; ++u) degree[u] = indptr[u + 1] - indptr[u];
  capacity = degree;
}

size_t TCSR::nbytes() const {
  return (start.size() + degree.size() + capacity.size()) * sizeof(int64_t) +
         entries.size() * sizeof(Entry) + (src.size() + dst.size()) * sizeof(nid_t);
}

void TCSR::validate() const {
  const size_t E = static_cast<size_t>(num_edges), N = static_cast<size_t>(num_nodes);
  if (num_nodes < 0 || num_edges < 0 || num_nodes > kMaxId || num_edges > kMaxId)
    fail("CSR sizes out of range: num_nodes=", num_nodes, ", num_edges=", num_edges);
  const int64_t M = static_cast<int64_t>(entries.size());
  if (src.size() != E || dst.size() != E || start.size() != N || degree.size() != N ||
      capacity.size() != N)
    fail("CSR arrays have inconsistent lengths");
  // The whole layout first: the entry checks below index lists of other nodes (twins),
  // which must lie inside `entries` before they are read.
  std::vector<std::pair<int64_t, int64_t>> spans;  // (start, capacity) of non-empty slots
  for (size_t u = 0; u < N; ++u) {
    if (start[u] < 0 || degree[u] < 0 || degree[u] > capacity[u] || capacity[u] > M ||
        start[u] > M - capacity[u])
      fail("CSR list of node ", u, " does not lie within the ", M, " entries");
    if (capacity[u] > 0) spans.emplace_back(start[u], capacity[u]);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i - 1].first + spans[i - 1].second > spans[i].first)
      fail("CSR lists overlap at entry ", spans[i].first);
  for (size_t i = 0; i < E; ++i)
    if (src[i] < 0 || src[i] >= num_nodes || dst[i] < 0 || dst[i] >= num_nodes)
      fail("CSR endpoint out of range at row ", i);
  std::vector<uint8_t> seen(E, 0);
  for (size_t u = 0; u < N; ++u) {
    const int64_t lo = list_begin(u), hi = list_end(u);
    for (int64_t j = lo; j < hi; ++j) {
      const Entry& x = entries[j];
      const eid_t r = x.row;
      if (r < 0 || static_cast<size_t>(r) >= E) fail("CSR row out of range at entry ", j);
      if (x.nbr < 0 || x.nbr >= num_nodes) fail("CSR neighbour out of range at entry ", j);
      if (!std::isfinite(x.ts)) fail("CSR time at entry ", j, " is not finite");
      if (j > lo && (x.ts < entries[j - 1].ts ||
                     (x.ts == entries[j - 1].ts && r <= entries[j - 1].row)))
        fail("CSR neighbour list of node ", u, " is not sorted by (time, row)");
      const nid_t me = static_cast<nid_t>(u);
      const bool here = directed ? (dst[r] == me && x.nbr == src[r])
                                 : ((src[r] == me && x.nbr == dst[r]) || (dst[r] == me && x.nbr == src[r]));
      if (!here) fail("CSR entry ", j, " does not match the endpoints of row ", r);
      // A row appears at most twice: stopping there also keeps the counter from wrapping.
      if (seen[r] >= 2) fail("CSR holds row ", r, " more than twice");
      ++seen[r];
      if (directed) {
        if (x.twin != -1) fail("CSR twin of entry ", j, " must be -1 in a directed graph");
      } else {
        if (x.twin < 0 || x.twin >= degree[x.nbr]) fail("CSR twin of entry ", j, " is wrong");
        const Entry& t = entries[list_begin(x.nbr) + x.twin];
        if (t.row != r || t.nbr != me) fail("CSR twin of entry ", j, " is wrong");
      }
    }
  }
  for (size_t i = 0; i < E; ++i) {
    const int expected = (directed || src[i] == dst[i]) ? 1 : 2;
    if (seen[i] != expected) fail("CSR holds row ", i, " ", int(seen[i]), " times, expected ", expected);
  }
}

TCSR build_tcsr(const int64_t* src, const int64_t* dst, const double* ts, int64_t num_edges,
                int64_t num_nodes, bool directed) {
  if (num_edges < 0) fail("num_edges must be >= 0, got ", num_edges);
  if (num_nodes < 0) fail("num_nodes must be >= 0, got ", num_nodes);
  if (num_edges > kMaxId) fail("at most ", kMaxId, " edges are supported, got ", num_edges);
  if (num_nodes > kMaxId) fail("at most ", kMaxId, " nodes are supported, got ", num_nodes);
  // Refuse before allocating: sparse raw ids (one id near 2^31) would ask for tens of GB.
  const double need = graph_build_bytes(num_nodes, num_edges, directed);
  const double have = physical_memory_bytes();
  if (have > 0 && need > have)
    fail("building this graph needs about ", need / 1073741824.0, " GiB for num_nodes=",
         num_nodes, " and ", num_edges, " edges, more than this machine's ", have / 1073741824.0,
         " GiB; if the node ids are sparse, relabel them to 0..N-1 first");
  bool sorted = true;
  for (int64_t i = 0; i < num_edges; ++i) {
    if (src[i] < 0 || src[i] >= num_nodes)
      fail("src[", i, "] = ", src[i], " is out of range [0, num_nodes=", num_nodes, ")");
    if (dst[i] < 0 || dst[i] >= num_nodes)
      fail("dst[", i, "] = ", dst[i], " is out of range [0, num_nodes=", num_nodes, ")");
    if (!std::isfinite(ts[i])) fail("ts[", i, "] = ", ts[i], " is not a finite time");
    sorted &= (i == 0 || ts[i - 1] <= ts[i]);
  }

  TCSR g;
  g.num_nodes = num_nodes;
  g.num_edges = num_edges;
  g.directed = directed;
  g.src.assign(src, src + num_edges);
  g.dst.assign(dst, dst + num_edges);

  // Rows in (time, row) order; scanning them in that order keeps every list sorted.
  std::vector<eid_t> order;
  if (!sorted) {
    order.resize(num_edges);
    std::iota(order.begin(), order.end(), eid_t{0});
    std::stable_sort(order.begin(), order.end(), [ts](eid_t a, eid_t b) { return ts[a] < ts[b]; });
  }
  auto row_at = [&](int64_t k) -> eid_t { return sorted ? static_cast<eid_t>(k) : order[k]; };

  std::vector<int64_t> indptr(num_nodes + 1, 0);
  for (int64_t e = 0; e < num_edges; ++e) {
    ++indptr[dst[e] + 1];
    if (!directed && src[e] != dst[e]) ++indptr[src[e] + 1];
  }
  for (int64_t u = 0; u < num_nodes; ++u) indptr[u + 1] += indptr[u];
  const int64_t M = indptr[num_nodes];
  g.entries.resize(M);

  std::vector<int64_t> fill(indptr.begin(), indptr.end() - 1);
  for (int64_t k = 0; k < num_edges; ++k) {
    const eid_t r = row_at(k);
    const nid_t s = static_cast<nid_t>(src[r]), d = static_cast<nid_t>(dst[r]);
    const int64_t jd = fill[d]++;
    g.entries[jd] = Entry{ts[r], s, r, -1};
    if (directed) continue;
    if (s == d) {
      g.entries[jd].twin = static_cast<eid_t>(jd - indptr[d]);
      continue;
    }
    const int64_t js = fill[s]++;
    g.entries[js] = Entry{ts[r], d, r, static_cast<eid_t>(jd - indptr[d])};
    g.entries[jd].twin = static_cast<eid_t>(js - indptr[s]);
  }
  fill = std::vector<int64_t>();  // freed before the layout arrays are made
  g.set_packed_layout(indptr);
  g.update_summary();
  return g;
}

}  // namespace tbdfs
