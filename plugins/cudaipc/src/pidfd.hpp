// Copying a file descriptor out of another process (Linux pidfd_open +
// pidfd_getfd, kernel >= 5.6): how a cuMem allocation's POSIX fd, which
// cannot travel in the bytes of an rkey, reaches the importing rank.
#pragma once

#include <cstdint>
#include <string>

namespace plugboard::cudaipc {

/// Returns a new descriptor (close-on-exec) in this process for descriptor
/// fd of process pid. who names the owner for messages. Throws Error:
/// PB_ERR_UNSUPPORTED when the kernel lacks pidfd or ptrace permission is
/// refused (the message says how to allow it or avoid it), PB_ERR_REMOTE
/// when the process is gone or fd is not open there, PB_ERR_SYSTEM else.
int copyPeerFd(uint32_t pid, int fd, const std::string& who);

}  // namespace plugboard::cudaipc
