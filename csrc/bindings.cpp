// Python bindings: numpy arrays in, numpy arrays out, the GIL released while working.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "append.h"
#include "budget.h"
#include "dropout_bits.h"
#include "gathered_scores.h"
#include "leaf_merge.h"
#include "mapped_file.h"
#include "path_attention.h"
#include "paths.h"
#include "sample.h"
#include "simd.h"
#include "strategy.h"
#include "tables.h"
#include "tcsr.h"
#include "time_encode.h"

namespace py = pybind11;
using namespace tbdfs;

namespace {

template <class T>
using CArray = py::array_t<T, py::array::c_style>;

// Wraps a buffer as a numpy array that owns it: no copy.
template <class T, class Out = T>
py::array to_numpy(Buffer<T>&& buf, std::vector<py::ssize_t> shape) {
  T* p = buf.release();
  if (!p) return py::array_t<Out>(shape);  // empty: numpy allocates nothing useful
  py::capsule owner(p, [](void* q) { block_cache::release(q); });
  return py::array_t<Out>(shape, reinterpret_cast<Out*>(p), owner);
}

// The CSR is shared by every sampler and worker and trusted by the sampling loops (twins,
// list bounds), so views of it are read-only; numpy then also refuses to make them
// writeable again, since their base (the CSR) offers no writeable buffer.
py::array read_only(py::array a) {
  a.attr("setflags")(py::arg("write") = false);
  return a;
}

template <class Array>
py::array view(const Array& v, py::handle owner) {
  using T = std::decay_t<decltype(*v.data())>;
  return read_only(py::array_t<T>({static_cast<py::ssize_t>(v.size())}, v.data(), owner));
}

// A strided view of one field of every entry.
template <class T>
py::array field_view(const CowArray<Entry>& v, T Entry::*field, py::handle owner) {
  const T* first = v.empty() ? nullptr : &(v.data()->*field);
  return read_only(py::array_t<T>({static_cast<py::ssize_t>(v.size())},
                                  {static_cast<py::ssize_t>(sizeof(Entry))}, first, owner));
}

// The CSR's lock, for reading (sampling, views) or writing (appends); see TCSR::mutex.
std::shared_lock<std::shared_mutex> read_lock(const TCSR& g) {
  return std::shared_lock<std::shared_mutex>(*g.mutex);
}

template <class T>
void check_1d(const CArray<T>& a, const char* name) {
  if (a.ndim() != 1)
    throw InputError(std::string(name) + " must be 1-D, got " + std::to_string(a.ndim()) + "-D");
}

template <class T>
std::vector<T> copy_vec(const CArray<T>& a, const char* name) {
  check_1d(a, name);
  return std::vector<T>(a.data(), a.data() + a.size());
}

// Interactions as three 1-D arrays of one length (building a CSR, appending to one).
void check_edge_arrays(const CArray<int64_t>& src, const CArray<int64_t>& dst,
                       const CArray<double>& ts) {
  check_1d(src, "src");
  check_1d(dst, "dst");
  check_1d(ts, "ts");
  if (src.size() != dst.size() || src.size() != ts.size())
    throw InputError("src, dst and ts must have the same length, got " +
                     std::to_string(src.size()) + ", " + std::to_string(dst.size()) + " and " +
                     std::to_string(ts.size()));
}

std::shared_ptr<TCSR> build(const CArray<int64_t>& src, const CArray<int64_t>& dst,
                            const CArray<double>& ts, int64_t num_nodes, bool directed) {
  check_edge_arrays(src, dst, ts);
  py::gil_scoped_release release;
  return std::make_shared<TCSR>(
      build_tcsr(src.data(), dst.data(), ts.data(), src.size(), num_nodes, directed));
}

std::shared_ptr<TCSR> from_arrays(int64_t num_nodes, int64_t num_edges, bool directed,
                                  const CArray<int64_t>& indptr, const CArray<int32_t>& nbr,
                                  const CArray<int32_t>& row, const CArray<double>& ts,
                                  const CArray<int32_t>& twin, const CArray<int32_t>& src,
                                  const CArray<int32_t>& dst) {
  for (auto* a : {&nbr, &row, &twin, &src, &dst}) check_1d(*a, "CSR array");
  check_1d(ts, "ts");
  check_1d(indptr, "indptr");
  const int64_t M = nbr.size();
  if (row.size() != M || ts.size() != M || twin.size() != M)
    throw InputError("CSR entry arrays (nbr, row, ts, twin) must have the same length");
  auto g = std::make_shared<TCSR>();
  g->num_nodes = num_nodes;
  g->num_edges = num_edges;
  g->directed = directed;
  g->src = copy_vec(src, "src");
  g->dst = copy_vec(dst, "dst");
  g->entries.resize(M);
  for (int64_t j = 0; j < M; ++j)
    g->entries[j] = Entry{ts.data()[j], nbr.data()[j], row.data()[j], twin.data()[j]};
  const std::vector<int64_t> ptr = copy_vec(indptr, "indptr");
  py::gil_scoped_release release;
  g->set_packed_layout(ptr);
  g->validate();
  g->update_summary();
  return g;
}

// A CSR over the arrays of a saved graph, mapped read-only from their files: each array
// is (path, byte offset of its data, element count), checked by the caller against the
// file's header; the lists are then checked here as unpickled ones are.  Capacity is the
// degree (a saved graph is packed).
using FileArray = std::tuple<std::string, int64_t, int64_t>;

std::shared_ptr<TCSR> map_saved(int64_t num_nodes, int64_t num_edges, bool directed,
                                const FileArray& start, const FileArray& degree,
                                const FileArray& entries, const FileArray& src,
                                const FileArray& dst) {
  py::gil_scoped_release release;
  auto g = std::make_shared<TCSR>();
  g->num_nodes = num_nodes;
  g->num_edges = num_edges;
  g->directed = directed;
  auto map = [](const FileArray& f, auto tag) {
    using T = decltype(tag);
    return mapped_array<T>(std::get<0>(f), std::get<1>(f), std::get<2>(f));
  };
  g->start = map(start, int64_t{});
  g->degree = map(degree, int64_t{});
  g->capacity = g->degree;
  g->entries = map(entries, Entry{});
  g->src = map(src, nid_t{});
  g->dst = map(dst, nid_t{});
  g->validate();
  g->update_summary();
  return g;
}

// The edges in input-row order, for converting back to a DGLGraph.
py::tuple input_edges(const TCSR& g) {
  const int64_t E = g.num_edges;
  Buffer<int64_t> src(E), dst(E);
  Buffer<double> ts(E);
  {
    py::gil_scoped_release release;
    auto lock = read_lock(g);
    for (int64_t e = 0; e < E; ++e) {
      src[e] = g.src[e];
      dst[e] = g.dst[e];
    }
    // Live lists only: the pool also holds spare slots and lists' old places.
    for (int64_t u = 0; u < g.num_nodes; ++u)
      for (int64_t j = g.list_begin(u); j < g.list_end(u); ++j) ts[g.entries[j].row] = g.entries[j].ts;
  }
  return py::make_tuple(to_numpy(std::move(src), {E}), to_numpy(std::move(dst), {E}),
                        to_numpy(std::move(ts), {E}));
}

// The packed layout's arrays (indptr, entry fields, endpoints) as read-only views of one
// snapshot, which they keep alive: the CSR itself may move its entries on the next append.
py::dict packed_arrays(const TCSR& g) {
  struct Snapshot {
    TCSR csr;
    std::vector<int64_t> indptr;
  };
  auto snap = std::make_unique<Snapshot>();
  {
    py::gil_scoped_release release;
    auto lock = read_lock(g);
    snap->csr = packed_copy(g);
  }
  const TCSR& c = snap->csr;
  snap->indptr.assign(c.start.begin(), c.start.end());
  snap->indptr.push_back(c.live_entries);
  const std::vector<int64_t>& indptr = snap->indptr;
  py::capsule owner(snap.release(), [](void* p) { delete static_cast<Snapshot*>(p); });
  py::dict d;
  d["indptr"] = view(indptr, owner);
  d["nbr"] = field_view(c.entries, &Entry::nbr, owner);
  d["row"] = field_view(c.entries, &Entry::row, owner);
  d["ts"] = field_view(c.entries, &Entry::ts, owner);
  d["twin"] = field_view(c.entries, &Entry::twin, owner);
  d["src"] = view(c.src, owner);
  d["dst"] = view(c.dst, owner);
  return d;
}

// Replaces every sampled edge's input row e by eid_map[e] (checked first: a bad map
// leaves the hops untouched).
void map_edge_ids(std::vector<Hop>& hops, const int64_t* map, int64_t map_size) {
  for (const Hop& h : hops)
    for (int64_t i = 0; i < h.num_edges(); ++i)
      if (h.eid[i] < 0 || h.eid[i] >= map_size)
        throw InputError("edge id " + std::to_string(h.eid[i]) + " is outside eid_map (" +
                         std::to_string(map_size) + " entries; it needs one per edge of "
                         "the graph)");
  for (Hop& h : hops)
    for (int64_t i = 0; i < h.num_edges(); ++i) h.eid[i] = map[h.eid[i]];
}

// `b` grown to n entries, the new ones `fill`.
template <class T>
Buffer<T> grown(Buffer<T>&& b, int64_t n, T fill) {
  if (n == b.size()) return std::move(b);
  Buffer<T> out(n);
  if (b.size()) std::memcpy(out.data(), b.data(), b.size() * sizeof(T));
  for (int64_t i = b.size(); i < n; ++i) out[i] = fill;
  return out;
}

py::tuple sample(const TCSR& g, const CArray<int64_t>& nodes, const CArray<double>& times,
                 std::vector<int64_t> fanouts, Strategy strategy, bool strict,
                 uint64_t seed, uint64_t stream, int num_threads, bool with_paths,
                 bool with_tables, int64_t pad_roots,
                 const std::optional<CArray<int64_t>>& eid_map) {
  check_1d(nodes, "nodes");
  check_1d(times, "times");
  if (nodes.size() != times.size())
    throw InputError("nodes and times must have the same length, got " +
                     std::to_string(nodes.size()) + " and " + std::to_string(times.size()));
  if (pad_roots > 0) {
    if (pad_roots < nodes.size())
      throw InputError("pad_roots=" + std::to_string(pad_roots) + " is smaller than the batch (" +
                       std::to_string(nodes.size()) + " roots)");
    if (with_paths || !with_tables)
      throw InputError("pad_roots pads the layer tables: it needs with_tables and no paths");
  }
  const int64_t* map = nullptr;
  int64_t map_size = 0;
  if (eid_map) {
    check_1d(*eid_map, "eid_map");
    map = eid_map->data();
    map_size = eid_map->size();
  }
  SampleOptions opt;
  opt.fanouts = std::move(fanouts);
  opt.strategy = strategy;
  opt.strict = strict;
  opt.seed = seed;
  opt.stream = stream;
  opt.num_threads = num_threads;

  std::vector<Hop> hops;
  PathArrays paths;
  std::vector<LayerTableArrays> tables;
  {
    py::gil_scoped_release release;
    {
      auto lock = read_lock(g);  // only the tree reads the CSR
      hops = sample_tree(g, nodes.data(), times.data(), nodes.size(), opt);
    }
    if (map) map_edge_ids(hops, map, map_size);
    if (with_paths) paths = explode_paths(hops, opt.fanouts, num_threads);
    if (with_tables) {
      const size_t L = hops.size();
      int64_t rows = pad_roots;  // padded: every layer at its largest shape for pad_roots
      for (size_t h = 0; h < L; ++h) {  // hop h draws fanouts[L - 1 - h] neighbours
        const int64_t k = opt.fanouts[L - 1 - h];
        tables.push_back(dense_table(hops[h], k, num_threads, pad_roots > 0 ? rows : -1));
        if (pad_roots > 0) {
          // Padding sources (node 0, time 0) after the real ones; nothing references them.
          rows *= k + 1;
          hops[h].src_node = grown(std::move(hops[h].src_node), rows, int64_t{0});
          hops[h].src_ts = grown(std::move(hops[h].src_ts), rows, 0.0);
        }
      }
    }
  }
  py::object out_tables = py::none();
  if (with_tables) {
    py::list lst;
    for (LayerTableArrays& t : tables) {
      const std::vector<py::ssize_t> shape{t.num_dst, t.k};
      lst.append(py::make_tuple(to_numpy(std::move(t.nbr), shape),
                                to_numpy<uint8_t, bool>(std::move(t.mask), shape),
                                to_numpy(std::move(t.dt), shape),
                                to_numpy(std::move(t.eid), shape)));
    }
    out_tables = lst;
  }

  py::list out_hops;
  for (Hop& h : hops) {
    const py::ssize_t ns = h.num_src(), ne = h.num_edges();
    out_hops.append(py::make_tuple(h.num_dst, to_numpy(std::move(h.src_node), {ns}),
                                   to_numpy(std::move(h.src_ts), {ns}),
                                   to_numpy(std::move(h.indptr), {h.num_dst + 1}),
                                   to_numpy(std::move(h.eid), {ne}),
                                   to_numpy(std::move(h.dt), {ne})));
  }
  if (!with_paths) return py::make_tuple(out_hops, py::none(), out_tables);
  const std::vector<py::ssize_t> shape{paths.num_roots, paths.num_paths, paths.num_hops};
  py::tuple out_paths = py::make_tuple(
      to_numpy(std::move(paths.nodes), shape), to_numpy(std::move(paths.eids), shape),
      to_numpy(std::move(paths.ts), shape), to_numpy<uint8_t, bool>(std::move(paths.mask), shape),
      to_numpy(std::move(paths.src_index), shape));
  return py::make_tuple(out_hops, out_paths, out_tables);
}

// `out` is bound with noconvert(): a converted copy would take the results silently.
void time_encode_py(const CArray<double>& dt, const CArray<double>& weight, double scale,
                    py::array_t<float, py::array::c_style> out, int num_threads) {
  check_1d(dt, "dt");
  check_1d(weight, "weight");
  const int64_t n = dt.size(), d = weight.size();
  if (out.ndim() != 2 || out.shape(0) != n || out.shape(1) != 2 * d)
    throw InputError("out must be a float32 array of shape [" + std::to_string(n) + ", " +
                     std::to_string(2 * d) + "]");
  if (!out.writeable()) throw InputError("out must be writeable");
  if (num_threads < 1) throw InputError("num_threads must be >= 1");
  float* dst = out.mutable_data();
  py::gil_scoped_release release;
  time_encode(dt.data(), n, weight.data(), d, static_cast<float>(scale), dst, num_threads);
}

void time_encode_phase_py(const CArray<double>& dt, const CArray<double>& weight,
                          const CArray<float>& bias_cos, const CArray<float>& bias_sin,
                          py::array_t<float, py::array::c_style> cos_out,
                          py::array_t<float, py::array::c_style> sin_out, int num_threads) {
  check_1d(dt, "dt");
  check_1d(weight, "weight");
  check_1d(bias_cos, "bias_cos");
  check_1d(bias_sin, "bias_sin");
  const int64_t n = dt.size(), d = weight.size();
  if (bias_cos.size() != d || bias_sin.size() != d)
    throw InputError("bias_cos and bias_sin must have the length of weight");
  for (const auto* out : {&cos_out, &sin_out}) {
    if (out->ndim() != 2 || out->shape(0) != n || out->shape(1) != d)
      throw InputError("cos_out and sin_out must be float32 arrays of shape [" +
                       std::to_string(n) + ", " + std::to_string(d) + "]");
    if (!out->writeable()) throw InputError("cos_out and sin_out must be writeable");
  }
  if (num_threads < 1) throw InputError("num_threads must be >= 1");
  float* c = cos_out.mutable_data();
  float* s = sin_out.mutable_data();
  py::gil_scoped_release release;
  time_encode_phase(dt.data(), n, weight.data(), bias_cos.data(), bias_sin.data(), d, c, s,
                    num_threads);
}

// ---- the path encoder's fused last hop (csrc/leaf_merge.h) ----
// Every array is bound with noconvert(): a converted copy of an output would take the
// results silently, and one of an input would cost a batch-sized copy.
using F32 = py::array_t<float, py::array::c_style>;
using I64 = py::array_t<int64_t, py::array::c_style>;
using U8 = py::array_t<uint8_t, py::array::c_style>;

void check_shape(const py::array& a, const char* name, std::vector<py::ssize_t> shape) {
  bool ok = a.ndim() == static_cast<py::ssize_t>(shape.size());
  for (size_t i = 0; ok && i < shape.size(); ++i) ok = a.shape(i) == shape[i];
  if (ok) return;
  std::string want, got;
  for (size_t i = 0; i < shape.size(); ++i) want += (i ? ", " : "") + std::to_string(shape[i]);
  for (py::ssize_t i = 0; i < a.ndim(); ++i) got += (i ? ", " : "") + std::to_string(a.shape(i));
  throw InputError(std::string(name) + " must have shape [" + want + "], got [" + got + "]");
}

// Every leaf's (instance's) row index of part i within [0, u).
void check_index(const I64& index, size_t i, int64_t u, const char* unit) {
  const int64_t* ix = index.data();
  for (int64_t p = 0; p < index.size(); ++p)
    if (ix[p] < 0 || ix[p] >= u)
      throw InputError("index[" + std::to_string(i) + "] holds " + std::to_string(ix[p]) +
                       " at " + unit + " " + std::to_string(p) + ", outside the " +
                       std::to_string(u) + " rows");
}

// The shape every argument must agree with, from root [B, W], parent [B * n, H, W] and k;
// checks alpha, beta, the parts (index values in range) and the thread count.
LeafShape leaf_shape(const F32& root, const F32& parent, const F32& alpha, const F32& beta,
                     const std::vector<F32>& rows, const std::vector<I64>& index, int64_t k,
                     int num_threads, LeafRows& parts) {
  if (root.ndim() != 2) throw InputError("root must be 2-D [B, W]");
  if (parent.ndim() != 3) throw InputError("parent must be 3-D [B * n, H, W]");
  if (k < 1) throw InputError("k must be >= 1");
  if (num_threads < 1) throw InputError("num_threads must be >= 1");
  LeafShape s{root.shape(0), 0, k, parent.shape(1), root.shape(1)};
  if (parent.shape(2) != s.width) throw InputError("parent and root must have the same width");
  if (s.num_roots == 0 ? parent.shape(0) != 0 : parent.shape(0) % s.num_roots != 0)
    throw InputError("parent must have a whole number of rows per root");
  s.per_root = s.num_roots ? parent.shape(0) / s.num_roots * k : 0;
  const int64_t n = s.leaves();
  check_shape(alpha, "alpha", {n, s.heads});
  check_shape(beta, "beta", {n, s.heads});
  if (rows.size() != index.size()) throw InputError("rows and index must pair up");
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].ndim() != 3 || rows[i].shape(1) != s.heads || rows[i].shape(2) != s.width)
      throw InputError("rows[" + std::to_string(i) + "] must be [U, " +
                       std::to_string(s.heads) + ", " + std::to_string(s.width) + "]");
    check_shape(index[i], "index", {n});
    check_index(index[i], i, rows[i].shape(0), "leaf");
    parts.rows.push_back(rows[i].data());
    parts.index.push_back(index[i].data());
  }
  return s;
}

