// Read-only, shared mappings of files: arrays of a saved graph that every process reading
// them shares through the page cache (TemporalGraph.load(path, mmap=True)).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common.h"
#include "cow_array.h"

namespace tbdfs {

// Maps the whole file read-only (MAP_SHARED); the pointer unmaps it when the last copy
// goes.  Throws InputError naming the file when it cannot be opened or mapped.
std::shared_ptr<const void> map_file(const std::string& path, size_t* size);

// A view of `count` elements of T at byte `offset` of the file at `path`.  Throws
// InputError when the file is too short (truncated) or the offset misaligned for T.
template <class T>
CowArray<T> mapped_array(const std::string& path, int64_t offset, int64_t count) {
  if (offset < 0 || count < 0) fail(path, ": negative offset or count");
  if (count == 0) return CowArray<T>();
  if (offset % static_cast<int64_t>(alignof(T)) != 0)
    fail(path, ": data offset ", offset, " is not aligned for ", sizeof(T), "-byte elements");
  size_t size = 0;
  auto mapping = map_file(path, &size);
  const double need = static_cast<double>(offset) + static_cast<double>(count) * sizeof(T);
  if (static_cast<double>(size) < need)
    fail(path, " is truncated: ", size, " bytes, expected at least ", need);
  const auto* base = static_cast<const char*>(mapping.get()) + offset;
  return CowArray<T>::view(reinterpret_cast<const T*>(base), static_cast<size_t>(count),
                           std::move(mapping));
}

}  // namespace tbdfs
