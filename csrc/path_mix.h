// Per-path mixing of hop inputs by attention weights: the inner step of the path encoder.
#pragma once

#include <cstdint>

namespace tbdfs {

// u[n, h, :] = sum_l a[n, l, h] * x[n, l, :] for n < num, with a [num, L, H], x [num, L, W]
// and u [num, H, W], all row-major float32.  L and H are small (hops and heads), so this is
// a batch of tiny products that BLAS handles poorly; here each path is one pass.
void path_mix(const float* a, const float* x, int64_t num, int64_t L, int64_t H, int64_t W,
              float* u, int num_threads);

// Gradients of path_mix: grad_a[n, l, h] = x[n, l, :] . grad_u[n, h, :] and
// grad_x[n, l, :] = sum_h a[n, l, h] grad_u[n, h, :].  Either output may be null (skipped).
void path_mix_backward(const float* a, const float* x, const float* grad_u, int64_t num,
                       int64_t L, int64_t H, int64_t W, float* grad_a, float* grad_x,
                       int num_threads);

}  // namespace tbdfs