F32& writeable(F32& a, const char* name) {
  if (!a.writeable()) throw InputError(std::string(name) + " must be writeable");
  return a;
}

// The leaves' dropout from the caller's seed (None: no dropout) and keep probability.
LeafDropout leaf_dropout(const std::optional<uint64_t>& seed, double keep) {
  if (!seed) return LeafDropout{false, 0, 0, 1.0f};
  if (!(keep > 0.0 && keep <= 1.0)) throw InputError("keep must be in (0, 1]");
  return LeafDropout{true, *seed, dropout::keep_threshold(keep),
                     static_cast<float>(1.0 / keep)};
}

void leaf_merge_forward_py(const F32& root, const F32& parent, const F32& alpha,
                           const F32& beta, const std::vector<F32>& rows,
                           const std::vector<I64>& index, std::optional<uint64_t> seed,
                           double keep, int64_t k, F32 out, int num_threads) {
  LeafRows parts;
  const LeafShape s = leaf_shape(root, parent, alpha, beta, rows, index, k, num_threads, parts);
  check_shape(out, "out", {s.leaves(), s.width});
  const LeafDropout drop = leaf_dropout(seed, keep);
  float* o = writeable(out, "out").mutable_data();
  py::gil_scoped_release release;
  leaf_merge_forward(s, root.data(), parent.data(), alpha.data(), beta.data(), parts, drop, o,
                     num_threads);
}

