// Dropout's keep decisions from a counter-based generator, for kernels that drop units as
// they write them (no mask tensor drawn, stored or read back).
//
// Unit j of row r is kept iff 16 bits (lane j % 4, low bits first) of splitmix64's output
// number r * C + j / 4 from the seed (C = ceil(W / 4) outputs a row) fall below
// round(keep * 65536): a keep probability within 2^-17 of the one asked for.  Every unit's
// decision depends on (seed, r, j) alone, so a row may be drawn by any thread in any
// order: the same seed gives the same mask whatever the thread count.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tbdfs {
namespace dropout {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;  // splitmix64's increment

// splitmix64's output function.
inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A unit is kept iff its 16-bit lane is below this (0 ... 65536).
inline uint32_t keep_threshold(double keep) {
  const double t = std::nearbyint(keep * 65536.0);
  return t <= 0.0 ? 0u : t >= 65536.0 ? 65536u : static_cast<uint32_t>(t);
}

// Lanes a row of W units needs: whole 64-bit outputs of four lanes each.
inline int64_t lanes_per_row(int64_t W) { return 4 * ((W + 3) / 4); }

// The 16-bit lanes of `row` into lanes[0, lanes_per_row(W)): unit j's is lanes[j].
// Counter-based, so the outputs are independent and the loop runs at the multiplies'
// throughput; the lanes are then compared in a separate, vectorisable loop.
inline void draw_lanes(uint64_t seed, int64_t row, int64_t W, uint16_t* __restrict lanes) {
  const int64_t outputs = lanes_per_row(W) / 4;
  const uint64_t z0 =
      seed + static_cast<uint64_t>(row) * static_cast<uint64_t>(outputs) * kGolden;
  for (int64_t c = 0; c < outputs; ++c) {
    const uint64_t bits = mix(z0 + static_cast<uint64_t>(c + 1) * kGolden);
    for (int l = 0; l < 4; ++l) lanes[4 * c + l] = static_cast<uint16_t>(bits >> (16 * l));
  }
}

// 1 if a unit with this lane is kept under threshold t, else 0: the sign bit of lane - t
// (both below 2^17), arithmetic rather than a comparison so that loops vectorise.
inline uint32_t kept(uint16_t lane, int32_t t) {
  return static_cast<uint32_t>(static_cast<int32_t>(lane) - t) >> 31;
}

// out[j] *= scale if unit j is kept, else 0 (so NaN * 0 stays NaN, as in torch's dropout),
// for j in [0, W), given the row's lanes.  The factor is selected with integer arithmetic
// on its bits: GCC compiles a comparison-to-float or a ternary to a branch here, which at
// rate 0.1 mispredicts one unit in ten and does not vectorise (measured ~3x slower).
inline void apply_keep(const uint16_t* __restrict lanes, int64_t W, uint32_t threshold,
                       float scale, float* __restrict out) {
  const int32_t t = static_cast<int32_t>(threshold);
  uint32_t scale_bits;
  std::memcpy(&scale_bits, &scale, sizeof scale_bits);
  for (int64_t j = 0; j < W; ++j) {
    const uint32_t bits = scale_bits & (0u - kept(lanes[j], t));  // all or no bits
    float factor;
    std::memcpy(&factor, &bits, sizeof factor);
    out[j] *= factor;
  }
}

}  // namespace dropout
}  // namespace tbdfs
