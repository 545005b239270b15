#include "memory.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "context.hpp"
#include "cuda_api.hpp"
#include "error.hpp"
#include "pidfd.hpp"

namespace plugboard::cudaipc {

namespace {

/// "0x7f12a0000000".
std::string hex(uint64_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

/// What the driver knows about a pointer (zeros for one it does not know).
struct PointerFacts {
  uint64_t memoryType = 0;      // CUmemorytype
  int device = -1;
  uint64_t managed = 0;
  uint64_t legacyIpcCapable = 0;
  uint64_t handleTypes = 0;     // CUmemAllocationHandleType bits cuMemExportToShareableHandle accepts
  CUmemoryPool pool = nullptr;  // non-null for cudaMallocAsync/pool memory
};

PointerFacts pointerFacts(const void* ptr) {
  const DriverApi& d = DriverApi::get();
  PointerFacts f;
  // Booleans and enums are written as 1..8 bytes: zero-initialised 64-bit
  // slots read correctly whatever width the driver uses.
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                                 CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE};
  void* data[] = {&f.memoryType, &f.device, &f.managed, &f.legacyIpcCapable, &f.handleTypes, &f.pool};
  d.check(d.pointerGetAttributes(6, attrs, data, reinterpret_cast<CUdeviceptr>(ptr)), PB_ERR_INVALID,
          "cudaipc register_memory: cuPointerGetAttributes(" + hex(reinterpret_cast<uintptr_t>(ptr)) + ")");
  return f;
}

}  // namespace

Export::~Export() {
  if (fd >= 0) ::close(fd);
  if (handle) {
    try {
      DriverApi::get().memRelease(handle);
    } catch (...) {
    }
  }
}

LocalRegion* ExportRegistry::add(Context& ctx, void* ptr, size_t size) {
  auto region = std::make_unique<LocalRegion>();
  region->owner = &ctx;
  region->ptr = static_cast<char*>(ptr);
  region->size = size;
  if (ptr || size) {
    const std::string what = "cudaipc register_memory of " + std::to_string(size) + " bytes at " +
                             hex(reinterpret_cast<uintptr_t>(ptr)) + ": ";
    IPC_CHECK(ptr, PB_ERR_INVALID, what + "NULL pointer");
    PointerFacts f = pointerFacts(ptr);
    IPC_CHECK(f.memoryType != 0, PB_ERR_INVALID,
              what + "not memory CUDA knows (register host memory as PB_MEM_HOST with another transport)");
    IPC_CHECK(!f.managed, PB_ERR_UNSUPPORTED,
              what + "managed (cudaMallocManaged) memory cannot be shared through CUDA IPC; use cudaMalloc");
    IPC_CHECK(f.memoryType == CU_MEMORYTYPE_DEVICE, PB_ERR_INVALID,
              what + "this is host memory (pinned or registered), not GPU memory; cudaipc moves GPU memory only");
    const DriverApi& d = DriverApi::get();
    ContextGuard guard(ctx.device(f.device).primary);
    CUdeviceptr base = 0;
    size_t allocSize = 0;
    d.check(d.memGetAddressRange(&base, &allocSize, reinterpret_cast<CUdeviceptr>(ptr)), PB_ERR_INVALID,
            what + "cuMemGetAddressRange");
    uint64_t offset = reinterpret_cast<uintptr_t>(ptr) - base;
    IPC_CHECK(rangeFits(offset, size, allocSize), PB_ERR_INVALID,
              what + "the range runs past the end of its CUDA allocation (" + std::to_string(allocSize) +
                  " bytes at " + hex(base) + ")");
    region->device = f.device;
    region->exported = exportFor(ctx, base, allocSize, f.device, f.legacyIpcCapable != 0, f.handleTypes, f.pool);
  }
  std::lock_guard<std::mutex> lock(mu_);
  LocalRegion* handle = region.get();
  regions_.emplace(handle, std::move(region));
  return handle;
}

std::shared_ptr<Export> ExportRegistry::exportFor(Context& ctx, uint64_t base, uint64_t allocSize, int device,
                                                  bool legacyCapable, uint64_t handleTypes, bool fromPool) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = exports_.find(base);
    if (it != exports_.end()) {
      auto existing = it->second.lock();
      if (existing && existing->allocSize == allocSize && existing->device == device) return existing;
      exports_.erase(it);
    }
  }
  const std::string what = "cudaipc register_memory: cannot export the CUDA allocation of " +
                           std::to_string(allocSize) + " bytes at " + hex(base) + " on GPU " + std::to_string(device) +
                           ": ";
  auto exp = std::make_shared<Export>();
  exp->id = ctx.nextExportId();
  exp->device = device;
  exp->ctx = ctx.device(device).primary;
  exp->allocBase = base;
  exp->allocSize = allocSize;
  const DriverApi& d = DriverApi::get();
  if (legacyCapable) {
    // cudaMalloc memory: a legacy IPC handle is plain bytes and needs no
    // permission to open, so it is always the first choice.
    exp->kind = wire::ExportKind::Legacy;
    cudaCheck(cudaIpcGetMemHandle(&exp->legacy, reinterpret_cast<void*>(base)), PB_ERR_UNSUPPORTED,
              what + "cudaIpcGetMemHandle");
  } else if (handleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    exp->kind = wire::ExportKind::CuMemFd;
    d.check(d.memRetainAllocationHandle(&exp->handle, reinterpret_cast<void*>(base)), PB_ERR_UNSUPPORTED,
            what + "cuMemRetainAllocationHandle");
    d.check(d.memExportToShareableHandle(&exp->fd, exp->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
            PB_ERR_UNSUPPORTED, what + "cuMemExportToShareableHandle(POSIX fd)");
  } else if (fromPool) {
    throw Error(PB_ERR_UNSUPPORTED, what + "it comes from a stream-ordered memory pool (cudaMallocAsync), which "
                                           "cudaipc cannot export yet; use cudaMalloc or cuMemCreate");
  } else {
    throw Error(PB_ERR_UNSUPPORTED,
                what + "it is neither cudaMalloc memory (legacy CUDA IPC) nor a cuMemCreate allocation with "
                       "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR in requestedHandleTypes");
  }
  std::lock_guard<std::mutex> lock(mu_);
  exports_[base] = exp;
  return exp;
}

