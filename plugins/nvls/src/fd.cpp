#include "fd.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "error.hpp"

// One number on every Linux architecture (the unified syscall table).
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

namespace plugboard::nvls {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

void UniqueFd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

namespace {

/// The Error for errno err of the pidfd call `call`.
Error pidfdError(const std::string& what, const char* call, int err) {
  if (err == ENOSYS)
    return Error(PB_ERR_UNSUPPORTED, what + "this kernel has no " + call +
                                         " (Linux >= 5.6 is needed for posix_fd handles; handle_type=fabric needs "
                                         "none)");
  if (err == EPERM)
    return Error(PB_ERR_UNSUPPORTED,
                 what + call + " was refused (EPERM): this process may not ptrace the owner. Allow it (same user "
                              "and kernel.yama.ptrace_scope=0, or CAP_SYS_PTRACE), or use handle_type=fabric");
  if (err == ESRCH) return Error(PB_ERR_REMOTE, what + "the process no longer exists");
  if (err == EBADF) return Error(PB_ERR_REMOTE, what + "the descriptor is not open there");
  return Error(PB_ERR_SYSTEM, what + call + ": " + std::strerror(err));
}

}  // namespace

int copyPeerFd(uint32_t pid, int fd, const std::string& who) {
  const std::string what = "nvls: cannot copy the multicast handle (fd " + std::to_string(fd) + ") of " + who +
                           ", pid " + std::to_string(pid) + ": ";
  UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0)));
  if (pidfd.get() < 0) {
    const int err = errno;
    throw pidfdError(what, "pidfd_open", err);
  }
  const int local = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd.get(), fd, 0));
  if (local < 0) {
    const int err = errno;
    throw pidfdError(what, "pidfd_getfd", err);
  }
  return local;
}

}  // namespace plugboard::nvls
