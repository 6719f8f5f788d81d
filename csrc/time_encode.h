// The harmonic time encoding Phi(dt) = scale * [cos(w_k dt), sin(w_k dt)]_k, on the CPU.
#pragma once

#include <cstdint>

namespace tbdfs {

// out[i, 2k] = scale * cos(w[k] * dt[i]), out[i, 2k + 1] = scale * sin(w[k] * dt[i]) for
// i < n, k < d (out is [n, 2d], row-major).  The phase is formed and reduced modulo 2*pi in
// double (dt reaches 1e8 s and w 1e-9, where a float phase keeps no correct digit), then
// sine and cosine are evaluated in float on the reduced angle; the result is within a few
// float ulps of the exact value.  Phases must satisfy |w dt| < 2^50 (about 1e15 rad).
// Elementwise, so the result does not depend on num_threads.
void time_encode(const double* dt, int64_t n, const double* w, int64_t d, float scale,
                 float* out, int num_threads);

}  // namespace tbdfs