void ExportRegistry::remove(LocalRegion* region) {
  std::unique_ptr<LocalRegion> owned;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = regions_.find(region);
    IPC_CHECK(it != regions_.end(), PB_ERR_INVALID,
              "cudaipc deregister_memory: not a region registered with this context (already deregistered?)");
    owned = std::move(it->second);
    regions_.erase(it);
  }
  // The export (fd, retained handle) goes with its last region; a peer that
  // imported it keeps its own reference to the memory until it releases.
  if (owned->exported && owned->exported.use_count() == 1) {
    ContextGuard guard(owned->exported->ctx);
    owned.reset();
  }
}

bool ExportRegistry::contains(const LocalRegion* region) const {
  std::lock_guard<std::mutex> lock(mu_);
  return regions_.count(const_cast<LocalRegion*>(region)) != 0;
}

size_t ExportRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return regions_.size();
}

void ExportRegistry::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  regions_.clear();
  exports_.clear();
}

void packRkey(const Context& ctx, const LocalRegion& region, void* buf, size_t* len) {
  IPC_CHECK(buf && len, PB_ERR_INVALID, "cudaipc pack_rkey: buffer and length must not be NULL");
  size_t room = *len;
  *len = wire::PackedRkey::kSize;
  IPC_CHECK(room >= wire::PackedRkey::kSize, PB_ERR_INVALID,
            "cudaipc pack_rkey: buffer of " + std::to_string(room) + " bytes is smaller than the " +
                std::to_string(wire::PackedRkey::kSize) + " a cudaipc key needs");
  wire::PackedRkey k;
  k.pid = ctx.self().pid;
  k.machine = ctx.self().machine;
  k.pidNamespace = ctx.self().pidNamespace;
  k.size = region.size;
  if (const Export* e = region.exported.get()) {
    k.kind = e->kind;
    k.exportId = e->id;
    k.allocBase = e->allocBase;
    k.allocSize = e->allocSize;
    k.offset = reinterpret_cast<uintptr_t>(region.ptr) - e->allocBase;
    if (e->kind == wire::ExportKind::Legacy) {
      static_assert(sizeof(cudaIpcMemHandle_t) == 64, "cudaIpcMemHandle_t is no longer 64 bytes");
      std::memcpy(k.handle.data(), &e->legacy, sizeof(e->legacy));
    } else {
      wire::storeLE(k.handle.data(), static_cast<uint32_t>(e->fd));
    }
  }
  k.encode(static_cast<uint8_t*>(buf));
}

