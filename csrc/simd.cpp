#include "simd.h"

#include <cstdlib>
#include <cstring>

namespace tbdfs {
namespace simd {

bool avx2() {
#if TBDFS_SIMD_AVX2
  static const bool on = [] {
    const char* forced = std::getenv("TBDFS_SIMD");
    if (forced && std::strcmp(forced, "baseline") == 0) return false;
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return on;
#else
  return false;
#endif
}

const char* isa() { return avx2() ? "avx2" : "baseline"; }

}  // namespace simd
}  // namespace tbdfs
