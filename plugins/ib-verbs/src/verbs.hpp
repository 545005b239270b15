// Owning handles for libibverbs objects (each released by its destroy
// call, errors ignored: a destructor cannot report them) and the check
// that turns a failed verbs call into an Error naming what failed.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>

namespace plugboard::ibverbs {

/// Deleter calling a verbs destroy function (int f(T*)).
template <typename T, int (*Destroy)(T*)>
struct VerbsDeleter {
  void operator()(T* p) const {
    if (p) Destroy(p);
  }
};

using DeviceContext = std::unique_ptr<ibv_context, VerbsDeleter<ibv_context, ibv_close_device>>;
using ProtectionDomain = std::unique_ptr<ibv_pd, VerbsDeleter<ibv_pd, ibv_dealloc_pd>>;
using CompletionQueue = std::unique_ptr<ibv_cq, VerbsDeleter<ibv_cq, ibv_destroy_cq>>;
using QueuePair = std::unique_ptr<ibv_qp, VerbsDeleter<ibv_qp, ibv_destroy_qp>>;
using MemoryRegion = std::unique_ptr<ibv_mr, VerbsDeleter<ibv_mr, ibv_dereg_mr>>;

/// The list ibv_get_device_list returns, freed with ibv_free_device_list.
struct DeviceListDeleter {
  void operator()(ibv_device** list) const {
    if (list) ibv_free_device_list(list);
  }
};
using DeviceList = std::unique_ptr<ibv_device*, DeviceListDeleter>;

/// Throws Error(status) "<what> failed: <strerror(err)> (errno N)" when rc
/// is not 0. Verbs calls return an errno value or -1 with errno set; both
/// are handled (err is rc when positive, else errno).
void verbsCheck(int rc, const std::string& what, int status);

/// "<what> failed: <strerror(errno)> (errno N)" for a call that returned
/// NULL; throws Error(status).
[[noreturn]] void verbsNullFailure(const std::string& what, int status);

}  // namespace plugboard::ibverbs