wire::PackedRkey parseRkey(const void* buf, size_t len, const ProcessIdentity& self, const std::string& from) {
  const std::string what = "cudaipc import_rkey: key from " + from + ": ";
  IPC_CHECK(buf, PB_ERR_INVALID, "cudaipc import_rkey: buffer must not be NULL");
  IPC_CHECK(len == wire::PackedRkey::kSize, PB_ERR_INVALID,
            what + "a cudaipc key is " + std::to_string(wire::PackedRkey::kSize) + " bytes, got " +
                std::to_string(len) + " (a key packed by another transport?)");
  auto k = wire::PackedRkey::decode(static_cast<const uint8_t*>(buf));
  IPC_CHECK(k.magic == wire::kRkeyMagic, PB_ERR_INVALID, what + "not a cudaipc key (bad magic)");
  IPC_CHECK(k.version == wire::kVersion, PB_ERR_INVALID,
            what + "key format version " + std::to_string(k.version) + ", this plugin speaks " +
                std::to_string(wire::kVersion));
  IPC_CHECK(k.kind == wire::ExportKind::Empty || k.kind == wire::ExportKind::Legacy ||
                k.kind == wire::ExportKind::CuMemFd,
            PB_ERR_INVALID, what + "unknown export kind " + std::to_string(static_cast<uint32_t>(k.kind)));
  IPC_CHECK(k.kind != wire::ExportKind::Empty || k.size == 0, PB_ERR_INVALID,
            what + "an empty region of " + std::to_string(k.size) + " bytes");
  IPC_CHECK(rangeFits(k.offset, k.size, k.allocSize), PB_ERR_INVALID,
            what + "region [" + std::to_string(k.offset) + ", +" + std::to_string(k.size) +
                ") lies outside its allocation of " + std::to_string(k.allocSize) + " bytes");
  IPC_CHECK(k.machine == self.machine, PB_ERR_REMOTE,
            what + "it was exported on another machine (boot id differs); CUDA IPC works within one machine only");
  return k;
}

// ---- imports ----------------------------------------------------------------

Mapping* ImportCache::acquire(const wire::PackedRkey& key, const DeviceInfo& dev, const ProcessIdentity& self,
                              const std::string& who) {
  Key k{key.machine, key.pidNamespace, key.pid, key.exportId, dev.ordinal};
  std::lock_guard<std::mutex> lock(mu_);
  auto it = mappings_.find(k);
  if (it == mappings_.end()) it = mappings_.emplace(k, open(key, dev, self, who)).first;
  ++it->second->refs;
  return it->second.get();
}

