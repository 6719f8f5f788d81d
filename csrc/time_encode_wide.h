// The time encoding's reduction for large phases (2^29 <= |w dt| < 2^61), vectorised.
#pragma once

#include <cstdint>

namespace tbdfs {

// Phases below this take reduce_block_wide; beyond, the scalar Payne-Hanek reduction.
constexpr double kWidePhase = 0x1p61;

// For j < m: w[j] * t = quadrant[j] * pi/2 + y[j] exactly (to ~2^-42 rad), quadrant in
// 0..3, for |w[j] * t| < kWidePhase.  t_hi/t_lo and w_hi/w_lo are the 26 + 27-bit splits of
// t and w (see time_encode.cpp).  Compiled without floating-point contraction: the
// two-products and Sterbenz subtractions need each product rounded on its own.
void reduce_block_wide(double t, double t_hi, double t_lo, const double* w, const double* w_hi,
                       const double* w_lo, int64_t m, float* y, int32_t* quadrant);

}  // namespace tbdfs
