#include "path_mix.h"

#include "parallel.h"

namespace tbdfs {
namespace {

// Rows of a few KiB each: chunks of ~256 KiB of input amortise a helper's wake-up.
int64_t min_chunk(int64_t L, int64_t W) {
  const int64_t row = L * W > 0 ? L * W : 1;
  return (1 << 16) / row + 1;
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define TBDFS_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TBDFS_CLONES
#endif

TBDFS_CLONES
void mix_rows(const float* __restrict a, const float* __restrict x, int64_t begin,
              int64_t end, int64_t L, int64_t H, int64_t W, float* __restrict u) {
  for (int64_t n = begin; n < end; ++n) {
    const float* an = a + n * L * H;
    const float* xn = x + n * L * W;
    float* un = u + n * H * W;
    for (int64_t h = 0; h < H; ++h) {
      float* __restrict uh = un + h * W;
      const float a0 = an[h];
      const float* __restrict x0 = xn;
      for (int64_t w = 0; w < W; ++w) uh[w] = a0 * x0[w];
      for (int64_t l = 1; l < L; ++l) {
        const float al = an[l * H + h];
        const float* __restrict xl = xn + l * W;
        for (int64_t w = 0; w < W; ++w) uh[w] += al * xl[w];
      }
    }
  }
}

TBDFS_CLONES
void mix_backward_rows(const float* __restrict a, const float* __restrict x,
                       const float* __restrict gu, int64_t begin, int64_t end, int64_t L,
                       int64_t H, int64_t W, float* __restrict ga, float* __restrict gx) {
  for (int64_t n = begin; n < end; ++n) {
    const float* an = a + n * L * H;
    const float* xn = x + n * L * W;
    const float* gn = gu + n * H * W;
    for (int64_t l = 0; l < L; ++l) {
      const float* __restrict xl = xn + l * W;
      if (ga) {
        for (int64_t h = 0; h < H; ++h) {
          const float* __restrict gh = gn + h * W;
          // Sixteen independent partial sums: a vectorisable dot product whose order of
          // additions is fixed (no -ffast-math), so results never depend on the machine's
          // thread count.
          float part[16] = {};
          int64_t w = 0;
          for (; w + 16 <= W; w += 16)
            for (int j = 0; j < 16; ++j) part[j] += xl[w + j] * gh[w + j];
          for (int j = 0; w < W; ++w, ++j) part[j] += xl[w] * gh[w];
          float dot = 0.0f;
          for (int j = 0; j < 16; ++j) dot += part[j];
          ga[(n * L + l) * H + h] = dot;
        }
      }
      if (gx) {
        float* __restrict gxl = gx + (n * L + l) * W;
        const float a0 = an[l * H];
        for (int64_t w = 0; w < W; ++w) gxl[w] = a0 * gn[w];
        for (int64_t h = 1; h < H; ++h) {
          const float ah = an[l * H + h];
          const float* __restrict gh = gn + h * W;
          for (int64_t w = 0; w < W; ++w) gxl[w] += ah * gh[w];
        }
      }
    }
  }
}

}  // namespace

void path_mix(const float* a, const float* x, int64_t num, int64_t L, int64_t H, int64_t W,
              float* u, int num_threads) {
  if (L == 0) {  // no hop: nothing mixed
    for (int64_t i = 0; i < num * H * W; ++i) u[i] = 0.0f;
    return;
  }
  parallel_for(num, num_threads, min_chunk(L, W), [&](int64_t begin, int64_t end) {
    mix_rows(a, x, begin, end, L, H, W, u);
  });
}

void path_mix_backward(const float* a, const float* x, const float* grad_u, int64_t num,
                       int64_t L, int64_t H, int64_t W, float* grad_a, float* grad_x,
                       int num_threads) {
  parallel_for(num, num_threads, min_chunk(L, W), [&](int64_t begin, int64_t end) {
    mix_backward_rows(a, x, grad_u, begin, end, L, H, W, grad_a, grad_x);
  });
}

}  // namespace tbdfs