// The keep mask (0 / 1) that leaf_merge_forward draws from seed for rows x width units.
void dropout_keep_mask_py(uint64_t seed, double keep, U8 out, int num_threads) {
  if (num_threads < 1) throw InputError("num_threads must be >= 1");
  if (out.ndim() != 2) throw InputError("out must be 2-D [rows, width]");
  if (!out.writeable()) throw InputError("out must be writeable");
  const LeafDropout drop = leaf_dropout(seed, keep);
  uint8_t* mask = out.mutable_data();
  const int64_t rows = out.shape(0), W = out.shape(1);
  py::gil_scoped_release release;
  leaf_dropout_mask(drop, rows, W, mask, num_threads);
}

void leaf_merge_backward_py(const F32& grad_out, const F32& out, const F32& root,
                            const F32& parent, const F32& alpha, const F32& beta,
                            const std::vector<F32>& rows, const std::vector<I64>& index,
                            bool dropout, double scale, int64_t k, F32 grad_root,
                            F32 grad_parent, F32 grad_alpha, F32 grad_beta,
                            std::vector<F32> grad_rows, int num_threads) {
  LeafRows parts;
  const LeafShape s = leaf_shape(root, parent, alpha, beta, rows, index, k, num_threads, parts);
  check_shape(grad_out, "grad_out", {s.leaves(), s.width});
  check_shape(out, "out", {s.leaves(), s.width});
  check_shape(grad_root, "grad_root", {s.num_roots, s.width});
  check_shape(grad_parent, "grad_parent", {parent.shape(0), s.heads, s.width});
  check_shape(grad_alpha, "grad_alpha", {s.leaves(), s.heads});
  check_shape(grad_beta, "grad_beta", {s.leaves(), s.heads});
  if (grad_rows.size() != rows.size()) throw InputError("grad_rows must pair up with rows");
  std::vector<float*> gr;
  for (size_t i = 0; i < rows.size(); ++i) {
    check_shape(grad_rows[i], "grad_rows", {rows[i].shape(0), s.heads, s.width});
    gr.push_back(writeable(grad_rows[i], "grad_rows").mutable_data());
  }
  float* g_root = writeable(grad_root, "grad_root").mutable_data();
  float* g_parent = writeable(grad_parent, "grad_parent").mutable_data();
  float* g_alpha = writeable(grad_alpha, "grad_alpha").mutable_data();
  float* g_beta = writeable(grad_beta, "grad_beta").mutable_data();
  py::gil_scoped_release release;
  leaf_merge_backward(s, grad_out.data(), out.data(), parent.data(), alpha.data(), beta.data(),
                      parts, dropout, static_cast<float>(scale), g_root, g_parent, g_alpha,
                      g_beta, gr, num_threads);
}

