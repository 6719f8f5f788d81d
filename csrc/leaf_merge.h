// The path encoder's last hop fused with its merge layer's first linear map, on the CPU.
//
// For leaf p of parent q = p / k and root b = p / per_root (leaves in row-major
// [B, per_root] order, per_root = n * k), with H heads of width-W terms:
//
//   out[p] = dropout(relu(root[b] + sum_m alpha[p, m] * parent[q, m]
//                                 + sum_m beta[p, m] * sum_i rows_i[index_i[p], m]))
//
// where dropout multiplies by scale or 0, as drawn by csrc/dropout_bits.h from a seed for
// row p (no dropout without a seed).  The terms
// are the merge layer's map already applied to the chains' states (parent), to the
// distinct input rows (rows_i) and to the root's own input (root), so no per-leaf matrix
// product is left: tbdfs_dgl/nn/_leaf_merge.py gives the algebra.
#pragma once

#include <cstdint>
#include <vector>

namespace tbdfs {

struct LeafShape {
  int64_t num_roots;  // B
  int64_t per_root;   // leaves per root, n * k
  int64_t k;          // leaves per parent
  int64_t heads;      // H
  int64_t width;      // W
  int64_t leaves() const { return num_roots * per_root; }
};

// Per input part i: its rows [U_i, H, W] and every leaf's row index [N] (checked in range
// by the caller).
struct LeafRows {
  std::vector<const float*> rows;
  std::vector<const int64_t*> index;
};

// Dropout drawn per leaf row (csrc/dropout_bits.h).
struct LeafDropout {
  bool on;
  uint64_t seed;
  uint32_t threshold;  // dropout::keep_threshold(1 - rate)
  float scale;         // 1 / (1 - rate)
};

void leaf_merge_forward(const LeafShape& s, const float* root, const float* parent,
                        const float* alpha, const float* beta, const LeafRows& parts,
                        const LeafDropout& drop, float* out, int num_threads);

// The 0/1 keep mask [rows, W] that leaf_merge_forward draws with `drop` (for tests and for
// the unfused path, so that both draw the same).
void leaf_dropout_mask(const LeafDropout& drop, int64_t rows, int64_t W, uint8_t* mask,
                       int num_threads);

// Gradients from grad_out [N, W] and the forward's out (an entry passed iff out > 0).
// grad_rows[i] must be zeroed [U_i, H, W]; every other output is overwritten.  Each
// output element is summed in a fixed order, so the result does not depend on
// num_threads.
void leaf_merge_backward(const LeafShape& s, const float* grad_out, const float* out,
                         const float* parent, const float* alpha, const float* beta,
                         const LeafRows& parts, bool dropout, float scale, float* grad_root,
                         float* grad_parent, float* grad_alpha, float* grad_beta,
                         const std::vector<float*>& grad_rows, int num_threads);

}  // namespace tbdfs
