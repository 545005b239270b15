#include "memory.hpp"

#include <algorithm>
#include <cstring>

#include "error.hpp"
#include "wire.hpp"

namespace plugboard::ethernet {

void packRkey(const LocalRegion& region, void* buf, size_t* len) {
  ETH_CHECK(buf && len, PB_ERR_INVALID, "pack_rkey: buffer and length must not be NULL");
  size_t room = *len;
  *len = wire::PackedRkey::kSize;
  ETH_CHECK(room >= wire::PackedRkey::kSize, PB_ERR_INVALID,
            "pack_rkey: buffer of " + std::to_string(room) + " bytes is smaller than the " +
                std::to_string(wire::PackedRkey::kSize) + " an ethernet key needs");
  wire::PackedRkey packed{wire::kRkeyMagic, wire::kVersion, region.id, region.key,
                          reinterpret_cast<uintptr_t>(region.base), region.size};
  packed.encode(static_cast<uint8_t*>(buf));
}

RemoteRegion importRkey(const void* buf, size_t len) {
  ETH_CHECK(buf, PB_ERR_INVALID, "import_rkey: buffer must not be NULL");
  ETH_CHECK(len == wire::PackedRkey::kSize, PB_ERR_INVALID,
            "import_rkey: an ethernet key is " + std::to_string(wire::PackedRkey::kSize) + " bytes, got " +
                std::to_string(len) + " (a key packed by another transport?)");
  auto packed = wire::PackedRkey::decode(static_cast<const uint8_t*>(buf));
  ETH_CHECK(packed.magic == wire::kRkeyMagic, PB_ERR_INVALID,
            "import_rkey: not an ethernet key (bad magic)");
  ETH_CHECK(packed.version == wire::kVersion, PB_ERR_INVALID,
            "import_rkey: key format version " + std::to_string(packed.version) + ", this plugin speaks " +
                std::to_string(wire::kVersion));
  return RemoteRegion{packed.region, packed.key, packed.base, packed.size};
}

RegionRegistry::Pin::~Pin() {
  if (region_) registry_->unpin(region_);
}

RegionRegistry::RegionRegistry() {
  std::random_device seed;
  keys_.seed((static_cast<uint64_t>(seed()) << 32) ^ seed());
}

LocalRegion* RegionRegistry::add(const Context* owner, void* base, size_t size) {
  auto region = std::make_unique<LocalRegion>();
  region->owner = owner;
  region->base = static_cast<char*>(base);
  region->size = size;
  std::lock_guard<std::mutex> lock(mu_);
  region->id = nextId_++;
  region->key = keys_();
  LocalRegion* handle = region.get();
  regions_.emplace(handle->id, std::move(region));
  return handle;
}

void RegionRegistry::remove(LocalRegion* region) {
  std::unique_lock<std::mutex> lock(mu_);
  // Found by address, so a stale or foreign handle is never dereferenced.
  auto it = std::find_if(regions_.begin(), regions_.end(),
                         [&](const auto& entry) { return entry.second.get() == region; });
  ETH_CHECK(it != regions_.end(), PB_ERR_INVALID,
            "deregister_memory: not a region registered with this context (already deregistered?)");
  // Take it out of lookups first, then wait for receives already writing.
  std::unique_ptr<LocalRegion> owned = std::move(it->second);
  regions_.erase(it);
  unpinned_.wait(lock, [&] { return owned->pins == 0; });
}

RegionRegistry::Pin RegionRegistry::pin(uint64_t id, uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = regions_.find(id);
  if (it == regions_.end() || it->second->key != key) return Pin();
  ++it->second->pins;
  return Pin(this, it->second.get());
}

size_t RegionRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return regions_.size();
}

void RegionRegistry::unpin(LocalRegion* region) {
  std::lock_guard<std::mutex> lock(mu_);
  if (--region->pins == 0) unpinned_.notify_all();
}

}  // namespace plugboard::ethernet

