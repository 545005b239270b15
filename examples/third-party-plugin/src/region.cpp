#include "region.hpp"

#include <cstring>
#include <mutex>

namespace shm {
namespace {

constexpr uint32_t kKeyMagic = 0x52534250;  // "PBSR"
constexpr uint32_t kKeyVersion = 1;

void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}

uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

}  // namespace

void packKey(const LocalRegion& r, void* buf, size_t* len) {
  SHM_CHECK(len, PB_ERR_INVALID, "shm pack_rkey: len must not be NULL");
  if (*len < kPackedKeyBytes || !buf) {
    *len = kPackedKeyBytes;
    throw Error(PB_ERR_INVALID, "shm pack_rkey: the buffer needs " + std::to_string(kPackedKeyBytes) + " bytes");
  }
  auto* p = static_cast<uint8_t*>(buf);
  put64(p, uint64_t(kKeyVersion) << 32 | kKeyMagic);
  put64(p + 8, r.id);
  put64(p + 16, r.key);
  put64(p + 24, r.size);
  put64(p + 32, reinterpret_cast<uintptr_t>(r.base) % 8);
  *len = kPackedKeyBytes;
}

RemoteKey importKey(const void* buf, size_t len) {
  SHM_CHECK(buf && len == kPackedKeyBytes, PB_ERR_INVALID,
            "shm import_rkey: a packed key has " + std::to_string(kPackedKeyBytes) + " bytes, got " + std::to_string(len));
  const auto* p = static_cast<const uint8_t*>(buf);
  const uint64_t tag = get64(p);
  SHM_CHECK(uint32_t(tag) == kKeyMagic && uint32_t(tag >> 32) == kKeyVersion, PB_ERR_INVALID,
            "shm import_rkey: bad magic or version (not a key packed by this plugin)");
  RemoteKey k{get64(p + 8), get64(p + 16), get64(p + 24), get64(p + 32)};
  SHM_CHECK(k.baseMod8 < 8, PB_ERR_INVALID, "shm import_rkey: corrupt key (base mod 8 out of range)");
  return k;
}

LocalRegion* Regions::add(void* base, size_t size) {
  auto r = std::make_unique<LocalRegion>();
  r->base = static_cast<uint8_t*>(base);
  r->size = size;
  std::unique_lock<std::shared_mutex> lock(mu_);
  r->id = nextId_++;
  r->key = random_();
  LocalRegion* raw = r.get();
  regions_[raw->id] = std::move(r);
  return raw;
}

void Regions::remove(LocalRegion* r) {
  std::unique_lock<std::shared_mutex> lock(mu_);  // waits for copies into it
  auto it = r ? regions_.find(r->id) : regions_.end();
  SHM_CHECK(it != regions_.end() && it->second.get() == r, PB_ERR_INVALID,
            "shm deregister_memory: the region is not registered with this context");
  regions_.erase(it);
}

size_t Regions::count() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return regions_.size();
}

}  // namespace shm
