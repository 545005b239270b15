// Registered memory: the regions of this process that peers may write
// into, and the keys that name them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <shared_mutex>
#include <string>

#include "error.hpp"

namespace shm {

/// A region of this process registered for peers to target.
struct LocalRegion {
  uint64_t id = 0;        ///< Unique within the context, never reused.
  uint64_t key = 0;       ///< Random secret: a stale or forged key never matches.
  uint8_t* base = nullptr;///< First byte.
  size_t size = 0;        ///< Length in bytes.
};

/// A peer's region, from its packed key.
struct RemoteKey {
  uint64_t region = 0;    ///< The peer's LocalRegion::id.
  uint64_t key = 0;       ///< The peer's LocalRegion::key.
  uint64_t size = 0;      ///< Region length, for range checks at post time.
  uint64_t baseMod8 = 0;  ///< Base address mod 8, for signal alignment checks.
};

/// Bytes of a packed key: magic, version, region, key, size, base mod 8.
constexpr size_t kPackedKeyBytes = 40;

/// Serializes r into buf (*len bytes available; on return the size used).
/// PB_ERR_INVALID with *len = kPackedKeyBytes when buf is too small.
void packKey(const LocalRegion& r, void* buf, size_t* len);
/// Parses a packed key; Error(PB_ERR_INVALID) for anything malformed.
RemoteKey importKey(const void* buf, size_t len);

/// The registry of a context. Lookups from receiver threads hold a shared
/// lock while they copy, so remove() waits for a copy into the region to
/// finish: nothing is written into a region after deregistration returns.
class Regions {
 public:
  /// Registers [base, base + size).
  LocalRegion* add(void* base, size_t size);
  /// Deregisters r; Error(PB_ERR_INVALID) if r is not registered here.
  void remove(LocalRegion* r);
  /// Regions still registered.
  size_t count() const;
  /// Calls fn(pointer to byte offset of region) while holding the region,
  /// after checking that [offset, offset + length) lies inside it. Throws
  /// Error(PB_ERR_REMOTE) naming what is wrong otherwise.
  template <typename Fn>
  void with(uint64_t region, uint64_t key, uint64_t offset, uint64_t length, Fn&& fn) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = regions_.find(region);
    SHM_CHECK(it != regions_.end() && it->second->key == key, PB_ERR_REMOTE,
              "region " + std::to_string(region) + " is not registered (deregistered, or a stale key)");
    const LocalRegion& r = *it->second;
    SHM_CHECK(offset <= r.size && length <= r.size - offset, PB_ERR_REMOTE,
              std::to_string(length) + " bytes at offset " + std::to_string(offset) + " overrun region " +
                  std::to_string(region) + " of " + std::to_string(r.size) + " bytes");
    fn(r.base + offset);
  }

 private:
  mutable std::shared_mutex mu_;
  std::map<uint64_t, std::unique_ptr<LocalRegion>> regions_;
  uint64_t nextId_ = 1;
  std::mt19937_64 random_{std::random_device{}()};
};

}  // namespace shm
