// Registered memory. Exporting side: LocalRegion (the core's pb_mr*), each
// backed by an Export of its CUDA allocation (a legacy cudaIpcMemHandle_t,
// or a POSIX fd of a cuMem allocation), shared by every region of one
// allocation. Importing side: RemoteRegion (pb_rkey*) points into a Mapping
// of the peer's allocation, opened once per (exporter, export, GPU) and
// reference counted, because CUDA refuses to open one legacy handle twice
// in a context and each cuMem import costs a VA reservation.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>

#include "wire.hpp"

namespace plugboard::cudaipc {

class Context;
class Connection;
struct DeviceInfo;
struct ProcessIdentity;

/// True when [offset, offset + length) lies inside [0, size), without overflow.
inline bool rangeFits(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

/// One exported CUDA allocation. Releases what it holds (the fd, the
/// retained cuMem handle) when the last region using it is deregistered.
struct Export {
  wire::ExportKind kind = wire::ExportKind::Empty;
  uint64_t id = 0;         ///< Context::nextExportId().
  int device = -1;         ///< Ordinal of the GPU that owns the allocation.
  CUcontext ctx = nullptr; ///< That GPU's primary context.
  uint64_t allocBase = 0;  ///< First byte of the allocation.
  uint64_t allocSize = 0;  ///< Its size.
  cudaIpcMemHandle_t legacy{};              ///< Legacy only.
  int fd = -1;                              ///< CuMemFd only: exported fd, open while registered.
  CUmemGenericAllocationHandle handle = 0;  ///< CuMemFd only: retained allocation handle.

  Export() = default;
  Export(const Export&) = delete;
  Export& operator=(const Export&) = delete;
  /// Closes fd and releases handle; never throws.
  ~Export();
};

/// A local registered region. The handle the core holds as pb_mr*.
struct LocalRegion {
  const Context* owner = nullptr;  ///< Context that registered it.
  char* ptr = nullptr;             ///< First byte (a device pointer).
  size_t size = 0;                 ///< Bytes.
  int device = -1;                 ///< Owning GPU (-1 for an empty region).
  std::shared_ptr<Export> exported;///< Null for an empty region.
};

/// The regions of one context and the exports behind them. Thread-safe.
class ExportRegistry {
 public:
  /// Registers [ptr, ptr + size) of CUDA device memory, exporting its
  /// allocation unless an earlier region already did. Throws Error:
  /// PB_ERR_INVALID for memory CUDA does not know as device memory or a
  /// range past its allocation, PB_ERR_UNSUPPORTED for memory that cannot
  /// be exported (managed, pool, cuMem without a POSIX fd handle type).
  LocalRegion* add(Context& ctx, void* ptr, size_t size);
  /// Removes region (throws PB_ERR_INVALID for an unknown handle).
  void remove(LocalRegion* region);
  /// True when region is a live handle of this registry.
  bool contains(const LocalRegion* region) const;
  /// Number of live regions.
  size_t size() const;
  /// Drops every region (finalize).
  void clear();

 private:
  /// The export of allocation [base, base + allocSize), made now or reused.
  std::shared_ptr<Export> exportFor(Context& ctx, uint64_t base, uint64_t allocSize, int device, bool legacyCapable,
                                    uint64_t handleTypes, bool fromPool);

  mutable std::mutex mu_;
  std::unordered_map<LocalRegion*, std::unique_ptr<LocalRegion>> regions_;
  std::map<uint64_t, std::weak_ptr<Export>> exports_;  // by allocation base
};

/// Serializes what a peer needs to target region (wire::PackedRkey) into
/// buf; *len is the room on entry and the size used on return.
void packRkey(const Context& ctx, const LocalRegion& region, void* buf, size_t* len);

/// Parses and checks a packed key; throws Error(PB_ERR_INVALID) on a bad
/// size, magic, kind or range, PB_ERR_REMOTE for a key from another machine.
wire::PackedRkey parseRkey(const void* buf, size_t len, const ProcessIdentity& self, const std::string& from);

/// A peer allocation mapped into this process on one GPU.
struct Mapping {
  wire::ExportKind kind = wire::ExportKind::Empty;
  char* base = nullptr;      ///< Local address of the allocation's first byte.
  uint64_t size = 0;         ///< Allocation size.
  CUcontext ctx = nullptr;   ///< Context it is mapped in.
  bool borrowed = false;     ///< Same process: base is the exporter's own pointer, nothing to close.
  CUmemGenericAllocationHandle handle = 0;  ///< CuMemFd: the imported handle.
  int refs = 0;              ///< RemoteRegions using it; guarded by the cache's mutex.
};

/// An imported region. The handle the core holds as pb_rkey*.
struct RemoteRegion {
  Mapping* mapping = nullptr;  ///< Shared mapping of the allocation.
  char* base = nullptr;        ///< Local address of the region's first byte.
  uint64_t size = 0;           ///< Region bytes.
  const Connection* conn = nullptr;  ///< Connection it was imported on.
};

/// Mappings of peers' allocations, shared and reference counted. Thread-safe.
class ImportCache {
 public:
  /// The mapping of key's allocation on dev, opened now or shared; who names
  /// the exporter for messages. Throws Error (see README: Import).
  Mapping* acquire(const wire::PackedRkey& key, const DeviceInfo& dev, const ProcessIdentity& self,
                   const std::string& who);
  /// Drops one reference; closes the mapping at zero. Never throws.
  void release(Mapping* mapping) noexcept;
  /// Live mappings.
  size_t size() const;
  /// Closes every mapping regardless of references (finalize).
  void clear() noexcept;

 private:
  /// (machine, pid namespace, pid, export id, local device).
  using Key = std::tuple<uint64_t, uint64_t, uint32_t, uint64_t, int>;
  /// Maps key's allocation on dev. Throws Error.
  static std::unique_ptr<Mapping> open(const wire::PackedRkey& key, const DeviceInfo& dev,
                                       const ProcessIdentity& self, const std::string& who);
  /// Unmaps; logs nothing, never throws.
  static void close(Mapping& mapping) noexcept;

  mutable std::mutex mu_;
  std::map<Key, std::unique_ptr<Mapping>> mappings_;
};

}  // namespace plugboard::cudaipc
