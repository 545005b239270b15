// Registered memory: libfabric memory regions (fi_mr_regattr), local
// regions (pb_mr), imported remote keys (pb_rkey) and the per-context
// registry control messages resolve signals against.
#pragma once

#include <plugboard/transport.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <unordered_map>
#include <vector>

#include "fid.hpp"

namespace plugboard::libfabric {

/// True when [offset, offset + length) lies inside [0, size), without overflow.
inline bool rangeFits(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

/// One fi_mr registration: the handle, its local descriptor (for
/// FI_MR_LOCAL providers; may be NULL) and its remote key.
struct Registration {
  FidPtr<fid_mr> mr;
  void* desc = nullptr;
  uint64_t key = 0;
};

/// What registerBuffer needs to know about the domain.
struct MrTarget {
  fid_domain* domain = nullptr;
  fid_ep* ep = nullptr;   ///< Bound to when mr_mode has FI_MR_ENDPOINT.
  uint64_t mrMode = 0;    ///< fi_domain_attr.mr_mode of the chosen provider.
};

/// Registers [ptr, ptr + size) with access bits (FI_WRITE, FI_REMOTE_WRITE,
/// ...). iface FI_HMEM_CUDA with the device ordinal for GPU memory.
/// requestedKey is used unless the provider picks keys (FI_MR_PROV_KEY).
/// Binds and enables the region under FI_MR_ENDPOINT. Throws Error naming
/// what (e.g. "register_memory of 4096 bytes").
Registration registerBuffer(const MrTarget& target, void* ptr, size_t size, uint64_t access, fi_hmem_iface iface,
                            int device, uint64_t requestedKey, const std::string& what);

/// The CUDA device ordinal of a device pointer, asked of the CUDA driver
/// (loaded with dlopen, so the plugin links no CUDA). Throws
/// Error(PB_ERR_UNSUPPORTED) when there is no driver or ptr is not CUDA memory.
int cudaDeviceOf(const void* ptr);

/// A local region registered with a context. The handle the core holds as
/// pb_mr*. Fixed after registration.
struct LocalRegion {
  uint64_t id = 0;         ///< Unique within the context, never reused.
  uint64_t check = 0;      ///< Random; a signal message must quote it.
  char* base = nullptr;    ///< First byte.
  size_t size = 0;         ///< Bytes.
  pb_mem_type type = PB_MEM_HOST;
  Registration reg;        ///< Empty for a zero-byte region.
  std::vector<Registration> lanes;  ///< Its registration on each lane (README "Lanes"); none for zero bytes.
  uint64_t rmaBase = 0;    ///< Remote address of offset 0 (VA under FI_MR_VIRT_ADDR, else 0).
};

/// A peer's region as imported from its packed key. The handle the core
/// holds as pb_rkey*.
struct RemoteRegion {
  uint64_t region = 0;   ///< Region id in the peer's context.
  uint64_t check = 0;    ///< The region's random check value.
  uint64_t mrKey = 0;    ///< libfabric remote key.
  uint64_t base = 0;     ///< Peer's virtual address of the first byte.
  uint64_t size = 0;     ///< Bytes.
  uint64_t rmaBase = 0;  ///< Address fi_write/fi_atomic use for offset 0.
  bool hostMemory = false;  ///< The peer's CPU can store into it (WRITE_SIGNAL messages).
  std::vector<uint64_t> laneKeys;  ///< Its key on each of the peer's lanes.
};

/// Serializes what a peer needs to target region (wire::PackedRkey) into
/// buf; *len is the room on entry and the size used on return.
void packRkey(const LocalRegion& region, void* buf, size_t* len);

/// Parses a packed key; throws Error(PB_ERR_INVALID) on a bad size, magic
/// or version, or a region whose end overflows.
RemoteRegion importRkey(const void* buf, size_t len);

/// The regions of one context, looked up by (id, check). Guarded by the
/// context's mutex, like everything else the context owns.
class RegionRegistry {
 public:
  RegionRegistry();
  /// Takes ownership of region, giving it an id and a check value.
  LocalRegion* add(std::unique_ptr<LocalRegion> region);
  /// Removes and frees region (closing its registration); throws
  /// Error(PB_ERR_INVALID) if it is not registered here.
  void remove(LocalRegion* region);
  /// The region with this id if its check value matches; NULL if not.
  LocalRegion* find(uint64_t id, uint64_t check) const;
  /// Number of live regions.
  size_t size() const { return regions_.size(); }
  /// True when region (an address, possibly stale) is registered here.
  bool contains(const LocalRegion* region) const;

 private:
  std::unordered_map<uint64_t, std::unique_ptr<LocalRegion>> regions_;
  uint64_t nextId_ = 1;
  std::mt19937_64 checks_;
};

}  // namespace plugboard::libfabric