// ---- scores of instances whose inputs are table rows (csrc/gathered_scores.h) ----
// Checks the parts against the scores' [N, H] and the roots' count B = query.shape(0);
// returns the instances per root.
int64_t score_parts(const std::vector<F32>& query, const std::vector<F32>& rows,
                    const std::vector<I64>& index, int64_t n, int64_t heads,
                    int num_threads, ScoreParts& parts) {
  if (num_threads < 1) throw InputError("num_threads must be >= 1");
  if (query.empty()) throw InputError("gathered scores need at least one part");
  if (query.size() != rows.size() || rows.size() != index.size())
    throw InputError("query, rows and index must pair up");
  const int64_t B = query[0].ndim() == 3 ? query[0].shape(0) : -1;
  if (B < 0 || (B == 0 ? n != 0 : n % B != 0))
    throw InputError("query must be [B, H, K] with B dividing the instances");
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].ndim() != 2) throw InputError("rows must be 2-D [U, K]");
    const int64_t K = rows[i].shape(1), u = rows[i].shape(0);
    check_shape(query[i], "query", {B, heads, K});
    check_shape(index[i], "index", {n});
    check_index(index[i], i, u, "instance");
    parts.query.push_back(query[i].data());
    parts.rows.push_back(rows[i].data());
    parts.index.push_back(index[i].data());
    parts.width.push_back(K);
  }
  return B ? n / B : 0;
}

