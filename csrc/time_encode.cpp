#include "time_encode.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "parallel.h"
#include "phase_reduce.h"
#include "time_encode_wide.h"

namespace tbdfs {
namespace {

using namespace phase;

// Frequencies per inner block (contiguous, vectorised).  Each block is classified on its
// own (tiny / exact / with large phases) from its largest |w|, so the few high frequencies
// that need the exact product do not slow down the rest of the row.
constexpr int64_t kBlock = 64;


// (cos, sin) * scale of y + quadrant * pi/2 for |y| <= pi/4 + a little: Cephes' sinf/cosf
// minimax polynomials in float, accurate on that interval.
inline void cos_sin(float y, int64_t quadrant, float scale, float& c_out, float& s_out) {
  const float z = y * y;
  const float s = y + y * z * (-1.6666654611e-1f + z * (8.3321608736e-3f +
                                                         z * -1.9515295891e-4f));
  const float c = 1.0f - 0.5f * z + z * z * (4.166664568298827e-2f +
                                             z * (-1.388731625493765e-3f +
                                                  z * 2.443315711809948e-5f));
  const int64_t qm = quadrant & 3;
  const bool swap = qm & 1;
  const float cos_sign = (qm == 1 || qm == 2) ? -scale : scale;
  const float sin_sign = qm >= 2 ? -scale : scale;
  c_out = cos_sign * (swap ? s : c);
  s_out = sin_sign * (swap ? c : s);
}

// Below this |dt| * max|w| the product's rounding error (<= 2^-27 rad) is far under float
// output precision, and a two-constant Cody-Waite reduction is exact enough.
constexpr double kTiny = 0x1p26;
// pi/2 - kC1 rounded: q * kTail errs by ~2^-51 rad for q < 2^26.
constexpr double kTail = 0x1.4442d18469899p-24;

// One block of m frequencies of row value t.  kExact: the exact product is p + err
// (Dekker's two-product, the frequencies split once per call), p is reduced by a
// three-constant Cody-Waite (exact for |p| < 2^30) and err added after.  Otherwise (small
// phases) the rounded product and two constants do, as fast as before.
template <bool kExact>
inline void encode_block(double t, double t_hi, double t_lo, const double* __restrict w,
                         const double* __restrict w_hi, const double* __restrict w_lo,
                         int64_t m, float scale, float* __restrict cos_buf,
                         float* __restrict sin_buf) {
  for (int64_t j = 0; j < m; ++j) {
    const double p = t * w[j];
    const double shifted = p * kInvHalfPi + kRound;
    const double q = shifted - kRound;  // nearest multiple of pi/2, as a count
    // The low mantissa bits of `shifted` hold 2^51 + q: its last two bits are q mod 4.
    int64_t bits;
    std::memcpy(&bits, &shifted, sizeof bits);
    double y;
    if constexpr (kExact) {
      const double err = ((w_hi[j] * t_hi - p) + w_hi[j] * t_lo + w_lo[j] * t_hi) +
                         w_lo[j] * t_lo;
      y = (((p - q * kC1) - q * kC2) - q * kC3) + err;
    } else {
      y = (p - q * kC1) - q * kTail;
    }
    cos_sin(static_cast<float>(y), bits & 3, scale, cos_buf[j], sin_buf[j]);
  }
}

// Where a row's (cos, sin) go.  Interleaved and scaled: out[i, 2k], out[i, 2k + 1] (the
// cos/sin form).  Rotated (rot_cos != nullptr): the phase b_k added by a rotation,
// out[i, k] = cos(w_k dt + b_k) and sin_out[i, k] = sin(w_k dt + b_k), from
// rot_cos = cos(b), rot_sin = sin(b) (the cos-phase form; its backward needs the sine).
struct Sink {
  float* out;
  float* sin_out;
  const float* rot_cos;
  const float* rot_sin;
};

// Rows [begin, end), vectorised per block of frequencies, each block in the cheapest way
// its reach |dt| * max|w| allows: below 2^26 (the common case) the plain loop, below 2^29
// the exact one, below 2^61 the wide reduction (time_encode_wide.h); phases beyond (or not
// finite) are then redone by the scalar exact reduction (Payne-Hanek).
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void encode_rows(const double* __restrict dt, int64_t begin, int64_t end,
                 const double* __restrict w, const double* __restrict w_hi,
                 const double* __restrict w_lo, const double* __restrict block_max, int64_t d,
                 float scale, Sink sink) {
  float cos_buf[kBlock], sin_buf[kBlock], y_buf[kBlock];
  int32_t q_buf[kBlock];
  for (int64_t i = begin; i < end; ++i) {
    const double t = dt[i];
    const double t_hi = high_half(t), t_lo = t - t_hi;
    for (int64_t k0 = 0; k0 < d; k0 += kBlock) {
      const int64_t m = d - k0 < kBlock ? d - k0 : kBlock;
      // NaN compares false: a NaN time or frequency takes the checked path.
      const double reach = std::fabs(t) * block_max[k0 / kBlock];
      if (reach < kTiny) {
        encode_block<false>(t, t_hi, t_lo, w + k0, w_hi + k0, w_lo + k0, m, scale, cos_buf,
                            sin_buf);
      } else if (reach < 0.5 * kSmall) {
        encode_block<true>(t, t_hi, t_lo, w + k0, w_hi + k0, w_lo + k0, m, scale, cos_buf,
                           sin_buf);
      } else {
        reduce_block_wide(t, t_hi, t_lo, w + k0, w_hi + k0, w_lo + k0, m, y_buf, q_buf);
        for (int64_t j = 0; j < m; ++j)
          cos_sin(y_buf[j], q_buf[j], scale, cos_buf[j], sin_buf[j]);
        if (!(reach < kWidePhase)) {
          for (int64_t j = 0; j < m; ++j) {
            const double p = t * w[k0 + j];
            if (std::fabs(p) < kWidePhase) continue;  // NaN goes on: it stays NaN
            const Reduced r = reduce_product(w[k0 + j], t);
            cos_sin(static_cast<float>(r.y), r.quadrant, scale, cos_buf[j], sin_buf[j]);
          }
        }
      }
      if (sink.rot_cos != nullptr) {
        float* __restrict c_row = sink.out + i * d + k0;
        float* __restrict s_row = sink.sin_out + i * d + k0;
        const float* __restrict rc = sink.rot_cos + k0;
        const float* __restrict rs = sink.rot_sin + k0;
        for (int64_t j = 0; j < m; ++j) {
          c_row[j] = cos_buf[j] * rc[j] - sin_buf[j] * rs[j];
          s_row[j] = sin_buf[j] * rc[j] + cos_buf[j] * rs[j];
        }
      } else {
        float* __restrict row = sink.out + i * 2 * d;
        for (int64_t j = 0; j < m; ++j) {
          row[2 * (k0 + j)] = cos_buf[j];
          row[2 * (k0 + j) + 1] = sin_buf[j];
        }
      }
    }
  }
}

void encode(const double* dt, int64_t n, const double* w, int64_t d, float scale, Sink sink,
            int num_threads) {
  // Splits of the frequencies, once per call (not per row).
  std::vector<double> split(2 * static_cast<size_t>(d > 0 ? d : 0));
  double* w_hi = split.data();
  double* w_lo = w_hi + d;
  std::vector<double> block_max((d + kBlock - 1) / kBlock, 0.0);
  for (int64_t k = 0; k < d; ++k) {
    w_hi[k] = high_half(w[k]);
    w_lo[k] = w[k] - w_hi[k];
    // A NaN frequency makes its block "not small", where it stays NaN.
    double& b = block_max[k / kBlock];
    b = std::isnan(w[k]) ? w[k] : std::max(b, std::fabs(w[k]));
  }
  // About 2d floats written per row: chunks of a few thousand rows amortise a wake-up.
  const int64_t min_chunk = d > 0 ? (1 << 16) / d + 1 : n + 1;
  parallel_for(n, num_threads, min_chunk, [&](int64_t begin, int64_t end) {
    encode_rows(dt, begin, end, w, w_hi, w_lo, block_max.data(), d, scale, sink);
  });
}

}  // namespace

void time_encode(const double* dt, int64_t n, const double* w, int64_t d, float scale,
                 float* out, int num_threads) {
  encode(dt, n, w, d, scale, Sink{out, nullptr, nullptr, nullptr}, num_threads);
}

void time_encode_phase(const double* dt, int64_t n, const double* w, const float* bias_cos,
                       const float* bias_sin, int64_t d, float* cos_out, float* sin_out,
                       int num_threads) {
  encode(dt, n, w, d, 1.0f, Sink{cos_out, sin_out, bias_cos, bias_sin}, num_threads);
}

void reduce_phases(const double* w, const double* dt, int64_t n, int64_t* quadrant, double* y) {
  for (int64_t i = 0; i < n; ++i) {
    const phase::Reduced r = phase::reduce_product(w[i], dt[i]);
    quadrant[i] = r.quadrant & 3;
    y[i] = r.y;
  }
}

}  // namespace tbdfs
