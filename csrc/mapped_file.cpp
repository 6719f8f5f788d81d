#include "mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tbdfs {

std::shared_ptr<const void> map_file(const std::string& path, size_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open ", path, ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail("cannot stat ", path, ": ", std::strerror(err));
  }
  *size = static_cast<size_t>(st.st_size);
  if (*size == 0) {
    ::close(fd);
    fail(path, " is empty");
  }
  void* p = ::mmap(nullptr, *size, PROT_READ, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file
  if (p == MAP_FAILED) fail("cannot map ", path, ": ", std::strerror(err));
  const size_t n = *size;
  return std::shared_ptr<const void>(p, [n](const void* q) { ::munmap(const_cast<void*>(q), n); });
}

}  // namespace tbdfs
