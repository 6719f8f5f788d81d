// Counter-based random streams: one independent stream per (seed, batch, hop, instance),
// so results do not depend on how instances are split across threads.
#pragma once

#include <cstdint>

namespace tbdfs {

inline uint64_t mix64(uint64_t z) {
  // SplitMix64 finaliser (Steele, Lea, Flood 2014): a bijection with full avalanche.
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class InstanceRng {
 public:
  InstanceRng(uint64_t seed, uint64_t stream, uint64_t hop, uint64_t index)
      : state_(mix64(mix64(mix64(seed + 0x9e3779b97f4a7c15ULL) ^ stream) ^
                     ((hop << 56) ^ index))) {}

  uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return mix64(state_);
  }

  // Uniform integer in [0, n), n > 0 (Lemire's multiply-shift; bias below 2^-40 here).
  uint64_t below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

 private:
  uint64_t state_;
};

}  // namespace tbdfs
