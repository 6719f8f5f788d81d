#include "time_encode.h"

#include <cstring>

#include "parallel.h"

namespace tbdfs {
namespace {

constexpr double kInvHalfPi = 0.63661977236758134308;  // 2 / pi
// pi/2 = kHalfPi1 + kHalfPi2 with 30 significant bits in kHalfPi1, so that q * kHalfPi1 is
// exact for |q| < 2^23 (phases to ~1e7 rad); beyond, the error stays near ulp(phase), as
// for any double reduction (Cody-Waite).
constexpr double kHalfPi1 = 1.5707963276654482;
constexpr double kHalfPi2 = -8.705515695504166e-10;
// Adding then subtracting 1.5 * 2^52 rounds a double with |x| < 2^51 to the nearest
// integer (ties to even) with plain arithmetic, which vectorises where rint may not.
constexpr double kRound = 6755399441055744.0;

constexpr int64_t kBlock = 64;  // frequencies per inner block (contiguous, vectorised)

// Rows [begin, end): each phase is reduced to [-pi/4, pi/4] plus a quadrant, then float
// polynomials (Cephes' sinf/cosf minimax coefficients, accurate on that interval) give
// cosine and sine, written interleaved.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void encode_rows(const double* __restrict dt, int64_t begin, int64_t end,
                 const double* __restrict w, int64_t d, float scale, float* __restrict out) {
  float cos_buf[kBlock], sin_buf[kBlock];
  for (int64_t i = begin; i < end; ++i) {
    const double t = dt[i];
    float* __restrict row = out + i * 2 * d;
    for (int64_t k0 = 0; k0 < d; k0 += kBlock) {
      const int64_t m = d - k0 < kBlock ? d - k0 : kBlock;
      for (int64_t j = 0; j < m; ++j) {
        const double phase = t * w[k0 + j];
        const double shifted = phase * kInvHalfPi + kRound;
        const double q = shifted - kRound;  // nearest multiple of pi/2, as a count
        // The low mantissa bits of `shifted` hold 2^51 + q: its last two bits are q mod 4.
        int64_t bits;
        std::memcpy(&bits, &shifted, sizeof bits);
        const int64_t quadrant = bits & 3;
        const float y = static_cast<float>((phase - q * kHalfPi1) - q * kHalfPi2);
        const float z = y * y;
        const float s = y + y * z * (-1.6666654611e-1f + z * (8.3321608736e-3f +
                                                               z * -1.9515295891e-4f));
        const float c = 1.0f - 0.5f * z + z * z * (4.166664568298827e-2f +
                                                   z * (-1.388731625493765e-3f +
                                                        z * 2.443315711809948e-5f));
        // (cos, sin) of y + quadrant * pi/2.
        const bool swap = quadrant & 1;
        const float cos_sign = (quadrant == 1 || quadrant == 2) ? -scale : scale;
        const float sin_sign = quadrant >= 2 ? -scale : scale;
        cos_buf[j] = cos_sign * (swap ? s : c);
        sin_buf[j] = sin_sign * (swap ? c : s);
      }
      for (int64_t j = 0; j < m; ++j) {
        row[2 * (k0 + j)] = cos_buf[j];
        row[2 * (k0 + j) + 1] = sin_buf[j];
      }
    }
  }
}

}  // namespace

void time_encode(const double* dt, int64_t n, const double* w, int64_t d, float scale,
                 float* out, int num_threads) {
  // About 2d floats written per row: chunks of a few thousand rows amortise a wake-up.
  const int64_t min_chunk = d > 0 ? (1 << 16) / d + 1 : n + 1;
  parallel_for(n, num_threads, min_chunk, [&](int64_t begin, int64_t end) {
    encode_rows(dt, begin, end, w, d, scale, out);
  });
}

}  // namespace tbdfs