std::unique_ptr<Mapping> ImportCache::open(const wire::PackedRkey& key, const DeviceInfo& dev,
                                           const ProcessIdentity& self, const std::string& who) {
  auto m = std::make_unique<Mapping>();
  m->kind = key.kind;
  m->size = key.allocSize;
  m->ctx = dev.primary;
  if (key.kind == wire::ExportKind::Empty) {
    m->borrowed = true;
    return m;
  }
  const std::string what = "cudaipc import_rkey: cannot map the " + std::to_string(key.allocSize) +
                           "-byte allocation of " + who + " (pid " + std::to_string(key.pid) + ") on " +
                           dev.describe() + ": ";
  const DriverApi& d = DriverApi::get();
  ContextGuard guard(dev.primary);
  if (key.pid == self.pid && key.pidNamespace == self.pidNamespace) {
    // Our own process (CUDA refuses to open its own IPC handles): the
    // exporter's address is valid here; a kernel on another GPU needs peer
    // access to it.
    m->borrowed = true;
    m->base = reinterpret_cast<char*>(key.allocBase);
    int owner = -1;
    CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL;
    void* data = &owner;
    d.check(d.pointerGetAttributes(1, &attr, &data, key.allocBase), PB_ERR_INVALID, what + "cuPointerGetAttributes");
    IPC_CHECK(owner >= 0, PB_ERR_REMOTE, what + "this process has no allocation at " + hex(key.allocBase) + " any more");
    if (owner != dev.ordinal) {
      cudaError_t e = cudaDeviceEnablePeerAccess(owner, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
      else cudaCheck(e, PB_ERR_SYSTEM, what + "cudaDeviceEnablePeerAccess(" + std::to_string(owner) + ")");
    }
    return m;
  }
  if (key.kind == wire::ExportKind::Legacy) {
    cudaIpcMemHandle_t handle;
    std::memcpy(&handle, key.handle.data(), sizeof(handle));
    void* ptr = nullptr;
    cudaError_t e = cudaIpcOpenMemHandle(&ptr, handle, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw Error(PB_ERR_SYSTEM, what + "cudaIpcOpenMemHandle: " + cudaText(e) +
                                     " (has the exporter freed the buffer or exited? can these GPUs reach each other?)");
    }
    m->base = static_cast<char*>(ptr);
    return m;
  }
  // cuMem: fetch the exporter's fd, import it, map it into a fresh VA range.
  IPC_CHECK(key.pidNamespace == self.pidNamespace, PB_ERR_UNSUPPORTED,
            what + "the exporter runs in another PID namespace (container?), so its cuMem fd cannot be fetched; use "
                   "cudaMalloc buffers (legacy CUDA IPC) across containers");
  int fd = copyPeerFd(key.pid, static_cast<int>(wire::loadLE<uint32_t>(key.handle.data())), who);
  CUresult r = d.memImportFromShareableHandle(&m->handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  ::close(fd);
  d.check(r, PB_ERR_SYSTEM, what + "cuMemImportFromShareableHandle");
  // From here on, undo what was done if a later step fails.
  struct Undo {
    const DriverApi& d;
    Mapping& m;
    bool reserved = false, mapped = false, done = false;
    ~Undo() {
      if (done) return;
      if (mapped) d.memUnmap(reinterpret_cast<CUdeviceptr>(m.base), m.size);
      if (reserved) d.memAddressFree(reinterpret_cast<CUdeviceptr>(m.base), m.size);
      d.memRelease(m.handle);
    }
  } undo{d, *m};
  CUmemAllocationProp prop{};
  d.check(d.memGetAllocationPropertiesFromHandle(&prop, m->handle), PB_ERR_SYSTEM,
          what + "cuMemGetAllocationPropertiesFromHandle");
  size_t granularity = 0;
  d.check(d.memGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), PB_ERR_SYSTEM,
          what + "cuMemGetAllocationGranularity");
  IPC_CHECK(granularity && key.allocSize % granularity == 0, PB_ERR_REMOTE,
            what + "allocation size is not a multiple of its granularity (" + std::to_string(granularity) + ")");
  CUdeviceptr va = 0;
  d.check(d.memAddressReserve(&va, key.allocSize, granularity, 0, 0), PB_ERR_NOMEM,
          what + "cuMemAddressReserve");
  m->base = reinterpret_cast<char*>(va);
  undo.reserved = true;
  d.check(d.memMap(va, key.allocSize, 0, m->handle, 0), PB_ERR_SYSTEM, what + "cuMemMap");
  undo.mapped = true;
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = dev.ordinal;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  d.check(d.memSetAccess(va, key.allocSize, &access, 1), PB_ERR_SYSTEM,
          what + "cuMemSetAccess (can " + dev.describe() + " reach the exporter's GPU?)");
  undo.done = true;
  return m;
}

void ImportCache::close(Mapping& m) noexcept {
  if (m.borrowed) return;
  try {
    const DriverApi& d = DriverApi::get();
    ContextGuard guard(m.ctx);
    if (m.kind == wire::ExportKind::Legacy) {
      cudaIpcCloseMemHandle(m.base);
    } else if (m.kind == wire::ExportKind::CuMemFd) {
      d.memUnmap(reinterpret_cast<CUdeviceptr>(m.base), m.size);
      d.memAddressFree(reinterpret_cast<CUdeviceptr>(m.base), m.size);
      d.memRelease(m.handle);
    }
  } catch (...) {
  }
}

void ImportCache::release(Mapping* mapping) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = mappings_.begin(); it != mappings_.end(); ++it) {
    if (it->second.get() != mapping) continue;
    if (--it->second->refs == 0) {
      close(*it->second);
      mappings_.erase(it);
    }
    return;
  }
}

size_t ImportCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return mappings_.size();
}

void ImportCache::clear() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, m] : mappings_) close(*m);
  mappings_.clear();
}

}  // namespace plugboard::cudaipc
