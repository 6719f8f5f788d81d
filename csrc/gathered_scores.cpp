#include "gathered_scores.h"

#include "parallel.h"
#include "simd.h"
#include "vector_ops.h"

namespace tbdfs {

#define TBDFS_SIMD_LOOPS "gathered_scores_loops.inc"
#include "simd_variants.inc"

void gathered_scores_forward(int64_t num_roots, int64_t per_root, int64_t heads,
                             const ScoreParts& parts, float* scores, int num_threads) {
  TBDFS_SIMD_CALL(gathered_scores_forward, num_roots, per_root, heads, parts, scores,
                  num_threads);
}

void gathered_scores_backward(int64_t num_roots, int64_t per_root, int64_t heads,
                              const ScoreParts& parts, const float* grad_scores,
                              const std::vector<float*>& grad_query,
                              const std::vector<float*>& grad_rows, int num_threads) {
  TBDFS_SIMD_CALL(gathered_scores_backward, num_roots, per_root, heads, parts, grad_scores,
                  grad_query, grad_rows, num_threads);
}

}  // namespace tbdfs
