#include "path_attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "parallel.h"
#include "simd.h"
#include "vector_ops.h"

namespace tbdfs {

namespace baseline {
#include "path_attention_loops.inc"
}  // namespace baseline

#if TBDFS_SIMD_AVX2
#pragma GCC push_options
#pragma GCC target("avx2")
namespace avx2 {
#include "path_attention_loops.inc"
}  // namespace avx2
#pragma GCC pop_options
#endif

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