void gathered_scores_forward_py(const std::vector<F32>& query, const std::vector<F32>& rows,
                                const std::vector<I64>& index, F32 scores, int num_threads) {
  if (scores.ndim() != 2) throw InputError("scores must be 2-D [N, H]");
  ScoreParts parts;
  const int64_t per_root = score_parts(query, rows, index, scores.shape(0), scores.shape(1),
                                       num_threads, parts);
  float* out = writeable(scores, "scores").mutable_data();
  const int64_t B = query[0].shape(0), H = scores.shape(1);
  py::gil_scoped_release release;
  gathered_scores_forward(B, per_root, H, parts, out, num_threads);
}

void gathered_scores_backward_py(const std::vector<F32>& query, const std::vector<F32>& rows,
                                 const std::vector<I64>& index, const F32& grad_scores,
                                 std::vector<std::optional<F32>> grad_query,
                                 std::vector<std::optional<F32>> grad_rows, int num_threads) {
  if (grad_scores.ndim() != 2) throw InputError("grad_scores must be 2-D [N, H]");
  ScoreParts parts;
  const int64_t per_root = score_parts(query, rows, index, grad_scores.shape(0),
                                       grad_scores.shape(1), num_threads, parts);
  if (grad_query.size() != rows.size() || grad_rows.size() != rows.size())
    throw InputError("grad_query and grad_rows must pair up with the parts");
  std::vector<float*> gq, gr;
  for (size_t i = 0; i < rows.size(); ++i) {
    float* q = nullptr;
    float* r = nullptr;
    if (grad_query[i]) {
      check_shape(*grad_query[i], "grad_query", {query[i].shape(0), query[i].shape(1),
                                                 query[i].shape(2)});
      q = writeable(*grad_query[i], "grad_query").mutable_data();
    }
    if (grad_rows[i]) {
      check_shape(*grad_rows[i], "grad_rows", {rows[i].shape(0), rows[i].shape(1)});
      r = writeable(*grad_rows[i], "grad_rows").mutable_data();
    }
    gq.push_back(q);
    gr.push_back(r);
  }
  const int64_t B = query[0].shape(0), H = grad_scores.shape(1);
  const float* g = grad_scores.data();
  py::gil_scoped_release release;
  gathered_scores_backward(B, per_root, H, parts, g, gq, gr, num_threads);
}

