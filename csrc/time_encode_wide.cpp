#include "time_encode_wide.h"

#include <cmath>
#include <cstring>

#include "phase_reduce.h"

namespace tbdfs {

namespace {

using namespace phase;

// kHalfPi split into 25 + 23 significant bits, for an exact q * kHalfPi (two-product).
constexpr double kHalfPiHi = 0x1.921fb5p+0;
constexpr double kHalfPiMid = 0x1.110b46p-26;
// pi/2 - kC1 rounded: q * kTail errs by ~2^-66 rad for the |q| < 2^12 seen here.
constexpr double kTail = 0x1.4442d18469899p-24;

// Nearest integer (ties to even) by adding and subtracting 2^52 with the sign of v: plain
// arithmetic that vectorises, unlike rint/floor without -fno-trapping-math.  From 2^52 on
// every double is an integer already.
inline double round_int(double v) {
  // s = +-2^52 below 2^52, else 0 (a select written as arithmetic: no branch in the loop).
  const double s = std::copysign(0x1p52 * static_cast<double>(std::fabs(v) < 0x1p52), v);
  return (v + s) - s;
}


}  // namespace

// q = rint(p * 2/pi) may be coarse (|q| up to 2^60, ulp up to 2^8), yet p - q * pi/2 is
// exact to ~2^-42 rad: q * kHalfPi is a two-product (h + l), p - h is exact (Sterbenz: h is
// within a factor 2 of p), q * kHalfPiLo and the product error err of p are plain doubles
// of at most 2^9.  The remainder x (|x| < 2^11) is reduced again, the quadrant of q mod 4
// carried in through the rounding constant.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void reduce_block_wide(double t, double t_hi, double t_lo, const double* __restrict w,
                       const double* __restrict w_hi, const double* __restrict w_lo,
                       int64_t m, float* __restrict y, int32_t* __restrict quadrant) {
  for (int64_t j = 0; j < m; ++j) {
    const double p = t * w[j];
    const double err = ((w_hi[j] * t_hi - p) + w_hi[j] * t_lo + w_lo[j] * t_hi) +
                       w_lo[j] * t_lo;
    const double q = round_int(p * kInvHalfPi);
    const double q_hi = high_half(q), q_lo = q - q_hi;
    const double h = q * kHalfPi;
    const double l = ((q_hi * kHalfPiHi - h) + q_hi * kHalfPiMid + q_lo * kHalfPiHi) +
                     q_lo * kHalfPiMid;
    const double x = (((p - h) - l) - q * kHalfPiLo) + err;
    const double base = q - 4.0 * round_int(q * 0.25);  // q mod 4, in -2..2, exact
    // Rounding x * 2/pi + base (base an integer) rounds x * 2/pi and adds base.
    const double shifted = x * kInvHalfPi + (kRound + base);
    const double q2 = (shifted - kRound) - base;
    int64_t bits;
    std::memcpy(&bits, &shifted, sizeof bits);
    y[j] = static_cast<float>((x - q2 * kC1) - q2 * kTail);
    quadrant[j] = static_cast<int32_t>(bits & 3);
  }
}

}  // namespace tbdfs
