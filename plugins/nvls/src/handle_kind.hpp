// How the multicast object travels from group rank 0 to the others: a
// 64-byte fabric handle (IMEX / multi-node NVLink capable drivers) or a
// POSIX file descriptor copied out of rank 0's process with pidfd_getfd
// (one machine). Every rank must use the same kind.
#pragma once

#include <cuda.h>

#include <functional>
#include <string>
#include <vector>

namespace plugboard::nvls {

/// The `handle_type` setting.
enum class HandlePreference {
  Auto,    ///< Fabric when every rank's GPU supports it, else POSIX fd.
  Fabric,  ///< CU_MEM_HANDLE_TYPE_FABRIC only.
  PosixFd  ///< CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR only.
};

/// The kind the group uses.
enum class HandleKind { Fabric, PosixFd };

/// Parses "auto", "fabric" or "posix_fd" (exact, lower case). Throws
/// Error(PB_ERR_INVALID) naming the accepted values otherwise.
HandlePreference parseHandlePreference(const std::string& text);
/// "auto", "fabric" or "posix_fd".
const char* preferenceName(HandlePreference preference);
/// "fabric" or "posix_fd".
const char* kindName(HandleKind kind);
/// The driver's handle type for kind.
CUmemAllocationHandleType cuHandleType(HandleKind kind);

/// One rank's say in the choice: its setting and what its GPU can export.
struct HandleSupport {
  HandlePreference preference = HandlePreference::Auto;  ///< The rank's handle_type setting.
  bool fabric = false;   ///< CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED.
  bool posixFd = false;  ///< CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED.
};

/// The kind every rank uses, from every group rank's HandleSupport (index =
/// group rank). Ranks that name a kind must agree; the kind must be
/// supported on every rank; auto picks fabric when all support it, else
/// POSIX fd. Throws Error(PB_ERR_UNSUPPORTED, or PB_ERR_INVALID for
/// disagreeing settings) naming the ranks through describe(group rank).
/// Deterministic: every rank reaches the same answer or the same error.
HandleKind chooseHandleKind(const std::vector<HandleSupport>& ranks,
                            const std::function<std::string(int)>& describe);

}  // namespace plugboard::nvls
