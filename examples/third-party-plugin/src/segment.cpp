#include "segment.hpp"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

#include "error.hpp"

namespace shm {

std::string systemError(const std::string& what) { return what + ": " + std::strerror(errno); }

namespace {

/// Closes an fd on scope exit.
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) close(fd);
  }
};

/// mmap of the whole segment, shared and writable.
void* mapShared(int fd, size_t bytes, const std::string& name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  SHM_CHECK(p != MAP_FAILED, PB_ERR_SYSTEM, systemError("shm: mmap of " + name));
  return p;
}

}  // namespace

std::unique_ptr<Segment> Segment::create(const std::string& name, size_t ringBytes, int ownerRank, int producerRank) {
  FdGuard fd{shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600)};
  SHM_CHECK(fd.fd >= 0, PB_ERR_SYSTEM, systemError("shm: shm_open(" + name + ", O_CREAT) (is /dev/shm mounted and writable?)"));
  const size_t bytes = kHeaderBytes + ringBytes;
  if (ftruncate(fd.fd, off_t(bytes)) != 0) {
    std::string why = systemError("shm: sizing " + name + " to " + std::to_string(bytes) + " bytes");
    shm_unlink(name.c_str());
    throw Error(PB_ERR_NOMEM, why);
  }
  void* base;
  try {
    base = mapShared(fd.fd, bytes, name);
  } catch (...) {
    shm_unlink(name.c_str());
    throw;
  }
  std::unique_ptr<Segment> seg(new Segment(name, base, bytes, ringBytes, true));
  SegmentHeader* h = seg->header();
  h->version = kLayoutVersion;
  h->ownerRank = ownerRank;
  h->producerRank = producerRank;
  h->ringBytes = ringBytes;
  h->ownerPid = getpid();
  __atomic_store_n(&h->magic, kSegmentMagic, __ATOMIC_RELEASE);  // last: the header is complete
  return seg;
}

std::unique_ptr<Segment> Segment::open(const std::string& name) {
  FdGuard fd{shm_open(name.c_str(), O_RDWR, 0)};
  SHM_CHECK(fd.fd >= 0, PB_ERR_REMOTE, systemError("shm: cannot open the peer's segment " + name));
  struct stat st {};
  SHM_CHECK(fstat(fd.fd, &st) == 0, PB_ERR_SYSTEM, systemError("shm: fstat of " + name));
  SHM_CHECK(size_t(st.st_size) > kHeaderBytes, PB_ERR_REMOTE, "shm: segment " + name + " is too small to be a ring");
  void* base = mapShared(fd.fd, size_t(st.st_size), name);
  auto* h = static_cast<SegmentHeader*>(base);
  const size_t ring = size_t(st.st_size) - kHeaderBytes;
  if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != kSegmentMagic || h->version != kLayoutVersion ||
      h->ringBytes != ring || (ring & (ring - 1)) != 0) {
    munmap(base, size_t(st.st_size));
    throw Error(PB_ERR_REMOTE, "shm: " + name + " is not a layout-" + std::to_string(kLayoutVersion) + " shm segment");
  }
  return std::unique_ptr<Segment>(new Segment(name, base, size_t(st.st_size), ring, false));
}

void Segment::unlink() {
  if (linked_) shm_unlink(name_.c_str());
  linked_ = false;
}

Segment::~Segment() {
  unlink();
  munmap(base_, mapped_);
}

void futexWait(uint32_t* word, uint32_t expected, int timeoutMs) {
  timespec ts{timeoutMs / 1000, long(timeoutMs % 1000) * 1000000L};
  // Not FUTEX_PRIVATE: the word is in memory shared with another process.
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futexWakeAll(uint32_t* word) { syscall(SYS_futex, word, FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0); }

}  // namespace shm
