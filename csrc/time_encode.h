// The harmonic time encoding Phi(dt) = scale * [cos(w_k dt), sin(w_k dt)]_k, on the CPU.
#pragma once

#include <cstdint>

namespace tbdfs {

// out[i, 2k] = scale * cos(w[k] * dt[i]), out[i, 2k + 1] = scale * sin(w[k] * dt[i]) for
// i < n, k < d (out is [n, 2d], row-major).  The phase is the exact product w[k] * dt[i],
// reduced modulo pi/2 exactly for any finite float64 inputs (csrc/phase_reduce.h); sine
// and cosine are then evaluated in float on the reduced angle, so the result is within a
// few float ulps of the exact value at any magnitude (NaN where w * dt overflows).
// Elementwise, so the result does not depend on num_threads.
void time_encode(const double* dt, int64_t n, const double* w, int64_t d, float scale,
                 float* out, int num_threads);

// The cos-phase form, cos(w[k] * dt[i] + b[k]): the same exact (cos, sin) of w[k] * dt[i],
// rotated by b[k] (bias_cos = cos(b), bias_sin = sin(b), float), into two planes [n, d]:
// cos_out = cos(w dt + b) and sin_out = sin(w dt + b) (what its gradient needs).
void time_encode_phase(const double* dt, int64_t n, const double* w, const float* bias_cos,
                       const float* bias_sin, int64_t d, float* cos_out, float* sin_out,
                       int num_threads);

// The exact reduction alone, elementwise: w[i] * dt[i] = quadrant[i] * pi/2 + y[i] with
// quadrant in 0..3 and |y| <= pi/4 (for the torch path's large phases).
void reduce_phases(const double* w, const double* dt, int64_t n, int64_t* quadrant, double* y);

}  // namespace tbdfs
