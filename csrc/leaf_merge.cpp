#include "leaf_merge.h"

#include <cstring>
#include <vector>

#include "dropout_bits.h"
#include "parallel.h"
#include "vector_ops.h"

namespace tbdfs {
namespace {

using vec::axpy;
using vec::dot;

// Roots per parallel chunk: a root's leaves (and its parents) belong to one chunk, so the
// per-root and per-parent sums need no synchronisation.
constexpr int64_t kMinRoots = 16;

// The gradient reaching the pre-activation of leaf p: grad where the output passed the
// ReLU (and dropout: a dropped entry is 0), times the dropout scale.
// The selection is a bit mask, not a branch or a conditional move: on half-positive
// outputs a branch mispredicts every other entry (measured 9x slower), and the compiler
// vectorises neither that nor a multiply by the comparison.
inline void passed_grad(const float* __restrict grad, const float* __restrict out,
                        float scale, float* __restrict g, int64_t W) {
  for (int64_t j = 0; j < W; ++j) {
    const float gs = grad[j] * scale;
    uint32_t bits;
    std::memcpy(&bits, &gs, sizeof bits);
    bits &= out[j] > 0.0f ? 0xFFFFFFFFu : 0u;
    std::memcpy(&g[j], &bits, sizeof bits);
  }
}

}  // namespace

void leaf_merge_forward(const LeafShape& s, const float* root, const float* parent,
                        const float* alpha, const float* beta, const LeafRows& parts,
                        const LeafDropout& drop, float* out, int num_threads) {
  const int64_t H = s.heads, W = s.width, per_root = s.per_root, k = s.k;
  const size_t num_parts = parts.rows.size();
  parallel_for(s.num_roots, num_threads, kMinRoots, [&](int64_t b0, int64_t b1) {
    std::vector<uint16_t> lanes(drop.on ? static_cast<size_t>(dropout::lanes_per_row(W)) : 0);
    for (int64_t p = b0 * per_root; p < b1 * per_root; ++p) {
      float* __restrict o = out + p * W;
      const float* __restrict r = root + (p / per_root) * W;
      for (int64_t j = 0; j < W; ++j) o[j] = r[j];
      const int64_t q = p / k;
      for (int64_t m = 0; m < H; ++m) {
        axpy(alpha[p * H + m], parent + (q * H + m) * W, o, W);
        const float bm = beta[p * H + m];
        for (size_t i = 0; i < num_parts; ++i)
          axpy(bm, parts.rows[i] + (parts.index[i][p] * H + m) * W, o, W);
      }
      // ReLU as torch's (a NaN stays NaN: a diverging model must not be masked here),
      // then the dropout; branch-free (a data-dependent branch per entry cost ~4x the
      // whole pass).
      for (int64_t j = 0; j < W; ++j) o[j] = o[j] < 0.0f ? 0.0f : o[j];
      if (drop.on) {
        dropout::draw_lanes(drop.seed, p, W, lanes.data());
        dropout::apply_keep(lanes.data(), W, drop.threshold, drop.scale, o);
      }
    }
  });
}

void leaf_dropout_mask(const LeafDropout& drop, int64_t rows, int64_t W, uint8_t* mask,
                       int num_threads) {
  const int32_t t = static_cast<int32_t>(drop.threshold);
  const uint64_t seed = drop.seed;
  parallel_for(rows, num_threads, 256, [=](int64_t r0, int64_t r1) {
    // By value: a byte store may alias anything, so through the captures the compiler
    // would reload every captured value after each store (measured 3.5x slower).
    std::vector<uint16_t> lanes(static_cast<size_t>(dropout::lanes_per_row(W)));
    uint16_t* __restrict ln = lanes.data();
    for (int64_t r = r0; r < r1; ++r) {
      dropout::draw_lanes(seed, r, W, ln);
      uint8_t* __restrict m = mask + r * W;
      for (int64_t j = 0; j < W; ++j) m[j] = static_cast<uint8_t>(dropout::kept(ln[j], t));
    }
  });
}

void leaf_merge_backward(const LeafShape& s, const float* grad_out, const float* out,
                         const float* parent, const float* alpha, const float* beta,
                         const LeafRows& parts, bool dropout, float scale, float* grad_root,
                         float* grad_parent, float* grad_alpha, float* grad_beta,
                         const std::vector<float*>& grad_rows, int num_threads) {
  const int64_t H = s.heads, W = s.width, per_root = s.per_root, k = s.k;
  const int64_t n_par = per_root / k;
  const float sc = dropout ? scale : 1.0f;
  const size_t num_parts = parts.rows.size();
  // Per root: its sum, its parents' sums, the leaves' alpha and beta gradients.
  parallel_for(s.num_roots, num_threads, kMinRoots, [&](int64_t b0, int64_t b1) {
    std::vector<float> g(W);
    for (int64_t b = b0; b < b1; ++b) {
      float* __restrict gr = grad_root + b * W;
      for (int64_t j = 0; j < W; ++j) gr[j] = 0.0f;
      for (int64_t q = b * n_par; q < (b + 1) * n_par; ++q)
        for (int64_t j = 0; j < H * W; ++j) grad_parent[q * H * W + j] = 0.0f;
      for (int64_t p = b * per_root; p < (b + 1) * per_root; ++p) {
        passed_grad(grad_out + p * W, out + p * W, sc, g.data(), W);
        for (int64_t j = 0; j < W; ++j) gr[j] += g[j];
        const int64_t q = p / k;
        for (int64_t m = 0; m < H; ++m) {
          const float* pq = parent + (q * H + m) * W;
          grad_alpha[p * H + m] = dot(g.data(), pq, W);
          axpy(alpha[p * H + m], g.data(), grad_parent + (q * H + m) * W, W);
          float gb = 0.0f;
          for (size_t i = 0; i < num_parts; ++i)
            gb += dot(g.data(), parts.rows[i] + (parts.index[i][p] * H + m) * W, W);
          grad_beta[p * H + m] = gb;
        }
      }
    }
  });
  // The rows' gradients: leaves of any root meet in a row, so each part takes every leaf
  // in order (parts write disjoint memory).
  parallel_for(static_cast<int64_t>(num_parts), num_threads, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> g(W);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t* index = parts.index[static_cast<size_t>(i)];
      float* rows = grad_rows[static_cast<size_t>(i)];
      for (int64_t p = 0; p < s.leaves(); ++p) {
        bool any = false;
        for (int64_t m = 0; m < H; ++m) any |= beta[p * H + m] != 0.0f;
        if (!any) continue;  // absent leaves: nothing to add
        passed_grad(grad_out + p * W, out + p * W, sc, g.data(), W);
        for (int64_t m = 0; m < H; ++m)
          axpy(beta[p * H + m], g.data(), rows + (index[p] * H + m) * W, W);
      }
    }
  });
}

}  // namespace tbdfs
