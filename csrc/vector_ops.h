// Short loops over contiguous float rows, written so that the compiler vectorises them.
#pragma once

#include <cstdint>

namespace tbdfs {
namespace vec {

// y += a * x
inline void axpy(float a, const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] += a * x[j];
}

// x . y with eight partial sums in a fixed order: vectorisable (one running sum is a
// serial chain the compiler may not reorder), and the same result wherever it runs.
inline float dot(const float* __restrict x, const float* __restrict y, int64_t n) {
  float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l) acc[l] += x[j + l] * y[j + l];
  for (; j < n; ++j) acc[j & 7] += x[j] * y[j];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace vec
}  // namespace tbdfs
