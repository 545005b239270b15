#include "memory.hpp"

#include <random>

#include "context.hpp"
#include "keep.hpp"
#include "error.hpp"
#include "wire.hpp"

namespace plugboard::ucx {

UcpRkey::~UcpRkey() {
  if (handle_) ucp_rkey_destroy(handle_);
}

void packRkey(const LocalRegion& region, void* buf, size_t* len) {
  PB_UCX_CHECK(buf && len, PB_ERR_INVALID, "ucx pack_rkey: buffer and length must not be NULL");
  wire::PackedRkey key;
  key.base = reinterpret_cast<uintptr_t>(region.base);
  key.size = region.size;
  key.memType = static_cast<uint32_t>(region.type);
  key.regionId = region.id;
  key.regionCheck = region.check;
  key.ucpRkey = region.packed;
  size_t room = *len;
  *len = key.encodedSize();
  PB_UCX_CHECK(room >= key.encodedSize(), PB_ERR_INVALID,
               "ucx pack_rkey: buffer of " + std::to_string(room) + " bytes is smaller than the " +
                   std::to_string(key.encodedSize()) + " this key needs");
  key.encode(static_cast<uint8_t*>(buf));
}

LocalRegion* RegionRegistry::add(Context& ctx, void* base, size_t size, pb_mem_type type) {
  auto region = std::make_unique<LocalRegion>();
  region->owner = &ctx;
  region->base = static_cast<char*>(base);
  region->size = size;
  region->type = type;
  // UCX cannot map zero bytes; such a region has a key of one byte no
  // operation can use (every range check fails or moves nothing).
  if (size == 0) {
    region->packed.assign(1, 0);
  } else {
    ucp_mem_map_params_t params{};
    params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                        UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    params.address = base;
    params.length = size;
    params.memory_type = type == PB_MEM_CUDA ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
    ucs_status_t st = ucp_mem_map(ctx.ucp(), &params, &region->memh);
    PB_UCX_CHECK(st == UCS_OK, PB_ERR_SYSTEM,
                 ucsText("ucx register_memory: ucp_mem_map of " + std::to_string(size) + " bytes failed", st));
    void* packed = nullptr;
    size_t packedLen = 0;
    st = ucp_rkey_pack(ctx.ucp(), region->memh, &packed, &packedLen);
    if (st != UCS_OK) {
      ucp_mem_unmap(ctx.ucp(), region->memh);
      throw Error(PB_ERR_SYSTEM, ucsText("ucx register_memory: ucp_rkey_pack failed", st));
    }
    region->packed.assign(static_cast<uint8_t*>(packed), static_cast<uint8_t*>(packed) + packedLen);
    ucp_rkey_buffer_release(packed);
  }
  if (checkState_ == 0) checkState_ = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}() ^ 1;
  uint64_t z = (checkState_ += 0x9e3779b97f4a7c15ull);  // splitmix64
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  region->check = z ^ (z >> 31);
  region->id = nextId_++;
  LocalRegion* handle = region.get();
  try {
    byId_.emplace(handle->id, handle);
    regions_.emplace(handle, std::move(region));
  } catch (...) {
    byId_.erase(handle->id);
    if (handle->memh) ucp_mem_unmap(ctx.ucp(), handle->memh);
    throw;
  }
  return handle;
}

void RegionRegistry::remove(Context& ctx, LocalRegion* region) {
  // Found by address, so a stale or foreign handle is never dereferenced.
  auto it = regions_.find(region);
  PB_UCX_CHECK(it != regions_.end(), PB_ERR_INVALID,
               "ucx deregister_memory: not a region registered with this context (already deregistered?)");
  if (it->second->memh) {
    ucs_status_t st = ucp_mem_unmap(ctx.ucp(), it->second->memh);
    if (st != UCS_OK) ctx.log(PB_LOG_WARN, ucsText("ucp_mem_unmap failed", st));
  }
  byId_.erase(it->second->id);
  regions_.erase(it);
}

LocalRegion* RegionRegistry::find(uint64_t id, uint64_t check) const {
  auto it = byId_.find(id);
  return it != byId_.end() && it->second->check == check ? it->second : nullptr;
}

void RegionRegistry::forget() noexcept {
  keepUntilExit(std::move(regions_));  // still mapped: UCX may use them
  regions_.clear();
  byId_.clear();
}

void RegionRegistry::clear(Context& ctx) noexcept {
  for (auto& [handle, region] : regions_)
    if (region->memh) ucp_mem_unmap(ctx.ucp(), region->memh);
  regions_.clear();
  byId_.clear();
}

}  // namespace plugboard::ucx
