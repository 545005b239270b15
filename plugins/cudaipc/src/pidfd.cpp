#include "pidfd.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "error.hpp"

// Same numbers on every Linux architecture (the unified syscall table).
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

namespace plugboard::cudaipc {

int copyPeerFd(uint32_t pid, int fd, const std::string& who) {
  const std::string what = "cudaipc: cannot fetch the cuMem allocation handle (fd " + std::to_string(fd) +
                           ") of " + who + ", pid " + std::to_string(pid) + ": ";
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
  if (pidfd < 0) {
    int err = errno;
    IPC_CHECK(err != ESRCH, PB_ERR_REMOTE, what + "the process no longer exists");
    IPC_CHECK(err != ENOSYS, PB_ERR_UNSUPPORTED,
              what + "this kernel has no pidfd_open (Linux >= 5.6 is needed for cuMem buffers; cudaMalloc buffers "
                     "work everywhere)");
    throw Error(PB_ERR_SYSTEM, what + "pidfd_open: " + std::strerror(err));
  }
  int local = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
  int err = errno;
  ::close(pidfd);
  if (local >= 0) return local;
  IPC_CHECK(err != EPERM, PB_ERR_UNSUPPORTED,
            what + "pidfd_getfd was refused (EPERM): this process may not ptrace pid " + std::to_string(pid) +
                ". Allow it (same user and kernel.yama.ptrace_scope=0, or CAP_SYS_PTRACE), or allocate the buffer "
                "with cudaMalloc (exported with legacy CUDA IPC, which needs no permission)");
  IPC_CHECK(err != ENOSYS, PB_ERR_UNSUPPORTED,
            what + "this kernel has no pidfd_getfd (Linux >= 5.6 is needed for cuMem buffers; cudaMalloc buffers "
                   "work everywhere)");
  IPC_CHECK(err != EBADF, PB_ERR_REMOTE, what + "the descriptor is not open there (region deregistered?)");
  IPC_CHECK(err != ESRCH, PB_ERR_REMOTE, what + "the process exited");
  throw Error(PB_ERR_SYSTEM, what + "pidfd_getfd: " + std::strerror(err));
}

}  // namespace plugboard::cudaipc
