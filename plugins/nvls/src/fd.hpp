// File descriptors: an owning wrapper, and copying a descriptor out of
// another process (Linux pidfd_open + pidfd_getfd, kernel >= 5.6), which
// is how group rank 0's exported multicast handle (a POSIX fd) reaches the
// other ranks' processes. The copy is injectable: the unit tests' ranks
// are threads of one process.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace plugboard::nvls {

/// Owns one descriptor; closes it on destruction or reset.
class UniqueFd {
 public:
  UniqueFd() = default;
  /// Takes ownership of fd (-1: none).
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  /// The descriptor (-1: none).
  int get() const { return fd_; }
  /// Gives up ownership and returns the descriptor.
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  /// Closes the descriptor, if any.
  void reset();

 private:
  int fd_ = -1;
};

/// Returns a new descriptor in this process for descriptor fd of process
/// pid; who names the owner for messages. Throws Error.
using FdCopier = std::function<int(uint32_t pid, int fd, const std::string& who)>;

/// The real FdCopier: pidfd_open + pidfd_getfd. Throws Error:
/// PB_ERR_UNSUPPORTED when the kernel lacks pidfd or ptrace permission is
/// refused (the message says how to allow it, or to use fabric handles),
/// PB_ERR_REMOTE when the process is gone or fd is not open there,
/// PB_ERR_SYSTEM otherwise.
int copyPeerFd(uint32_t pid, int fd, const std::string& who);

}  // namespace plugboard::nvls
