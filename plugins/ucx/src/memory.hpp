// Registered memory: local regions (pb_mr, ucp_mem_map + a packed UCP
// rkey), imported remote keys (pb_rkey, ucp_ep_rkey_unpack) and the
// per-context registry of local regions.
#pragma once

#include <plugboard/transport.h>
#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace plugboard::ucx {

class Context;
class Connection;

/// True when [offset, offset + length) lies inside [0, size), without overflow.
inline bool rangeFits(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

/// A local region registered with a context. The handle the core holds as
/// pb_mr*. Fields are fixed after registration.
struct LocalRegion {
  const Context* owner = nullptr;  ///< Context that registered it.
  char* base = nullptr;            ///< First byte.
  size_t size = 0;                 ///< Bytes.
  pb_mem_type type = PB_MEM_HOST;  ///< Memory type it was registered as.
  ucp_mem_h memh = nullptr;        ///< UCP's registration (null for size 0).
  std::vector<uint8_t> packed;     ///< ucp_rkey_pack output, kept for pack_rkey.
  uint64_t id = 0;                 ///< Never reused within the context; named by active messages.
  uint64_t check = 0;              ///< Random; a message must quote it with the id.
};

/// A UCP rkey unpacked on one endpoint. Shared by the pb_rkey handle and by
/// every operation in flight that uses it, so release_rkey while a put is
/// still queued inside UCX cannot pull the key from under it. Whoever drops
/// the last reference holds the context's worker lock.
class UcpRkey {
 public:
  explicit UcpRkey(ucp_rkey_h handle) : handle_(handle) {}
  /// ucp_rkey_destroy, unless leak() was called.
  ~UcpRkey();
  UcpRkey(const UcpRkey&) = delete;
  UcpRkey& operator=(const UcpRkey&) = delete;
  /// The UCP handle.
  ucp_rkey_h get() const { return handle_; }
  /// Never destroy the handle: UCX may still use it (a close that timed out).
  void leak() { handle_ = nullptr; }

 private:
  ucp_rkey_h handle_;
};

/// A peer's region as imported from its packed key on one connection. The
/// handle the core holds as pb_rkey*.
struct RemoteKey {
  const Connection* conn = nullptr;  ///< Connection it was imported on.
  uint64_t base = 0;                 ///< Peer's address of the first byte.
  uint64_t size = 0;                 ///< Bytes.
  uint64_t regionId = 0;             ///< The owner's id and check for the region,
  uint64_t regionCheck = 0;          ///< quoted by active messages.
  uint32_t memType = PB_MEM_HOST;    ///< pb_mem_type of the peer's region.
  std::shared_ptr<UcpRkey> rkey;     ///< For ucp_put_nbx / ucp_atomic_op_nbx.
};

/// Writes region's packed key (wire::PackedRkey) into buf; *len is the room
/// on entry and the size used on return. Throws Error(PB_ERR_INVALID) when
/// the room is too small.
void packRkey(const LocalRegion& region, void* buf, size_t* len);

/// The local regions of one context. Every call runs under the context's
/// worker lock (UCP's context is not thread-safe on its own).
class RegionRegistry {
 public:
  /// Maps [base, base + size) of type with ucp_mem_map and packs its key.
  /// Throws Error (PB_ERR_SYSTEM when UCX refuses).
  LocalRegion* add(Context& ctx, void* base, size_t size, pb_mem_type type);
  /// Unmaps region and frees it; throws Error(PB_ERR_INVALID) for a handle
  /// this registry does not hold.
  void remove(Context& ctx, LocalRegion* region);
  /// Unmaps every region left (finalize). Never throws.
  void clear(Context& ctx) noexcept;
  /// Drops every region without unmapping it, for a context whose UCX
  /// objects are kept to the end of the process. Never throws.
  void forget() noexcept;
  /// Number of live regions.
  size_t size() const { return regions_.size(); }
  /// The live region with this id if check matches; NULL if none.
  LocalRegion* find(uint64_t id, uint64_t check) const;

 private:
  std::unordered_map<const LocalRegion*, std::unique_ptr<LocalRegion>> regions_;
  std::unordered_map<uint64_t, LocalRegion*> byId_;
  uint64_t nextId_ = 1;
  uint64_t checkState_ = 0;  // splitmix64 state, seeded from std::random_device
};

}  // namespace plugboard::ucx
