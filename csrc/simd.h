// Kernels whose float loops are built twice: for the baseline x86-64 ISA (SSE2) and, on
// x86-64 with GCC, for AVX2; the variant is picked once per process from the CPU.
//
// A kernel's loops live in "<kernel>_loops.inc", which its .cpp includes twice through
// simd_variants.inc: in namespace `baseline`, and in namespace `avx2` under
// `#pragma GCC target("avx2")` (the pragma, unlike a function attribute, also reaches the
// lambdas that parallel_for runs).
// FMA is not enabled, so both variants round every operation alike, and vector_ops.h fixes
// the order of every sum: the two give the same bits (tests/test_simd.py runs both).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TBDFS_SIMD_AVX2 1
#else
#define TBDFS_SIMD_AVX2 0
#endif

// In a kernel's .cpp, after its two inclusions: call fn of the variant that runs.
#if TBDFS_SIMD_AVX2
#define TBDFS_SIMD_CALL(fn, ...) \
  (simd::avx2() ? avx2::fn(__VA_ARGS__) : baseline::fn(__VA_ARGS__))
#else
#define TBDFS_SIMD_CALL(fn, ...) baseline::fn(__VA_ARGS__)
#endif

namespace tbdfs {
namespace simd {

// Whether the AVX2 variants run: built, the CPU has AVX2, and the environment variable
// TBDFS_SIMD is not "baseline" (read once, at the first call).
bool avx2();

// "avx2" or "baseline": the variant the kernels run.
const char* isa();

}  // namespace simd
}  // namespace tbdfs
