// Exact argument reduction of a phase w * dt modulo pi/2, for any finite float64 w and dt.
//
// The phase is the exact real product, not the rounded double one: at |w dt| = 2^52 a
// double product is off by up to 0.5 rad, so w * dt is split error-free into p + err
// (two-product), and each part is reduced on its own.  Small parts use a three-constant
// Cody-Waite reduction (exact for |x| < 2^30); large ones Payne-Hanek's reduction with
// 1280 bits of 2/pi.  The result, quadrant plus an offset in [-pi/4, pi/4] (about 1e-16
// rad accurate), is what a float32 sine/cosine needs.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tbdfs::phase {

// x with the low 27 mantissa bits cleared: 26 significant bits, and x - high_half(x) is
// exact with at most 27.  Bit masking (unlike Veltkamp's x * (2^27 + 1) trick) cannot be
// broken by the compiler contracting a * b - c into an fma, which keeps the polynomials'
// fmas.  Products of the halves are exact but for lo * lo (an error near 2^-106 |w dt|).
inline double high_half(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  b &= ~((uint64_t{1} << 27) - 1);
  std::memcpy(&x, &b, sizeof b);
  return x;
}

// pi/2 = kC1 + kC2 + kC3 (+ 2^-99 relative): kC1 and kC2 have 23 significant bits, so
// q * kC1 and q * kC2 are exact for |q| < 2^30.
constexpr double kC1 = 0x1.921fb4p+0;
constexpr double kC2 = 0x1.4442d0p-24;
constexpr double kC3 = 0x1.8469898cc5170p-48;
constexpr double kInvHalfPi = 0x1.45f306dc9c883p-1;  // 2 / pi
constexpr double kHalfPi = 0x1.921fb54442d18p+0;
constexpr double kHalfPiLo = 0x1.1a62633145c07p-54;   // pi/2 - kHalfPi
// Cody-Waite is used below this magnitude (q < 2^30 keeps q * kC1 exact).
constexpr double kSmall = 0x1p30;
// Adding then subtracting 1.5 * 2^52 rounds |x| < 2^51 to the nearest integer (ties to
// even) with plain arithmetic, which vectorises where rint may not.
constexpr double kRound = 0x1.8p52;

// Bits of 2/pi: word i holds bits 64 i + 1 .. 64 i + 64 after the binary point.
constexpr uint64_t kTwoOverPi[20] = {
    0xa2f9836e4e441529ULL, 0xfc2757d1f534ddc0ULL, 0xdb6295993c439041ULL, 0xfe5163abdebbc561ULL,
    0xb7246e3a424dd2e0ULL, 0x06492eea09d1921cULL, 0xfe1deb1cb129a73eULL, 0xe88235f52ebb4484ULL,
    0xe99c7026b45f7e41ULL, 0x3991d639835339f4ULL, 0x9c845f8bbdf9283bULL, 0x1ff897ffde05980fULL,
    0xef2f118b5a0a6d1fULL, 0x6d367ecf27cb09b7ULL, 0x4f463f669e5fea2dULL, 0x7527bac7ebe5f17bULL,
    0x3d0739f78a5292eaULL, 0x6bfb5fb11f8d5d08ULL, 0x56033046fc7b6babULL, 0xf0cfbc209af4361dULL};

struct Reduced {
  int64_t quadrant;  // the phase is quadrant * pi/2 + y (quadrant taken mod 4 by users)
  double y;          // in [-pi/4, pi/4] (slightly beyond after adding two parts)
};

// Cody-Waite for |x| < kSmall: exact but for the last rounding.
inline Reduced reduce_small(double x) {
  const double q = std::nearbyint(x * kInvHalfPi);
  return {static_cast<int64_t>(q), ((x - q * kC1) - q * kC2) - q * kC3};
}

// Payne-Hanek for finite |x| >= 1: x * 2/pi modulo 4 from the 192 bits of 2/pi that matter.
inline Reduced reduce_large(double x) {
  const bool negative = x < 0;
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const int exp_field = static_cast<int>((bits >> 52) & 0x7ff);
  const uint64_t m = (bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1} << 52);
  const int e = exp_field - 1075;  // |x| = m * 2^e
  // Bits b_i (weight 2^-i) with i <= e - 2 add multiples of 4 to x * 2/pi: start at e - 1.
  const int s = e - 1 > 1 ? e - 1 : 1;
  const int first = s - 1, word = first / 64, off = first % 64;
  uint64_t w[3];
  for (int k = 0; k < 3; ++k) {
    const uint64_t hi = kTwoOverPi[word + k];
    w[k] = off ? (hi << off) | (kTwoOverPi[word + k + 1] >> (64 - off)) : hi;
  }
  // P = m * (w0 w1 w2), 256 bits in p[3] (most significant) .. p[0].
  using u128 = unsigned __int128;
  uint64_t p[4];
  u128 acc = static_cast<u128>(m) * w[2];
  p[0] = static_cast<uint64_t>(acc);
  acc = (acc >> 64) + static_cast<u128>(m) * w[1];
  p[1] = static_cast<uint64_t>(acc);
  acc = (acc >> 64) + static_cast<u128>(m) * w[0];
  p[2] = static_cast<uint64_t>(acc);
  p[3] = static_cast<uint64_t>(acc >> 64);
  // |x| * 2/pi = P * 2^-sh (mod 4) with sh in [190, 215].
  const int sh = s + 191 - e;
  auto bits_at = [&](int lo) -> uint64_t {  // bits [lo, lo + 64) of P
    const int wd = lo / 64, of = lo % 64;
    const uint64_t a = p[wd] >> of;
    return of && wd + 1 < 4 ? a | (p[wd + 1] << (64 - of)) : a;
  };
  int64_t q = static_cast<int64_t>(bits_at(sh) & 3);
  const uint64_t frac = bits_at(sh - 64);  // the fraction's top 64 bits
  // Round to the nearest quadrant: a fraction >= 1/2 is that minus 1, one quadrant up.
  const int64_t signed_frac = static_cast<int64_t>(frac);
  if (signed_frac < 0) q += 1;
  const double y = static_cast<double>(signed_frac) * 0x1p-64 * kHalfPi;
  return negative ? Reduced{-q, -y} : Reduced{q, y};
}

inline Reduced reduce(double x) {
  return std::fabs(x) < kSmall ? reduce_small(x) : reduce_large(x);
}

// The exact product w * dt, reduced; NaN offset when it is not finite.
inline Reduced reduce_product(double w, double dt) {
  const double p = w * dt;
  if (!std::isfinite(p)) return {0, std::nan("")};
  const double err = std::fma(w, dt, -p);  // w * dt = p + err exactly
  const Reduced a = reduce(p), b = reduce(err);
  int64_t q = a.quadrant + b.quadrant;
  double y = a.y + b.y;
  // Back into [-pi/4, pi/4]; y is within [-pi/2, pi/2] here.
  if (y > 0.5 * kHalfPi) {
    y = (y - kHalfPi) - kHalfPiLo;
    q += 1;
  } else if (y < -0.5 * kHalfPi) {
    y = (y + kHalfPi) + kHalfPiLo;
    q -= 1;
  }
  return {q, y};
}

}  // namespace tbdfs::phase
