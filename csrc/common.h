// Types and errors shared by every part of the sampler.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace tbdfs {

// Node ids and internal edge indices are stored as 32-bit integers: the CSR is read far
// more often than it is built, and halving its footprint keeps more of it in cache.
// build_tcsr() rejects graphs that do not fit.
using nid_t = int32_t;
using eid_t = int32_t;
constexpr int64_t kMaxId = INT32_MAX;

// Raised for bad user input; the bindings turn it into a Python ValueError.
struct InputError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Throws InputError with the arguments streamed into one message.
template <class... Args>
[[noreturn]] void fail(Args&&... args) {
  std::ostringstream os;
  (os << ... << args);
  throw InputError(os.str());
}

}  // namespace tbdfs
