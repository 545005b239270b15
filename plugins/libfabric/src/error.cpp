#include "error.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

namespace plugboard::libfabric {

std::string fiErrorText(long rc) {
  return std::string(fi_strerror(static_cast<int>(rc < 0 ? -rc : rc))) + " (" + std::to_string(rc) + ")";
}

pb_status statusForFiError(int err) {
  switch (err < 0 ? -err : err) {
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case FI_EREMOTEIO:
    case FI_EACCES:
    case FI_EIO:
    case FI_ESHUTDOWN:
    case FI_ETIMEDOUT:
    case FI_EHOSTDOWN:
    case FI_ENETDOWN:
    case FI_EKEYREJECTED:
    case FI_ENOKEY:
    // We never cancel a transmit ourselves: the provider dropped it with
    // its connection to the peer (closed, died, or refused an access).
    case FI_ECANCELED:
      return PB_ERR_REMOTE;
    case FI_ENOMEM:
    case FI_ENOSPC:
      return PB_ERR_NOMEM;
    case FI_ENOSYS:
    case FI_EOPNOTSUPP:
    case FI_EBADFLAGS:
      return PB_ERR_UNSUPPORTED;
    default:
      return PB_ERR_SYSTEM;
  }
}

long fiCheck(long rc, const std::string& what) {
  if (rc < 0) throw Error(statusForFiError(static_cast<int>(-rc)), what + ": " + fiErrorText(rc));
  return rc;
}

}  // namespace plugboard::libfabric
