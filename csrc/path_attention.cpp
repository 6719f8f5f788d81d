#include "path_attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "parallel.h"
#include "vector_ops.h"

namespace tbdfs {
namespace {

using vec::axpy;
using vec::dot;

constexpr int64_t kMinRoots = 16;  // roots per parallel chunk


}  // namespace

void path_attention_forward(const PathAttnShape& s, const float* feat, const float* query,
                            const uint8_t* mask, const float* drop, float* prob,
                            float* weight, float* agg, int num_threads) {
  const int64_t P = s.paths, H = s.heads, D = s.width;
  parallel_for(s.roots, num_threads, kMinRoots, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const float* f = feat + b * P * D;
      const float* q = query + b * H * D;
      const uint8_t* m = mask + b * P;
      float* pr = prob + b * H * P;
      // Scores, path by path: each path's row is read once for all heads.
      bool any = false;
      for (int64_t p = 0; p < P; ++p) {
        if (!m[p]) continue;
        any = true;
        for (int64_t h = 0; h < H; ++h) pr[h * P + p] = dot(f + p * D, q + h * D, D);
      }
      float* a = agg + b * H * D;
      for (int64_t j = 0; j < H * D; ++j) a[j] = 0.0f;
      if (!any) {  // no path: no weight, a zero sum (the aggregator zeroes h_DFS)
        for (int64_t j = 0; j < H * P; ++j) pr[j] = 0.0f;
        if (weight)
          for (int64_t j = 0; j < H * P; ++j) weight[b * H * P + j] = 0.0f;
        continue;
      }
      // Softmax over the present paths, as torch's: subtract the max, exponentiate,
      // divide by the sum.  A NaN score makes its head's row NaN, as in torch.
      for (int64_t h = 0; h < H; ++h) {
        float* row = pr + h * P;
        float mx = -std::numeric_limits<float>::infinity();
        bool nan = false;
        for (int64_t p = 0; p < P; ++p)
          if (m[p]) {
            nan |= std::isnan(row[p]);
            mx = row[p] > mx ? row[p] : mx;
          }
        float sum = 0.0f;
        for (int64_t p = 0; p < P; ++p) {
          const float e = m[p] ? std::exp(row[p] - mx) : 0.0f;
          row[p] = e;
          sum += e;
        }
        const float inv = nan ? std::numeric_limits<float>::quiet_NaN() : 1.0f / sum;
        for (int64_t p = 0; p < P; ++p) row[p] = m[p] ? row[p] * inv : 0.0f;
      }
      // The weighted sums; the root's rows are still in cache.
      for (int64_t p = 0; p < P; ++p) {
        if (!m[p]) continue;
        for (int64_t h = 0; h < H; ++h) {
          const float w = drop ? pr[h * P + p] * drop[(b * H + h) * P + p] : pr[h * P + p];
          if (weight) weight[(b * H + h) * P + p] = w;
          axpy(w, f + p * D, a + h * D, D);
        }
      }
      if (weight)
        for (int64_t p = 0; p < P; ++p)
          if (!m[p])
            for (int64_t h = 0; h < H; ++h) weight[(b * H + h) * P + p] = 0.0f;
    }
  });
}

void path_attention_backward(const PathAttnShape& s, const float* feat, const float* query,
                             const uint8_t* mask, const float* drop, const float* prob,
                             const float* grad_agg, const float* grad_weight,
                             float* grad_feat, float* grad_query, int num_threads) {
  const int64_t P = s.paths, H = s.heads, D = s.width;
  parallel_for(s.roots, num_threads, kMinRoots, [&](int64_t b0, int64_t b1) {
    std::vector<float> gs(static_cast<size_t>(H * P));  // the scores' gradients of a root
    for (int64_t b = b0; b < b1; ++b) {
      const float* f = feat + b * P * D;
      const float* q = query + b * H * D;
      const float* ga = grad_agg + b * H * D;
      const uint8_t* m = mask + b * P;
      const float* pr = prob + b * H * P;
      // The weights' gradients, then through the dropout factor to the probabilities.
      for (int64_t p = 0; p < P; ++p) {
        for (int64_t h = 0; h < H; ++h) {
          float g = 0.0f;
          if (m[p]) {
            g = dot(f + p * D, ga + h * D, D);
            if (grad_weight) g += grad_weight[(b * H + h) * P + p];
            if (drop) g *= drop[(b * H + h) * P + p];
          }
          gs[h * P + p] = g;
        }
      }
      // Softmax backward: gs = prob * (g - sum_p prob * g); 0 on absent paths.
      for (int64_t h = 0; h < H; ++h) {
        float* g = gs.data() + h * P;
        const float* y = pr + h * P;
        float c = 0.0f;
        for (int64_t p = 0; p < P; ++p) c += m[p] ? y[p] * g[p] : 0.0f;
        for (int64_t p = 0; p < P; ++p) g[p] = m[p] ? y[p] * (g[p] - c) : 0.0f;
      }
      // grad_query[h] = sum_p gs[h, p] feat[p];
      // grad_feat[p] = sum_h weight[h, p] grad_agg[h] + gs[h, p] query[h].
      float* gq = grad_query + b * H * D;
      for (int64_t j = 0; j < H * D; ++j) gq[j] = 0.0f;
      for (int64_t p = 0; p < P; ++p) {
        float* gf = grad_feat ? grad_feat + (b * P + p) * D : nullptr;
        if (gf)
          for (int64_t j = 0; j < D; ++j) gf[j] = 0.0f;
        if (!m[p]) continue;
        for (int64_t h = 0; h < H; ++h) {
          const float g = gs[h * P + p];
          axpy(g, f + p * D, gq + h * D, D);
          if (gf) {
            const float w = drop ? pr[h * P + p] * drop[(b * H + h) * P + p] : pr[h * P + p];
            axpy(w, ga + h * D, gf, D);
            axpy(g, q + h * D, gf, D);
          }
        }
      }
    }
  });
}

}  // namespace tbdfs
