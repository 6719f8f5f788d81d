#include "gathered_scores.h"

#include "parallel.h"
#include "vector_ops.h"

namespace tbdfs {

namespace {
constexpr int64_t kMinRoots = 16;  // roots per parallel chunk
}  // namespace

void gathered_scores_forward(int64_t num_roots, int64_t per_root, int64_t H,
                             const ScoreParts& parts, float* scores, int num_threads) {
  const size_t num_parts = parts.rows.size();
  parallel_for(num_roots, num_threads, kMinRoots, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      for (int64_t p = b * per_root; p < (b + 1) * per_root; ++p) {
        for (int64_t m = 0; m < H; ++m) {
          float s = 0.0f;
          for (size_t i = 0; i < num_parts; ++i) {
            const int64_t K = parts.width[i];
            s += vec::dot(parts.query[i] + (b * H + m) * K,
                          parts.rows[i] + parts.index[i][p] * K, K);
          }
          scores[p * H + m] = s;
        }
      }
    }
  });
}

void gathered_scores_backward(int64_t num_roots, int64_t per_root, int64_t H,
                              const ScoreParts& parts, const float* grad_scores,
                              const std::vector<float*>& grad_query,
                              const std::vector<float*>& grad_rows, int num_threads) {
  const size_t num_parts = parts.rows.size();
  // Per root: the query slices' gradients (a root's instances are contiguous).
  parallel_for(num_roots, num_threads, kMinRoots, [&](int64_t b0, int64_t b1) {
    for (size_t i = 0; i < num_parts; ++i) {
      float* gq = grad_query[i];
      if (!gq) continue;
      const int64_t K = parts.width[i];
      for (int64_t b = b0; b < b1; ++b) {
        for (int64_t j = 0; j < H * K; ++j) gq[b * H * K + j] = 0.0f;
        for (int64_t p = b * per_root; p < (b + 1) * per_root; ++p) {
          const float* x = parts.rows[i] + parts.index[i][p] * K;
          for (int64_t m = 0; m < H; ++m)
            vec::axpy(grad_scores[p * H + m], x, gq + (b * H + m) * K, K);
        }
      }
    }
  });
  // The rows' gradients: instances of any root meet in a row, so each part takes every
  // instance in order (parts write disjoint memory).
  parallel_for(static_cast<int64_t>(num_parts), num_threads, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t ii = i0; ii < i1; ++ii) {
      const size_t i = static_cast<size_t>(ii);
      float* gr = grad_rows[i];
      if (!gr) continue;
      const int64_t K = parts.width[i];
      for (int64_t p = 0; p < num_roots * per_root; ++p) {
        const int64_t b = p / per_root;
        float* dst = gr + parts.index[i][p] * K;
        for (int64_t m = 0; m < H; ++m)
          vec::axpy(grad_scores[p * H + m], parts.query[i] + (b * H + m) * K, dst, K);
      }
    }
  });
}

}  // namespace tbdfs