// ---- attention over a root's paths (csrc/path_attention.h) ----
using Bool = py::array_t<bool, py::array::c_style>;

// The shape from feat [B, P, D] and query [B, H, D]; checks mask [B, P], the optional
// dropout factors [B, H, P] and the thread count.
PathAttnShape path_attn_shape(const F32& feat, const F32& query, const Bool& mask,
                              const std::optional<F32>& drop, int num_threads) {
  if (num_threads < 1) throw InputError("num_threads must be >= 1");
  if (feat.ndim() != 3) throw InputError("feat must be 3-D [B, P, D]");
  if (query.ndim() != 3) throw InputError("query must be 3-D [B, H, D]");
  const PathAttnShape s{feat.shape(0), feat.shape(1), query.shape(1), feat.shape(2)};
  check_shape(query, "query", {s.roots, s.heads, s.width});
  check_shape(mask, "mask", {s.roots, s.paths});
  if (drop) check_shape(*drop, "drop", {s.roots, s.heads, s.paths});
  return s;
}

void path_attention_forward_py(const F32& feat, const F32& query, const Bool& mask,
                               const std::optional<F32>& drop, F32 prob,
                               std::optional<F32> weight, F32 agg, int num_threads) {
  const PathAttnShape s = path_attn_shape(feat, query, mask, drop, num_threads);
  check_shape(prob, "prob", {s.roots, s.heads, s.paths});
  check_shape(agg, "agg", {s.roots, s.heads, s.width});
  float* w = nullptr;
  if (weight) {
    check_shape(*weight, "weight", {s.roots, s.heads, s.paths});
    w = writeable(*weight, "weight").mutable_data();
  } else if (drop) {
    throw InputError("weight is needed with drop");
  }
  float* pr = writeable(prob, "prob").mutable_data();
  float* a = writeable(agg, "agg").mutable_data();
  const float* dp = drop ? drop->data() : nullptr;
  const auto* m = reinterpret_cast<const uint8_t*>(mask.data());
  py::gil_scoped_release release;
  path_attention_forward(s, feat.data(), query.data(), m, dp, pr, w, a, num_threads);
}

void path_attention_backward_py(const F32& feat, const F32& query, const Bool& mask,
                                const std::optional<F32>& drop, const F32& prob,
                                const F32& grad_agg, const std::optional<F32>& grad_weight,
                                std::optional<F32> grad_feat, F32 grad_query,
                                int num_threads) {
  const PathAttnShape s = path_attn_shape(feat, query, mask, drop, num_threads);
  check_shape(prob, "prob", {s.roots, s.heads, s.paths});
  check_shape(grad_agg, "grad_agg", {s.roots, s.heads, s.width});
  if (grad_weight) check_shape(*grad_weight, "grad_weight", {s.roots, s.heads, s.paths});
  check_shape(grad_query, "grad_query", {s.roots, s.heads, s.width});
  float* gf = nullptr;
  if (grad_feat) {
    check_shape(*grad_feat, "grad_feat", {s.roots, s.paths, s.width});
    gf = writeable(*grad_feat, "grad_feat").mutable_data();
  }
  float* gq = writeable(grad_query, "grad_query").mutable_data();
  const float* dp = drop ? drop->data() : nullptr;
  const float* gw = grad_weight ? grad_weight->data() : nullptr;
  const auto* m = reinterpret_cast<const uint8_t*>(mask.data());
  py::gil_scoped_release release;
  path_attention_backward(s, feat.data(), query.data(), m, dp, prob.data(), grad_agg.data(),
                          gw, gf, gq, num_threads);
}

// Exact reduction of w * dt (same shapes, float64) for the torch path's large phases.
py::tuple reduce_phases_py(const CArray<double>& w, const CArray<double>& dt) {
  check_1d(w, "w");
  check_1d(dt, "dt");
  if (w.size() != dt.size()) throw InputError("w and dt must have the same length");
  const int64_t n = w.size();
  py::array_t<int64_t> quadrant(n);
  py::array_t<double> y(n);
  int64_t* q = quadrant.mutable_data();
  double* yp = y.mutable_data();
  {
    py::gil_scoped_release release;
    reduce_phases(w.data(), dt.data(), n, q, yp);
  }
  return py::make_tuple(quadrant, y);
}

// ---------------------------------------------------------------- streaming inserts
// Appending interactions to a built CSR (append.h), in a block of its own.

void append_rows(TCSR& g, const CArray<int64_t>& src, const CArray<int64_t>& dst,
                 const CArray<double>& ts) {
  check_edge_arrays(src, dst, ts);
  // Small chunks keep the GIL: releasing and retaking it costs more than they do.
  std::unique_ptr<py::gil_scoped_release> release;
  if (src.size() >= 1024) release = std::make_unique<py::gil_scoped_release>();
  std::unique_lock<std::shared_mutex> lock(*g.mutex);
  append_edges(g, src.data(), dst.data(), ts.data(), src.size());
}

