#include "append.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "budget.h"

namespace tbdfs {

namespace {

constexpr int64_t kMinCapacity = 4;

// Grows v's capacity by 1.25x (not the library's 2x) when `extra` more elements do not
// fit: the pool's spare capacity counts against the memory of an appended graph.
template <class T>
void reserve_for(CowArray<T>& v, size_t extra) {
  const size_t need = v.size() + extra;
  if (need > v.capacity()) v.reserve(std::max(need, v.capacity() + v.capacity() / 4));
}

// Pool size up to which lists may move out and leave their old space behind: the pool's
// capacity is reserved up to it at once, so it is reallocated only at a repack.
size_t pool_limit(const TCSR& g) {
  return static_cast<size_t>(kCompactRatio * static_cast<double>(g.live_entries)) + kCompactFloor;
}

// Makes room for one more entry in u's list (repacking the pool at most once).
void make_room(TCSR& g, int64_t u, bool may_compact = true) {
  if (g.degree[u] < g.capacity[u]) return;
  const int64_t len = g.degree[u];
  const int64_t cap = std::max(kMinCapacity, len + len / 2 + 1);
  const bool at_end = g.capacity[u] > 0 &&
                      g.start[u] + g.capacity[u] == static_cast<int64_t>(g.entries.size());
  const size_t need = g.entries.size() + (at_end ? cap - g.capacity[u] : cap);
  if (need > g.entries.capacity()) {
    if (may_compact && need > pool_limit(g)) {
      // The pool is full of space lists moved out of: repack (which also gives u spare
      // slots, unless its list is short) before growing it.
      compact(g, kCompactSlack);
      ++g.compactions;
      make_room(g, u, false);
      return;
    }
    g.entries.reserve(std::max(need, pool_limit(g)));
  }
  if (at_end) {
    g.entries.resize(g.start[u] + cap);  // the list already ends the pool: grow in place
  } else {
    const int64_t pool = static_cast<int64_t>(g.entries.size());
    g.entries.resize(pool + cap);
    if (len > 0)
      std::memcpy(g.entries.data() + pool, g.entries.data() + g.start[u], len * sizeof(Entry));
    g.start[u] = pool;
    ++g.relocations;
  }
  g.capacity[u] = cap;
}

// Appends e to u's list; returns its offset there.
eid_t push(TCSR& g, int64_t u, const Entry& e) {
  make_room(g, u);
  const int64_t off = g.degree[u]++;
  g.entries[g.start[u] + off] = e;
  g.max_degree = std::max(g.max_degree, g.degree[u]);
  ++g.live_entries;
  return static_cast<eid_t>(off);
}

// A new pool holding g's lists in node order, each with spare slots (slack_div > 0) or
// none, and writes their layout into start / capacity, which may be g's own (each node's
// old start is read before it is overwritten).  Spare slots: lists keep the room they
// have (those that grew since the last repack are the ones that keep growing), and get at
// least degree / slack_div; if kept room would fill more than half the headroom up to
// the next repack, every list gets degree / slack_div instead.
std::vector<Entry> repack(const TCSR& g, int64_t slack_div, CowArray<int64_t>& start,
                          CowArray<int64_t>& capacity) {
  auto room = [&](int64_t u, bool keep) -> int64_t {
    const int64_t len = g.degree[u];
    if (slack_div <= 0) return len;
    return keep ? std::max(g.capacity[u], len + len / slack_div) : len + len / slack_div;
  };
  int64_t total = 0;
  for (int64_t u = 0; u < g.num_nodes; ++u) total += room(u, true);
  const double half_way = (1.0 + kCompactRatio) / 2 * static_cast<double>(g.live_entries);
  const bool keep = static_cast<double>(total) <= half_way;
  if (!keep) {
    total = 0;
    for (int64_t u = 0; u < g.num_nodes; ++u) total += room(u, false);
  }
  std::vector<Entry> pool;
  // Room for lists to move into until the next repack (pages untouched until used).
  pool.reserve(std::max(static_cast<size_t>(total), slack_div > 0 ? pool_limit(g) : 0));
  pool.resize(total);
  int64_t at = 0;
  for (int64_t u = 0; u < g.num_nodes; ++u) {
    const int64_t len = g.degree[u], cap = room(u, keep);
    if (len > 0)
      std::memcpy(pool.data() + at, g.entries.data() + g.start[u], len * sizeof(Entry));
    start[u] = at;
    capacity[u] = cap;
    at += cap;
  }
  return pool;
}

}  // namespace

void append_edges(TCSR& g, const int64_t* src, const int64_t* dst, const double* ts,
                  int64_t n) {
  if (n < 0) fail("the number of rows must be >= 0, got ", n);
  if (n > kMaxId - g.num_edges)
    fail("at most ", kMaxId, " edges are supported: ", g.num_edges, " + ", n, " is too many");
  int64_t largest = g.num_nodes - 1;
  bool sorted = true;
  for (int64_t i = 0; i < n; ++i) {
    if (src[i] < 0) fail("src[", i, "] = ", src[i], " is negative; ids must be >= 0");
    if (dst[i] < 0) fail("dst[", i, "] = ", dst[i], " is negative; ids must be >= 0");
    if (src[i] >= kMaxId || dst[i] >= kMaxId)
      fail("row ", i, ": node id ", std::max(src[i], dst[i]), " exceeds the ", kMaxId - 1,
           " the CSR supports");
    if (!std::isfinite(ts[i])) fail("ts[", i, "] = ", ts[i], " is not a finite time");
    if (ts[i] < g.latest_time)
      fail("ts[", i, "] = ", ts[i], " is earlier than the graph's latest time ", g.latest_time,
           ": interactions can only be appended in time order (build a new graph to insert "
           "past ones)");
    largest = std::max({largest, src[i], dst[i]});
    sorted &= (i == 0 || ts[i - 1] <= ts[i]);
  }
  const int64_t num_nodes = largest + 1;
  if (num_nodes > g.num_nodes) {
    const double need = 3.0 * 8 * static_cast<double>(num_nodes - g.num_nodes);
    const double have = physical_memory_bytes();
    if (have > 0 && need > have / 2)
      fail("node id ", largest, " would grow the graph to ", num_nodes, " nodes (",
           need / 1073741824.0, " GiB of lists): if the ids are sparse, relabel them first");
  }
  if (n == 0) return;
  g.own_storage();  // a mapped graph gets its own copy on its first append

  // Rows in (time, row) order, as build_tcsr scans them.
  std::vector<int64_t> order;
  if (!sorted) {
    order.resize(n);
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [ts](int64_t a, int64_t b) { return ts[a] < ts[b]; });
  }
  if (num_nodes > g.num_nodes) {
    const int64_t pool = static_cast<int64_t>(g.entries.size());
    reserve_for(g.start, num_nodes - g.num_nodes);
    reserve_for(g.degree, num_nodes - g.num_nodes);
    reserve_for(g.capacity, num_nodes - g.num_nodes);
    g.start.resize(num_nodes, pool);
    g.degree.resize(num_nodes, 0);
    g.capacity.resize(num_nodes, 0);
    g.num_nodes = num_nodes;
  }
  reserve_for(g.src, n);
  reserve_for(g.dst, n);
  for (int64_t i = 0; i < n; ++i) {
    g.src.push_back(static_cast<nid_t>(src[i]));
    g.dst.push_back(static_cast<nid_t>(dst[i]));
  }
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = sorted ? k : order[k];
    const eid_t r = static_cast<eid_t>(g.num_edges + i);
    const nid_t s = static_cast<nid_t>(src[i]), d = static_cast<nid_t>(dst[i]);
    // The destination's entry first, then the source's, as build_tcsr fills them.
    const eid_t jd = push(g, d, Entry{ts[i], s, r, -1});
    if (g.directed) continue;
    if (s == d) {
      g.entries[g.start[d] + jd].twin = jd;
      continue;
    }
    const eid_t js = push(g, s, Entry{ts[i], d, r, jd});
    g.entries[g.start[d] + jd].twin = js;
  }
  g.num_edges += n;
  g.latest_time = std::max(g.latest_time, sorted ? ts[n - 1] : ts[order[n - 1]]);
}

void compact(TCSR& g, int64_t slack_div) {
  g.own_storage();
  g.entries = repack(g, slack_div, g.start, g.capacity);
}

TCSR packed_copy(const TCSR& g) {
  TCSR out;
  out.num_nodes = g.num_nodes;
  out.num_edges = g.num_edges;
  out.directed = g.directed;
  out.src = g.src;
  out.dst = g.dst;
  out.degree = g.degree;
  out.start.resize(g.num_nodes);
  out.capacity.resize(g.num_nodes);
  out.entries = repack(g, 0, out.start, out.capacity);
  out.max_degree = g.max_degree;
  out.live_entries = g.live_entries;
  out.latest_time = g.latest_time;
  return out;
}

}  // namespace tbdfs
