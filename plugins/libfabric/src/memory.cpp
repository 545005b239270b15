#include "memory.hpp"

#include <dlfcn.h>
#include <rdma/fi_endpoint.h>

#include <algorithm>
#include <string>

#include "error.hpp"
#include "wire.hpp"

namespace plugboard::libfabric {

Registration registerBuffer(const MrTarget& target, void* ptr, size_t size, uint64_t access, fi_hmem_iface iface,
                            int device, uint64_t requestedKey, const std::string& what) {
  iovec iov{ptr, size};
  fi_mr_attr attr{};
  attr.mr_iov = &iov;
  attr.iov_count = 1;
  attr.access = access;
  attr.requested_key = requestedKey;  // ignored under FI_MR_PROV_KEY
  attr.iface = iface;
  if (iface == FI_HMEM_CUDA) attr.device.cuda = device;
  fid_mr* raw = nullptr;
  fiCheck(fi_mr_regattr(target.domain, &attr, 0, &raw), what + ": fi_mr_regattr");
  Registration reg;
  reg.mr.reset(raw);
  if (target.mrMode & FI_MR_ENDPOINT) {
    fiCheck(fi_mr_bind(raw, &target.ep->fid, 0), what + ": fi_mr_bind to the endpoint (FI_MR_ENDPOINT)");
    fiCheck(fi_mr_enable(raw), what + ": fi_mr_enable (FI_MR_ENDPOINT)");
  }
  reg.desc = fi_mr_desc(raw);
  reg.key = fi_mr_key(raw);
  OFI_CHECK(reg.key != FI_KEY_NOTAVAIL, PB_ERR_UNSUPPORTED,
            what + ": the provider gives raw keys longer than 64 bits (FI_MR_RAW), which this plugin does not speak");
  return reg;
}

int cudaDeviceOf(const void* ptr) {
  // CUresult cuPointerGetAttribute(void*, CUpointer_attribute, CUdeviceptr);
  using GetAttribute = int (*)(void*, int, unsigned long long);
  constexpr int kDeviceOrdinal = 9;  // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
  static GetAttribute get = []() -> GetAttribute {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    return lib ? reinterpret_cast<GetAttribute>(dlsym(lib, "cuPointerGetAttribute")) : nullptr;
  }();
  OFI_CHECK(get, PB_ERR_UNSUPPORTED,
            "libfabric register_memory: PB_MEM_CUDA needs the CUDA driver (libcuda.so.1), which cannot be loaded");
  int ordinal = -1;
  int rc = get(&ordinal, kDeviceOrdinal, reinterpret_cast<unsigned long long>(ptr));
  OFI_CHECK(rc == 0 && ordinal >= 0, PB_ERR_INVALID,
            "libfabric register_memory: the CUDA driver does not know the pointer as device memory (CUresult " +
                std::to_string(rc) + ")");
  return ordinal;
}

void packRkey(const LocalRegion& region, void* buf, size_t* len) {
  OFI_CHECK(buf && len, PB_ERR_INVALID, "libfabric pack_rkey: buffer and length must not be NULL");
  wire::PackedRkey packed;
  for (const Registration& lane : region.lanes) packed.laneKeys.push_back(lane.key);
  size_t room = *len;
  *len = packed.wireSize();
  OFI_CHECK(room >= packed.wireSize(), PB_ERR_INVALID,
            "libfabric pack_rkey: buffer of " + std::to_string(room) + " bytes is smaller than the " +
                std::to_string(packed.wireSize()) + " this libfabric key needs");
  packed.region = region.id;
  packed.check = region.check;
  packed.mrKey = region.reg.key;
  packed.base = reinterpret_cast<uintptr_t>(region.base);
  packed.size = region.size;
  packed.rmaBase = region.rmaBase;
  packed.flags = region.type == PB_MEM_HOST ? wire::kRkeyHostMemory : 0;
  packed.encode(static_cast<uint8_t*>(buf));
}

RemoteRegion importRkey(const void* buf, size_t len) {
  OFI_CHECK(buf, PB_ERR_INVALID, "libfabric import_rkey: buffer must not be NULL");
  OFI_CHECK(len >= wire::PackedRkey::kHeaderSize, PB_ERR_INVALID,
            "libfabric import_rkey: a libfabric key is at least " + std::to_string(wire::PackedRkey::kHeaderSize) +
                " bytes, got " + std::to_string(len) + " (a key packed by another transport?)");
  const auto* bytes = static_cast<const uint8_t*>(buf);
  OFI_CHECK(wire::loadLE<uint32_t>(bytes) == wire::kRkeyMagic, PB_ERR_INVALID,
            "libfabric import_rkey: not a libfabric key (bad magic)");
  const uint16_t version = wire::loadLE<uint16_t>(bytes + 4);
  OFI_CHECK(version == wire::kVersion, PB_ERR_INVALID,
            "libfabric import_rkey: key format version " + std::to_string(version) + ", this plugin speaks " +
                std::to_string(wire::kVersion));
  auto k = wire::PackedRkey::decode(bytes, len);
  OFI_CHECK(k.base + k.size >= k.base && k.rmaBase + k.size >= k.rmaBase, PB_ERR_INVALID,
            "libfabric import_rkey: a region of " + std::to_string(k.size) + " bytes at " + std::to_string(k.base) +
                " wraps around the address space");
  return RemoteRegion{k.region,  k.check,  k.mrKey, k.base, k.size, k.rmaBase, (k.flags & wire::kRkeyHostMemory) != 0,
                      k.laneKeys};
}

RegionRegistry::RegionRegistry() {
  std::random_device seed;
  checks_.seed((static_cast<uint64_t>(seed()) << 32) ^ seed());
}

LocalRegion* RegionRegistry::add(std::unique_ptr<LocalRegion> region) {
  region->id = nextId_++;
  region->check = checks_();
  LocalRegion* handle = region.get();
  regions_.emplace(handle->id, std::move(region));
  return handle;
}

void RegionRegistry::remove(LocalRegion* region) {
  // Found by address, so a stale or foreign handle is never dereferenced.
  auto it = std::find_if(regions_.begin(), regions_.end(),
                         [&](const auto& entry) { return entry.second.get() == region; });
  OFI_CHECK(it != regions_.end(), PB_ERR_INVALID,
            "libfabric deregister_memory: not a region registered with this context (already deregistered?)");
  regions_.erase(it);  // closes the fi_mr: the provider stops writing into it
}

bool RegionRegistry::contains(const LocalRegion* region) const {
  return std::any_of(regions_.begin(), regions_.end(), [&](const auto& entry) { return entry.second.get() == region; });
}

LocalRegion* RegionRegistry::find(uint64_t id, uint64_t check) const {
  auto it = regions_.find(id);
  return it == regions_.end() || it->second->check != check ? nullptr : it->second.get();
}

}  // namespace plugboard::libfabric