void append_row(TCSR& g, int64_t src, int64_t dst, double ts) {
  std::unique_lock<std::shared_mutex> lock(*g.mutex);
  append_edges(g, &src, &dst, &ts, 1);
}

void bind_append(py::module_& m) {
  m.def("append_edges", &append_rows, py::arg("csr"), py::arg("src"), py::arg("dst"),
        py::arg("ts"),
        "Append rows (src, dst, ts) to the CSR as its next edge ids; times must be >= its\n"
        "latest time.  Checks every row before changing anything.");
  m.def("append_edge", &append_row, py::arg("csr"), py::arg("src"), py::arg("dst"),
        py::arg("ts"), "Append one row (the fast path for one event at a time).");
  m.def("compact_csr",
        [](TCSR& g) {
          py::gil_scoped_release release;
          std::unique_lock<std::shared_mutex> lock(*g.mutex);
          compact(g, 0);
        },
        py::arg("csr"), "Repack the CSR's lists without spare slots (the layout of a build).");
  m.def("csr_layout",
        [](const TCSR& g) {
          auto lock = read_lock(g);
          py::dict d;
          d["live_entries"] = g.live_entries;
          d["pool_entries"] = static_cast<int64_t>(g.entries.size());
          d["pool_capacity_entries"] = static_cast<int64_t>(g.entries.capacity());
          d["relocations"] = g.relocations;
          d["compactions"] = g.compactions;
          d["latest_time"] = g.latest_time;
          return d;
        },
        py::arg("csr"), "Pool statistics: live entries, pool size and capacity, moves, repacks.");
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "tbdfs-dgl's C++ temporal sampler (numpy in, numpy out; no torch)";

  py::class_<TCSR, std::shared_ptr<TCSR>>(m, "TCSR")
      .def_static("build", &build, py::arg("src"), py::arg("dst"), py::arg("ts"),
                  py::arg("num_nodes"), py::arg("directed") = false)
      .def_static("from_arrays", &from_arrays, py::arg("num_nodes"), py::arg("num_edges"),
                  py::arg("directed"), py::arg("indptr"), py::arg("nbr"), py::arg("row"),
                  py::arg("ts"), py::arg("twin"), py::arg("src"), py::arg("dst"))
      .def_static("map_saved", &map_saved, py::arg("num_nodes"), py::arg("num_edges"),
                  py::arg("directed"), py::arg("start"), py::arg("degree"), py::arg("entries"),
                  py::arg("src"), py::arg("dst"),
                  "A CSR viewing a saved graph's arrays, mapped read-only: each argument is "
                  "(path, data offset, count).  Checked like an unpickled CSR.")
      .def_property_readonly("mapped",
                             [](const TCSR& g) {
                               auto lock = read_lock(g);
                               return g.mapped();
                             },
                             "Whether arrays view a mapped file (shared with other processes).")
      .def("own_storage",
           [](TCSR& g) {
             py::gil_scoped_release release;
             std::unique_lock<std::shared_mutex> lock(*g.mutex);
             g.own_storage();
           },
           "Copy mapped arrays into this process's memory.")
      .def_readonly("num_nodes", &TCSR::num_nodes)
      .def_readonly("num_edges", &TCSR::num_edges)
      .def_readonly("directed", &TCSR::directed)
      .def_readonly("max_degree", &TCSR::max_degree)
      .def_property_readonly("nbytes",
                             [](const TCSR& g) {
                               auto lock = read_lock(g);
                               return g.nbytes();
                             })
      .def("arrays", &packed_arrays,
           "Read-only arrays of the CSR in its packed layout (a snapshot: appends do not "
           "change them).")
      .def("input_edges", &input_edges, "(src, dst, ts) in input-row order.")
      .def("validate", [](const TCSR& g) {
        py::gil_scoped_release release;
        auto lock = read_lock(g);
        g.validate();
      });

  m.def("cached_bytes", &block_cache::cached_bytes,
        "Bytes of output blocks parked for reuse by later batches.");
  m.def("trim_cache", &block_cache::trim, "Free every output block parked for reuse.");
  m.def("estimate_batch_bytes",
        [](const TCSR& g, std::vector<int64_t> fanouts, int64_t num_roots, bool replace,
           bool with_paths) {
          auto lock = read_lock(g);
          const BatchEstimate e = estimate_batch(g, fanouts, num_roots, replace, with_paths);
          return py::make_tuple(e.tree_bytes, e.path_bytes, e.instances, e.path_slots);
        },
        py::arg("csr"), py::arg("fanouts"), py::arg("num_roots"), py::arg("replace"),
        py::arg("with_paths") = true,
        "Upper bound on a batch's output: (tree_bytes, path_bytes, instances, path_slots).");
  m.def("physical_memory_bytes", &physical_memory_bytes, "This machine's physical memory.");
  m.def("graph_build_bytes", &graph_build_bytes, py::arg("num_nodes"), py::arg("num_edges"),
        py::arg("directed"), "Peak bytes of building a CSR of these sizes.");
  m.def("time_encode", &time_encode_py, py::arg("dt"), py::arg("weight"), py::arg("scale"),
        py::arg("out").noconvert(), py::arg("num_threads") = 1,
        "Write scale * [cos(w dt), sin(w dt)] (interleaved) for every dt into out [n, 2d].");
  m.def("time_encode_phase", &time_encode_phase_py, py::arg("dt"), py::arg("weight"),
        py::arg("bias_cos"), py::arg("bias_sin"), py::arg("cos_out").noconvert(),
        py::arg("sin_out").noconvert(), py::arg("num_threads") = 1,
        "Write cos(w dt + b) into cos_out [n, d] and sin(w dt + b) into sin_out.");
  m.def("leaf_merge_forward", &leaf_merge_forward_py, py::arg("root").noconvert(),
        py::arg("parent").noconvert(), py::arg("alpha").noconvert(),
        py::arg("beta").noconvert(), py::arg("rows"), py::arg("index"),
        py::arg("seed"), py::arg("keep"), py::arg("k"),
        py::arg("out").noconvert(), py::arg("num_threads") = 1,
        "The path encoder's last hop and merge layer (csrc/leaf_merge.h) into out [N, W];\n"
        "dropout (keep probability keep) drawn from seed, none when seed is None.");
  m.def("dropout_keep_mask", &dropout_keep_mask_py, py::arg("seed"), py::arg("keep"),
        py::arg("out").noconvert(), py::arg("num_threads") = 1,
        "The 0/1 keep mask [rows, width] leaf_merge_forward draws from seed (dropout_bits.h).");
  m.def("leaf_merge_backward", &leaf_merge_backward_py, py::arg("grad_out").noconvert(),
        py::arg("out").noconvert(), py::arg("root").noconvert(),
        py::arg("parent").noconvert(), py::arg("alpha").noconvert(),
        py::arg("beta").noconvert(), py::arg("rows"), py::arg("index"), py::arg("dropout"),
        py::arg("scale"), py::arg("k"), py::arg("grad_root").noconvert(),
        py::arg("grad_parent").noconvert(), py::arg("grad_alpha").noconvert(),
        py::arg("grad_beta").noconvert(), py::arg("grad_rows"), py::arg("num_threads") = 1,
        "Gradients of leaf_merge_forward (grad_rows zeroed by the caller).");
  m.def("gathered_scores_forward", &gathered_scores_forward_py, py::arg("query"),
        py::arg("rows"), py::arg("index"), py::arg("scores").noconvert(),
        py::arg("num_threads") = 1,
        "scores[p, m] = sum_i query_i[p's root, m] . rows_i[index_i[p]] (gathered_scores.h).");
  m.def("gathered_scores_backward", &gathered_scores_backward_py, py::arg("query"),
        py::arg("rows"), py::arg("index"), py::arg("grad_scores").noconvert(),
        py::arg("grad_query"), py::arg("grad_rows"), py::arg("num_threads") = 1,
        "Gradients of gathered_scores_forward (grad_rows zeroed by the caller; None skips).");
  m.def("path_attention_forward", &path_attention_forward_py, py::arg("feat").noconvert(),
        py::arg("query").noconvert(), py::arg("mask").noconvert(),
        py::arg("drop").noconvert(), py::arg("prob").noconvert(),
        py::arg("weight").noconvert(), py::arg("agg").noconvert(),
        py::arg("num_threads") = 1,
        "Attention of each root's query over its paths (csrc/path_attention.h).");
  m.def("path_attention_backward", &path_attention_backward_py,
        py::arg("feat").noconvert(), py::arg("query").noconvert(),
        py::arg("mask").noconvert(), py::arg("drop").noconvert(),
        py::arg("prob").noconvert(), py::arg("grad_agg").noconvert(),
        py::arg("grad_weight").noconvert(), py::arg("grad_feat").noconvert(),
        py::arg("grad_query").noconvert(), py::arg("num_threads") = 1,
        "Gradients of path_attention_forward (grad_feat None: not wanted).");
  m.def("simd_isa", &simd::isa,
        "The instruction set the float kernels run: 'avx2' or 'baseline' (see csrc/simd.h;\n"
        "TBDFS_SIMD=baseline forces the baseline).");
  m.def("reduce_phases", &reduce_phases_py, py::arg("w"), py::arg("dt"),
        "Exact w * dt = quadrant * pi/2 + y (quadrant in 0..3, |y| <= pi/4), elementwise.");
  py::enum_<Strategy>(m, "Strategy",
                      "How each destination picks its neighbours among its eligible edges.")
      .value("RECENT", Strategy::kRecent, "the k latest eligible edges (all when fewer)")
      .value("UNIFORM", Strategy::kUniform,
             "k distinct eligible edges uniformly at random (all when fewer)")
      .value("UNIFORM_REPLACE", Strategy::kUniformReplace,
             "k eligible edges uniformly at random, with replacement");
  m.def("sample", &sample, py::arg("csr"), py::arg("nodes"), py::arg("times"),
        py::arg("fanouts"), py::arg("strategy"), py::arg("strict"),
        py::arg("seed"), py::arg("stream"), py::arg("num_threads"), py::arg("with_paths") = true,
        py::arg("with_tables") = false, py::arg("pad_roots") = 0,
        py::arg("eid_map") = py::none(),
        "Sample an L-layer temporal tree; returns (hops, paths, tables) as numpy arrays\n"
        "(paths / tables None unless asked for; tables per hop: nbr, mask, dt, eid).\n"
        "pad_roots > 0 (tables, no paths): tables and source arrays grown to their largest\n"
        "shapes for that many roots; eid_map: report eid_map[e] for each edge e.");

  bind_append(m);
}
