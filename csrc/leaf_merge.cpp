#include "leaf_merge.h"

#include <cstring>
#include <vector>

#include "dropout_bits.h"
#include "parallel.h"
#include "simd.h"
#include "vector_ops.h"

namespace tbdfs {

#define TBDFS_SIMD_LOOPS "leaf_merge_loops.inc"
#include "simd_variants.inc"

void leaf_merge_forward(const LeafShape& s, const float* root, const float* parent,
                        const float* alpha, const float* beta, const LeafRows& parts,
                        const LeafDropout& drop, float* out, int num_threads) {
  TBDFS_SIMD_CALL(leaf_merge_forward, s, root, parent, alpha, beta, parts, drop, out,
                  num_threads);
}

void leaf_dropout_mask(const LeafDropout& drop, int64_t rows, int64_t W, uint8_t* mask,
                       int num_threads) {
  TBDFS_SIMD_CALL(leaf_dropout_mask, drop, rows, W, mask, num_threads);
}

void leaf_merge_backward(const LeafShape& s, const float* grad_out, const float* out,
                         const float* parent, const float* alpha, const float* beta,
                         const LeafRows& parts, bool dropout, float scale, float* grad_root,
                         float* grad_parent, float* grad_alpha, float* grad_beta,
                         const std::vector<float*>& grad_rows, int num_threads) {
  TBDFS_SIMD_CALL(leaf_merge_backward, s, grad_out, out, parent, alpha, beta, parts, dropout,
                  scale, grad_root, grad_parent, grad_alpha, grad_beta, grad_rows,
                  num_threads);
}

}  // namespace tbdfs
