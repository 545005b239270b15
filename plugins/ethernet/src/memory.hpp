// Registered memory: local regions (pb_mr), imported remote keys (pb_rkey)
// and the per-context registry the receiver thread resolves frames against.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <unordered_map>

namespace plugboard::ethernet {

class Context;

/// True when [offset, offset + length) lies inside [0, size), without overflow.
inline bool rangeFits(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

/// A local host-memory region registered with a context. The handle the core
/// holds as pb_mr*. Fields are fixed after registration.
struct LocalRegion {
  const Context* owner = nullptr;  ///< Context that registered it.
  uint64_t id = 0;                 ///< Unique within the context, never reused.
  uint64_t key = 0;                ///< Random; a frame must quote it to touch the region.
  char* base = nullptr;            ///< First byte.
  size_t size = 0;                 ///< Bytes.
  int pins = 0;                    ///< Receives in progress; guarded by the registry's mutex.
};

/// A peer's region as imported from its packed key. The handle the core
/// holds as pb_rkey*.
struct RemoteRegion {
  uint64_t id = 0;    ///< Region id in the peer's context.
  uint64_t key = 0;   ///< The region's random key.
  uint64_t base = 0;  ///< Peer's address of the first byte (for alignment checks only).
  uint64_t size = 0;  ///< Bytes.
};

/// Serializes what a peer needs to target region (wire::PackedRkey) into
/// buf; *len is the room on entry and the size used on return.
void packRkey(const LocalRegion& region, void* buf, size_t* len);

/// Parses a packed key; throws Error(PB_ERR_INVALID) on a bad size or magic.
RemoteRegion importRkey(const void* buf, size_t len);

/// The regions of one context, looked up by (id, key). Thread-safe.
class RegionRegistry {
 public:
  /// Keeps a region from being deregistered while a receive writes into it.
  class Pin {
   public:
    Pin() = default;
    Pin(RegionRegistry* registry, LocalRegion* region) : registry_(registry), region_(region) {}
    Pin(Pin&& other) noexcept : registry_(other.registry_), region_(other.region_) { other.region_ = nullptr; }
    Pin& operator=(Pin&&) = delete;
    ~Pin();
    /// The pinned region, or null when the lookup failed.
    LocalRegion* get() const { return region_; }

   private:
    RegionRegistry* registry_ = nullptr;
    LocalRegion* region_ = nullptr;
  };

  RegionRegistry();
  /// Registers [base, base + size) and returns its handle (owned here).
  LocalRegion* add(const Context* owner, void* base, size_t size);
  /// Removes region and frees it, first waiting for its pins to drop.
  void remove(LocalRegion* region);
  /// Pins the region with this id if its key matches; an empty Pin if not.
  Pin pin(uint64_t id, uint64_t key);
  /// Number of live regions.
  size_t size() const;

 private:
  /// Drops a pin taken by pin(); wakes remove() at zero.
  void unpin(LocalRegion* region);

  mutable std::mutex mu_;
  std::condition_variable unpinned_;
  std::unordered_map<uint64_t, std::unique_ptr<LocalRegion>> regions_;
  uint64_t nextId_ = 1;
  std::mt19937_64 keys_;
};

}  // namespace plugboard::ethernet
