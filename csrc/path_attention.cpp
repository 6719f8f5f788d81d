#include "path_attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "parallel.h"
#include "simd.h"
#include "vector_ops.h"

namespace tbdfs {

#define TBDFS_SIMD_LOOPS "path_attention_loops.inc"
#include "simd_variants.inc"

void path_attention_forward(const PathAttnShape& s, const float* feat, const float* query,
                            const uint8_t* mask, const float* drop, float* prob,
                            float* weight, float* agg, int num_threads) {
  TBDFS_SIMD_CALL(path_attention_forward, s, feat, query, mask, drop, prob, weight, agg,
                  num_threads);
}

void path_attention_backward(const PathAttnShape& s, const float* feat, const float* query,
                             const uint8_t* mask, const float* drop, const float* prob,
                             const float* grad_agg, const float* grad_weight,
                             float* grad_feat, float* grad_query, int num_threads) {
  TBDFS_SIMD_CALL(path_attention_backward, s, feat, query, mask, drop, prob, grad_agg,
                  grad_weight, grad_feat, grad_query, num_threads);
}

}  // namespace tbdfs
