// The nvls group flow against a FAKE driver table: no GPU, no CUDA driver,
// nothing of libcuda is ever called here (the test links neither). Each
// rank is a thread with its own FakeDriver (a recorder that checks its
// arguments and tracks every handle, reservation, mapping, binding and
// context it hands out) and an in-process all_gather; the multicast
// objects live in a FakeWorld the ranks share, which refuses a bind before
// every device was added. Checked: the exact call order, the views, the
// size rounding, handle kinds, failure at every step on one rank (every
// rank fails naming it, nothing stays held), teardown order, the support
// checks, and the gate (no driver call when it refuses).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstddef>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <dirent.h>
#include <functional>
#include <map>
#include <mutex>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "entry.hpp"
#include "env_guard.hpp"
#include "error.hpp"
#include "exchange.hpp"
#include "gate.hpp"
#include "group.hpp"
#include "support.hpp"

using namespace plugboard::nvls;
using plugboard::test::EnvGuard;

namespace {

constexpr size_t kMiB = size_t(1) << 20;

// ---- the fake world and driver ---------------------------------------------------

/// What the ranks share: multicast objects and one global call log.
struct FakeWorld {
  struct Object {
    unsigned numDevices = 0;
    size_t size = 0;
    std::set<CUdevice> added, bound;
    int refs = 0;
  };
  std::mutex mu;
  std::map<uint64_t, Object> objects;
  uint64_t nextObject = 1;
  std::map<ino_t, uint64_t> fdObjects;  ///< memfd inode -> object, for posix_fd handles
  std::vector<std::pair<int, std::string>> log;

  void note(int rank, const std::string& call) {
    std::lock_guard<std::mutex> lock(mu);
    log.emplace_back(rank, call);
  }
  /// Index of the first / last log entry starting with prefix (-1 when none).
  long first(const std::string& prefix) {
    for (size_t i = 0; i < log.size(); ++i)
      if (log[i].second.rfind(prefix, 0) == 0) return static_cast<long>(i);
    return -1;
  }
  long last(const std::string& prefix) {
    for (size_t i = log.size(); i-- > 0;)
      if (log[i].second.rfind(prefix, 0) == 0) return static_cast<long>(i);
    return -1;
  }
  /// "" or what is still alive.
  std::string leaks() {
    std::string out;
    for (auto& [id, o] : objects)
      if (o.refs != 0 || !o.bound.empty())
        out += "multicast object " + std::to_string(id) + ": " + std::to_string(o.refs) + " refs, " +
               std::to_string(o.bound.size()) + " bindings; ";
    return out;
  }
};

class FakeDriver;
thread_local FakeDriver* tFake = nullptr;

/// One rank's driver. Knobs first, then what it recorded.
class FakeDriver {
 public:
  FakeDriver(FakeWorld& world, int rank, int nranks) : world_(world), rank_(rank), nranks_(nranks) {}

  // knobs
  int driverVersion = 12080;
  int multicastSupported = 1;
  int fabricSupported = 0;
  int posixSupported = 1;
  size_t mcGranularity = 2 * kMiB;
  size_t ucGranularity = 2 * kMiB;
  std::string failAt;  ///< label of the call that fails
  int failOccurrence = 1;
  CUresult failWith = CUDA_ERROR_OUT_OF_MEMORY;

  // record
  std::vector<std::string> calls;  ///< driver calls and all_gathers, labelled
  int driverCalls = 0;
  int multicastCreates = 0;
  CUmulticastObjectProp lastMulticastProp{};

  /// The table whose entries come here (through tFake: set it in the rank's thread).
  NvlsDriver table() const;
  /// "" or what this rank still holds.
  std::string leaks() const {
    std::string out;
    if (retained_ != 0) out += "primary context retained " + std::to_string(retained_) + "x; ";
    if (current_ != nullptr) out += "a context is still current; ";
    for (auto& [h, info] : handles_) out += std::string(info.mc ? "mc" : "mem") + " handle " + std::to_string(h) + "; ";
    for (auto& [p, r] : reservations_) out += "reservation " + std::to_string(p) + (r.mapped ? " (mapped)" : "") + "; ";
    if (!bindings_.empty()) out += std::to_string(bindings_.size()) + " binding(s); ";
    return out;
  }
  /// Notes an all_gather in the call list (the bootstrap calls it).
  void noteGather() {
    calls.push_back("all_gather");
    world_.note(rank_, "all_gather");
  }

  static FakeDriver& f() { return *tFake; }

 private:
  struct HandleInfo {
    bool mc = false;
    uint64_t object = 0;
    size_t size = 0;
  };
  struct Reservation {
    size_t size = 0;
    CUmemGenericAllocationHandle mapped = 0;
    std::string tag;  ///< what was last mapped there
  };

  CUcontext ctx() const { return reinterpret_cast<CUcontext>(uintptr_t(0x1000 + rank_)); }
  std::string tag(CUmemGenericAllocationHandle h) const {
    auto it = handles_.find(h);
    return it == handles_.end() ? "?" : it->second.mc ? "mc" : "mem";
  }
  /// Records label; returns the injected failure when label is failAt's turn.
  CUresult enter(const std::string& label) {
    calls.push_back(label);
    ++driverCalls;
    world_.note(rank_, label);
    if (label == failAt && ++failSeen_ == failOccurrence) return failWith;
    return CUDA_SUCCESS;
  }
  CUresult needCtx() const { return current_ == ctx() && retained_ > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT; }
  bool handleTypeOk(unsigned long long t) const {
    return t == CU_MEM_HANDLE_TYPE_FABRIC || t == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  }

  // The entries (static: the table holds plain function pointers).
  static CUresult getErrorName(CUresult r, const char** s);
  static CUresult driverGetVersion(int* v);
  static CUresult deviceGet(CUdevice* d, int ordinal);
  static CUresult deviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d);
  static CUresult primaryCtxRetain(CUcontext* c, CUdevice d);
  static CUresult primaryCtxRelease(CUdevice d);
  static CUresult ctxGetCurrent(CUcontext* c);
  static CUresult ctxSetCurrent(CUcontext c);
  static CUresult multicastGetGranularity(size_t* g, const CUmulticastObjectProp* p, CUmulticastGranularity_flags o);
  static CUresult multicastCreate(CUmemGenericAllocationHandle* h, const CUmulticastObjectProp* p);
  static CUresult multicastAddDevice(CUmemGenericAllocationHandle h, CUdevice d);
  static CUresult multicastBindMem(CUmemGenericAllocationHandle mc, size_t mcOff, CUmemGenericAllocationHandle mem,
                                   size_t memOff, size_t size, unsigned long long flags);
  static CUresult multicastUnbind(CUmemGenericAllocationHandle mc, CUdevice d, size_t off, size_t size);
  static CUresult memCreate(CUmemGenericAllocationHandle* h, size_t size, const CUmemAllocationProp* p,
                            unsigned long long flags);
  static CUresult memRelease(CUmemGenericAllocationHandle h);
  static CUresult memExport(void* out, CUmemGenericAllocationHandle h, CUmemAllocationHandleType t,
                            unsigned long long flags);
  static CUresult memImport(CUmemGenericAllocationHandle* h, void* os, CUmemAllocationHandleType t);
  static CUresult memGetAllocationGranularity(size_t* g, const CUmemAllocationProp* p,
                                              CUmemAllocationGranularity_flags o);
  static CUresult memAddressReserve(CUdeviceptr* p, size_t size, size_t align, CUdeviceptr addr,
                                    unsigned long long flags);
  static CUresult memAddressFree(CUdeviceptr p, size_t size);
  static CUresult memMap(CUdeviceptr p, size_t size, size_t off, CUmemGenericAllocationHandle h,
                         unsigned long long flags);
  static CUresult memUnmap(CUdeviceptr p, size_t size);
  static CUresult memSetAccess(CUdeviceptr p, size_t size, const CUmemAccessDesc* desc, size_t count);

  /// A new handle of this rank for object (mc) or memory.
  CUmemGenericAllocationHandle newHandle(bool mc, uint64_t object, size_t size) {
    const CUmemGenericAllocationHandle h = (mc ? 0x100000 : 0x200000) + (++handleCounter_ << 4) + rank_;
    handles_[h] = HandleInfo{mc, object, size};
    return h;
  }
  /// A fabric handle naming object.
  static void fabricOf(uint64_t object, CUmemFabricHandle* out) {
    std::memset(out, 0, sizeof(*out));
    std::memcpy(out->data, "FAKEFAB", 7);
    std::memcpy(out->data + 8, &object, sizeof(object));
  }

  FakeWorld& world_;
  int rank_;
  int nranks_;
  int failSeen_ = 0;
  int retained_ = 0;
  CUcontext current_ = nullptr;
  uint64_t handleCounter_ = 0;
  uint64_t reservationCounter_ = 0;
  std::map<CUmemGenericAllocationHandle, HandleInfo> handles_;
  std::map<CUdeviceptr, Reservation> reservations_;
  std::set<CUmemGenericAllocationHandle> bindings_;
};

#define FAKE_ENTER(label)                      \
  FakeDriver& self = f();                      \
  if (CUresult injected = self.enter(label)) return injected

CUresult FakeDriver::getErrorName(CUresult r, const char** s) {
  switch (r) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case CUDA_ERROR_INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult FakeDriver::driverGetVersion(int* v) {
  FAKE_ENTER("cuDriverGetVersion");
  *v = self.driverVersion;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::deviceGet(CUdevice* d, int ordinal) {
  FAKE_ENTER("cuDeviceGet");
  if (ordinal != self.rank_) return CUDA_ERROR_INVALID_DEVICE;  // rank r uses device r
  *d = ordinal;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::deviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  const char* name = a == CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED                          ? "MULTICAST"
                     : a == CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED                ? "FABRIC"
                     : a == CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED ? "POSIX_FD"
                                                                                             : "?";
  FAKE_ENTER(std::string("cuDeviceGetAttribute(") + name + ")");
  if (d != self.rank_) return CUDA_ERROR_INVALID_DEVICE;
  if (a == CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED) *v = self.multicastSupported;
  else if (a == CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED) *v = self.fabricSupported;
  else if (a == CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) *v = self.posixSupported;
  else return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::primaryCtxRetain(CUcontext* c, CUdevice d) {
  FAKE_ENTER("cuDevicePrimaryCtxRetain");
  if (d != self.rank_) return CUDA_ERROR_INVALID_DEVICE;
  ++self.retained_;
  *c = self.ctx();
  return CUDA_SUCCESS;
}

CUresult FakeDriver::primaryCtxRelease(CUdevice d) {
  FAKE_ENTER("cuDevicePrimaryCtxRelease");
  if (d != self.rank_ || self.retained_ == 0) return CUDA_ERROR_INVALID_VALUE;
  --self.retained_;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::ctxGetCurrent(CUcontext* c) {
  FAKE_ENTER("cuCtxGetCurrent");
  *c = self.current_;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::ctxSetCurrent(CUcontext c) {
  FAKE_ENTER("cuCtxSetCurrent");
  self.current_ = c;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::multicastGetGranularity(size_t* g, const CUmulticastObjectProp* p,
                                             CUmulticastGranularity_flags o) {
  FAKE_ENTER("cuMulticastGetGranularity");
  if (o != CU_MULTICAST_GRANULARITY_RECOMMENDED || p->numDevices != unsigned(self.nranks_) ||
      !self.handleTypeOk(p->handleTypes) || p->flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  *g = self.mcGranularity;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::memGetAllocationGranularity(size_t* g, const CUmemAllocationProp* p,
                                                 CUmemAllocationGranularity_flags o) {
  FAKE_ENTER("cuMemGetAllocationGranularity");
  if (o != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED || p->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      p->location.type != CU_MEM_LOCATION_TYPE_DEVICE || p->location.id != self.rank_ ||
      !self.handleTypeOk(p->requestedHandleTypes))
    return CUDA_ERROR_INVALID_VALUE;
  *g = self.ucGranularity;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::multicastCreate(CUmemGenericAllocationHandle* h, const CUmulticastObjectProp* p) {
  FAKE_ENTER("cuMulticastCreate");
  ++self.multicastCreates;
  self.lastMulticastProp = *p;
  if (CUresult r = self.needCtx()) return r;
  if (p->numDevices < 2 || p->size == 0 || p->size % self.mcGranularity != 0 || !self.handleTypeOk(p->handleTypes))
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(self.world_.mu);
  const uint64_t id = self.world_.nextObject++;
  FakeWorld::Object& o = self.world_.objects[id];
  o.numDevices = p->numDevices;
  o.size = p->size;
  o.refs = 1;
  *h = self.newHandle(true, id, p->size);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::memExport(void* out, CUmemGenericAllocationHandle h, CUmemAllocationHandleType t,
                               unsigned long long flags) {
  FAKE_ENTER(std::string("cuMemExportToShareableHandle(") +
             (t == CU_MEM_HANDLE_TYPE_FABRIC ? "fabric" : "posix_fd") + ")");
  auto it = self.handles_.find(h);
  if (it == self.handles_.end() || !it->second.mc || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (t == CU_MEM_HANDLE_TYPE_FABRIC) {
    fabricOf(it->second.object, static_cast<CUmemFabricHandle*>(out));
    return CUDA_SUCCESS;
  }
  if (t != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
  const int fd = memfd_create("nvls-fake-multicast", MFD_CLOEXEC);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> lock(self.world_.mu);
  self.world_.fdObjects[st.st_ino] = it->second.object;
  *static_cast<int*>(out) = fd;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::memImport(CUmemGenericAllocationHandle* h, void* os, CUmemAllocationHandleType t) {
  FAKE_ENTER(std::string("cuMemImportFromShareableHandle(") +
             (t == CU_MEM_HANDLE_TYPE_FABRIC ? "fabric" : "posix_fd") + ")");
  if (CUresult r = self.needCtx()) return r;
  uint64_t id = 0;
  std::lock_guard<std::mutex> lock(self.world_.mu);
  if (t == CU_MEM_HANDLE_TYPE_FABRIC) {
    const auto* fab = static_cast<const CUmemFabricHandle*>(os);
    if (std::memcmp(fab->data, "FAKEFAB", 7) != 0) return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(&id, fab->data + 8, sizeof(id));
  } else {
    // The descriptor must be open in this process at import (the caller closes it after).
    struct stat st {};
    const int fd = static_cast<int>(reinterpret_cast<uintptr_t>(os));
    if (fstat(fd, &st) != 0 || !self.world_.fdObjects.count(st.st_ino)) return CUDA_ERROR_INVALID_VALUE;
    id = self.world_.fdObjects[st.st_ino];
  }
  auto it = self.world_.objects.find(id);
  if (it == self.world_.objects.end() || it->second.refs == 0) return CUDA_ERROR_INVALID_VALUE;
  ++it->second.refs;
  *h = self.newHandle(true, id, it->second.size);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::multicastAddDevice(CUmemGenericAllocationHandle h, CUdevice d) {
  FAKE_ENTER("cuMulticastAddDevice");
  if (CUresult r = self.needCtx()) return r;
  auto it = self.handles_.find(h);
  if (it == self.handles_.end() || !it->second.mc || d != self.rank_) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(self.world_.mu);
  FakeWorld::Object& o = self.world_.objects[it->second.object];
  if (!o.added.insert(d).second || o.added.size() > o.numDevices) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::memCreate(CUmemGenericAllocationHandle* h, size_t size, const CUmemAllocationProp* p,
                               unsigned long long flags) {
  FAKE_ENTER("cuMemCreate");
  if (CUresult r = self.needCtx()) return r;
  if (size == 0 || size % self.ucGranularity != 0 || flags != 0 || p->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      p->location.id != self.rank_ || !self.handleTypeOk(p->requestedHandleTypes))
    return CUDA_ERROR_INVALID_VALUE;
  *h = self.newHandle(false, 0, size);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::multicastBindMem(CUmemGenericAllocationHandle mc, size_t mcOff, CUmemGenericAllocationHandle mem,
                                      size_t memOff, size_t size, unsigned long long flags) {
  FAKE_ENTER("cuMulticastBindMem");
  if (CUresult r = self.needCtx()) return r;
  auto m = self.handles_.find(mc);
  auto p = self.handles_.find(mem);
  if (m == self.handles_.end() || !m->second.mc || p == self.handles_.end() || p->second.mc || mcOff != 0 ||
      memOff != 0 || flags != 0 || size != p->second.size || size > m->second.size)
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(self.world_.mu);
  FakeWorld::Object& o = self.world_.objects[m->second.object];
  // The driver's rule: every device is added before any binds.
  if (o.added.size() != o.numDevices) return CUDA_ERROR_INVALID_VALUE;
  o.bound.insert(self.rank_);
  self.bindings_.insert(mc);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::multicastUnbind(CUmemGenericAllocationHandle mc, CUdevice d, size_t off, size_t size) {
  FAKE_ENTER("cuMulticastUnbind");
  if (CUresult r = self.needCtx()) return r;
  auto m = self.handles_.find(mc);
  if (!self.bindings_.count(mc) || d != self.rank_ || off != 0 || m == self.handles_.end() ||
      size > m->second.size)
    return CUDA_ERROR_INVALID_VALUE;
  self.bindings_.erase(mc);
  std::lock_guard<std::mutex> lock(self.world_.mu);
  self.world_.objects[m->second.object].bound.erase(self.rank_);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::memRelease(CUmemGenericAllocationHandle h) {
  FAKE_ENTER("cuMemRelease(" + f().tag(h) + ")");
  if (CUresult r = self.needCtx()) return r;
  auto it = self.handles_.find(h);
  if (it == self.handles_.end() || self.bindings_.count(h)) return CUDA_ERROR_INVALID_VALUE;
  if (it->second.mc) {
    std::lock_guard<std::mutex> lock(self.world_.mu);
    --self.world_.objects[it->second.object].refs;
  }
  self.handles_.erase(it);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::memAddressReserve(CUdeviceptr* p, size_t size, size_t align, CUdeviceptr addr,
                                       unsigned long long flags) {
  FAKE_ENTER("cuMemAddressReserve");
  if (CUresult r = self.needCtx()) return r;
  if (size == 0 || align == 0 || size % align != 0 || addr != 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *p = (CUdeviceptr(0x7f00 + self.rank_) << 32) + (++self.reservationCounter_ << 28);
  self.reservations_[*p] = Reservation{size, 0, ""};
  return CUDA_SUCCESS;
}

CUresult FakeDriver::memAddressFree(CUdeviceptr p, size_t size) {
  auto it = f().reservations_.find(p);
  FAKE_ENTER("cuMemAddressFree(" + (it == self.reservations_.end() ? std::string("?") : it->second.tag) + ")");
  if (CUresult r = self.needCtx()) return r;
  if (it == self.reservations_.end() || it->second.size != size || it->second.mapped) return CUDA_ERROR_INVALID_VALUE;
  self.reservations_.erase(it);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::memMap(CUdeviceptr p, size_t size, size_t off, CUmemGenericAllocationHandle h,
                            unsigned long long flags) {
  FAKE_ENTER("cuMemMap(" + f().tag(h) + ")");
  if (CUresult r = self.needCtx()) return r;
  auto it = self.reservations_.find(p);
  auto hi = self.handles_.find(h);
  if (it == self.reservations_.end() || it->second.size != size || it->second.mapped || off != 0 || flags != 0 ||
      hi == self.handles_.end() || size > hi->second.size)
    return CUDA_ERROR_INVALID_VALUE;
  it->second.mapped = h;
  it->second.tag = self.tag(h);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::memUnmap(CUdeviceptr p, size_t size) {
  auto it = f().reservations_.find(p);
  FAKE_ENTER("cuMemUnmap(" + (it == self.reservations_.end() ? std::string("?") : it->second.tag) + ")");
  if (CUresult r = self.needCtx()) return r;
  if (it == self.reservations_.end() || it->second.size != size || !it->second.mapped) return CUDA_ERROR_INVALID_VALUE;
  it->second.mapped = 0;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::memSetAccess(CUdeviceptr p, size_t size, const CUmemAccessDesc* desc, size_t count) {
  auto it = f().reservations_.find(p);
  FAKE_ENTER("cuMemSetAccess(" + (it == self.reservations_.end() ? std::string("?") : it->second.tag) + ")");
  if (CUresult r = self.needCtx()) return r;
  if (it == self.reservations_.end() || it->second.size != size || !it->second.mapped || count != 1 ||
      desc->location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc->location.id != self.rank_ ||
      desc->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

NvlsDriver FakeDriver::table() const {
  NvlsDriver d;
  d.cuGetErrorName = getErrorName;
  d.cuDriverGetVersion = driverGetVersion;
  d.cuDeviceGet = deviceGet;
  d.cuDeviceGetAttribute = deviceGetAttribute;
  d.cuDevicePrimaryCtxRetain = primaryCtxRetain;
  d.cuDevicePrimaryCtxRelease_v2 = primaryCtxRelease;
  d.cuCtxGetCurrent = ctxGetCurrent;
  d.cuCtxSetCurrent = ctxSetCurrent;
  d.cuMulticastGetGranularity = multicastGetGranularity;
  d.cuMulticastCreate = multicastCreate;
  d.cuMulticastAddDevice = multicastAddDevice;
  d.cuMulticastBindMem = multicastBindMem;
  d.cuMulticastUnbind = multicastUnbind;
  d.cuMemCreate = memCreate;
  d.cuMemRelease = memRelease;
  d.cuMemExportToShareableHandle = memExport;
  d.cuMemImportFromShareableHandle = memImport;
  d.cuMemGetAllocationGranularity = memGetAllocationGranularity;
  d.cuMemAddressReserve = memAddressReserve;
  d.cuMemAddressFree = memAddressFree;
  d.cuMemMap = memMap;
  d.cuMemUnmap = memUnmap;
  d.cuMemSetAccess = memSetAccess;
  return d;
}

/// Makes fake the calling thread's driver for the scope.
struct UseFake {
  explicit UseFake(FakeDriver& fake) { tFake = &fake; }
  ~UseFake() { tFake = nullptr; }
};

// ---- the in-process bootstrap ------------------------------------------------------------

/// all_gather among threads; every rank has its own pb_group_bootstrap_v1.
class ThreadBootstrap {
 public:
  explicit ThreadBootstrap(int nranks) : nranks_(nranks), slots_(static_cast<size_t>(nranks)) {
    for (int r = 0; r < nranks; ++r) {
      Slot& s = slots_[static_cast<size_t>(r)];
      s.self = this;
      s.rank = r;
      s.table.struct_size = sizeof(s.table);
      s.table.core = &s;
      s.table.all_gather = &ThreadBootstrap::allGather;
      s.table.barrier = &ThreadBootstrap::barrier;
    }
  }
  const pb_group_bootstrap_v1* forRank(int r) const { return &slots_[static_cast<size_t>(r)].table; }
  /// The n-th all_gather (1-based) of every rank fails with PB_ERR_TIMEOUT.
  int failGather = -1;

 private:
  struct Slot {
    ThreadBootstrap* self = nullptr;
    int rank = 0;
    int calls = 0;
    pb_group_bootstrap_v1 table{};
  };

  static pb_status allGather(void* core, const void* mine, size_t bytes, void* all) {
    Slot& s = *static_cast<Slot*>(core);
    if (tFake) tFake->noteGather();
    if (++s.calls == s.self->failGather) return PB_ERR_TIMEOUT;
    return s.self->gather(s.rank, mine, bytes, all);
  }
  static pb_status barrier(void*) { return PB_ERR_INTERNAL; }  // the plugin needs only all_gather

  pb_status gather(int rank, const void* mine, size_t bytes, void* all) {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t round = round_;
    if (arrived_ == 0) {
      buffer_.assign(bytes * static_cast<size_t>(nranks_), 0);
      bytes_ = bytes;
    }
    if (bytes != bytes_) return PB_ERR_INVALID;
    std::memcpy(buffer_.data() + bytes * static_cast<size_t>(rank), mine, bytes);
    if (++arrived_ == nranks_) {
      result_ = buffer_;
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
    } else if (!cv_.wait_for(lock, std::chrono::seconds(20), [&] { return round_ != round; })) {
      return PB_ERR_TIMEOUT;
    }
    std::memcpy(all, result_.data(), result_.size());
    return PB_OK;
  }

  int nranks_;
  std::vector<Slot> slots_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t round_ = 0;
  int arrived_ = 0;
  size_t bytes_ = 0;
  std::vector<uint8_t> buffer_, result_;
};

// ---- running a group ------------------------------------------------------------------------

/// What one rank saw.
struct RankResult {
  bool created = false;
  pb_status status = PB_OK;
  std::string error;
  std::vector<std::string> calls;     ///< during creation
  std::vector<std::string> teardown;  ///< destroy and delete
  std::string destroyError;
  CUdeviceptr multicast = 0, unicast = 0;
  size_t bytes = 0;
  HandleKind kind = HandleKind::PosixFd;
  std::string leaks;
  int multicastCreates = 0;
  int driverCalls = 0;
  CUmulticastObjectProp prop{};
};

/// The test's copy of a posix_fd handle: every rank is this process.
int dupCopier(uint32_t pid, int fd, const std::string& who) {
  if (pid != 4242) throw Error(PB_ERR_INTERNAL, "test: the handle came with pid " + std::to_string(pid));
  const int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) throw Error(PB_ERR_REMOTE, "test: fd " + std::to_string(fd) + " of " + who + " is not open");
  return copy;
}

/// How to run a group.
struct GroupRun {
  int nranks = 2;
  size_t bytes = 3 * kMiB;
  bool destroy = true;
  int failGather = -1;
  /// Adjusts rank r's fake, options and requested bytes before it starts.
  std::function<void(int r, FakeDriver&, GroupOptions&, size_t& bytes)> configure;
};

/// Open descriptors of this process.
size_t openFds() {
  size_t n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

/// Runs one rank of MulticastGroup::create (and destroy) on this thread.
RankResult runRank(const GroupRun& spec, FakeWorld& world, ThreadBootstrap& boot, int r) {
  RankResult res;
  FakeDriver fake(world, r, spec.nranks);
  GroupOptions options;
  options.copyFd = dupCopier;
  options.pid = 4242;
  size_t bytes = spec.bytes;
  if (spec.configure) spec.configure(r, fake, options, bytes);
  UseFake use(fake);
  const NvlsDriver table = fake.table();
  GroupRequest request;
  request.rank = r;
  request.nranks = spec.nranks;
  for (int i = 0; i < spec.nranks; ++i) request.commRanks.push_back(10 + i);
  request.device = r;
  request.bytes = bytes;
  try {
    Exchange exchange(boot.forRank(r), r, spec.nranks);
    std::unique_ptr<MulticastGroup> g = MulticastGroup::create(table, request, exchange, options);
    res.created = true;
    res.multicast = g->multicast();
    res.unicast = g->unicast();
    res.bytes = g->bytes();
    res.kind = g->handleKind();
    res.calls = fake.calls;
    fake.calls.clear();
    if (spec.destroy) {
      try {
        g->destroy();
      } catch (const Error& e) {
        res.destroyError = e.what();
      }
    }
    g.reset();
    res.teardown = fake.calls;
  } catch (const Error& e) {
    res.status = e.status();
    res.error = e.what();
    res.calls = fake.calls;
  }
  res.leaks = fake.leaks();
  res.multicastCreates = fake.multicastCreates;
  res.driverCalls = fake.driverCalls;
  res.prop = fake.lastMulticastProp;
  return res;
}

/// Runs every rank on its own thread; checks no descriptor leaked.
std::vector<RankResult> runGroup(const GroupRun& spec, FakeWorld& world) {
  ThreadBootstrap boot(spec.nranks);
  boot.failGather = spec.failGather;
  std::vector<RankResult> results(static_cast<size_t>(spec.nranks));
  const size_t fdsBefore = openFds();
  std::vector<std::thread> threads;
  for (int r = 0; r < spec.nranks; ++r)
    threads.emplace_back([&, r] { results[static_cast<size_t>(r)] = runRank(spec, world, boot, r); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(openFds(), fdsBefore) << "a handle descriptor was left open";
  return results;
}

/// The driver calls and gathers rank r makes creating a group of this kind.
std::vector<std::string> expectedCreation(int r, HandleKind kind) {
  const std::string k = kind == HandleKind::Fabric ? "(fabric)" : "(posix_fd)";
  std::vector<std::string> v = {"cuDeviceGet",
                                "cuDevicePrimaryCtxRetain",
                                "cuCtxGetCurrent",
                                "cuCtxSetCurrent",
                                "cuDeviceGetAttribute(FABRIC)",
                                "cuDeviceGetAttribute(POSIX_FD)",
                                "all_gather",
                                "cuMulticastGetGranularity",
                                "cuMemGetAllocationGranularity",
                                "all_gather"};
  if (r == 0) v.insert(v.end(), {"cuMulticastCreate", "cuMemExportToShareableHandle" + k});
  v.push_back("all_gather");
  if (r != 0) v.push_back("cuMemImportFromShareableHandle" + k);
  v.insert(v.end(), {"cuMulticastAddDevice", "all_gather",                                                  //
                     "cuMemCreate", "cuMulticastBindMem", "all_gather",                                      //
                     "cuMemAddressReserve", "cuMemMap(mem)", "cuMemSetAccess(mem)",                          //
                     "cuMemAddressReserve", "cuMemMap(mc)", "cuMemSetAccess(mc)", "all_gather",              //
                     "cuCtxSetCurrent"});
  return v;
}

/// The calls group_destroy and the delete make, in order.
const std::vector<std::string> kTeardown = {
    "cuCtxGetCurrent",   "cuCtxSetCurrent",  "cuMemUnmap(mc)",   "cuMemAddressFree(mc)",
    "cuMemUnmap(mem)",   "cuMemAddressFree(mem)", "cuMulticastUnbind", "cuMemRelease(mem)",
    "cuMemRelease(mc)",  "cuCtxSetCurrent",  "cuDevicePrimaryCtxRelease"};

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += "  " + s + "\n";
  return out;
}

// ---- creation and teardown --------------------------------------------------------------------

class NvlsGroupFlow : public ::testing::TestWithParam<int> {};

TEST_P(NvlsGroupFlow, CreatesInOrderAndTearsDownInReverse) {
  const int n = GetParam();
  FakeWorld world;
  GroupRun spec;
  spec.nranks = n;
  const auto results = runGroup(spec, world);
  for (int r = 0; r < n; ++r) {
    const RankResult& res = results[static_cast<size_t>(r)];
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_TRUE(res.created) << res.error;
    EXPECT_EQ(res.kind, HandleKind::PosixFd);
    EXPECT_EQ(res.calls, expectedCreation(r, HandleKind::PosixFd)) << joined(res.calls);
    EXPECT_EQ(res.teardown, kTeardown) << joined(res.teardown);
    EXPECT_EQ(res.destroyError, "");
    EXPECT_EQ(res.bytes, 4 * kMiB);  // 3 MiB up to the 2 MiB granularity
    EXPECT_NE(res.multicast, 0u);
    EXPECT_NE(res.unicast, 0u);
    EXPECT_NE(res.multicast, res.unicast);
    EXPECT_EQ(res.multicastCreates, r == 0 ? 1 : 0);
    EXPECT_EQ(res.leaks, "");
  }
  EXPECT_EQ(results[0].prop.numDevices, unsigned(n));
  EXPECT_EQ(results[0].prop.size, 4 * kMiB);
  EXPECT_EQ(results[0].prop.handleTypes, static_cast<unsigned long long>(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  EXPECT_EQ(world.leaks(), "");
  // The Join gather is a barrier: every device added before any bind; the
  // Bind gather one before any mapping.
  EXPECT_LT(world.last("cuMulticastAddDevice"), world.first("cuMulticastBindMem"));
  EXPECT_LT(world.last("cuMulticastBindMem"), world.first("cuMemAddressReserve"));
  EXPECT_LT(world.last("cuMemImportFromShareableHandle"), world.first("cuMemCreate"));
}

INSTANTIATE_TEST_SUITE_P(Ranks, NvlsGroupFlow, ::testing::Values(2, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

TEST(NvlsGroup, FabricHandlesWhenEveryRankHasThemAndNoDescriptorMoves) {
  FakeWorld world;
  GroupRun spec;
  spec.nranks = 4;
  spec.configure = [](int, FakeDriver& f, GroupOptions& o, size_t&) {
    f.fabricSupported = 1;
    o.copyFd = [](uint32_t, int, const std::string&) -> int {
      throw Error(PB_ERR_INTERNAL, "test: no descriptor may be copied with fabric handles");
    };
  };
  const auto results = runGroup(spec, world);
  for (int r = 0; r < 4; ++r) {
    const RankResult& res = results[static_cast<size_t>(r)];
    ASSERT_TRUE(res.created) << res.error;
    EXPECT_EQ(res.kind, HandleKind::Fabric);
    EXPECT_EQ(res.calls, expectedCreation(r, HandleKind::Fabric)) << joined(res.calls);
    EXPECT_EQ(res.leaks, "");
  }
  EXPECT_EQ(results[0].prop.handleTypes, static_cast<unsigned long long>(CU_MEM_HANDLE_TYPE_FABRIC));
  EXPECT_EQ(world.leaks(), "");
}

TEST(NvlsGroup, AutoFallsBackToPosixFdWhenOneRankLacksFabric) {
  FakeWorld world;
  GroupRun spec;
  spec.nranks = 3;
  spec.configure = [](int r, FakeDriver& f, GroupOptions&, size_t&) { f.fabricSupported = r != 2; };
  const auto results = runGroup(spec, world);
  for (const RankResult& res : results) {
    ASSERT_TRUE(res.created) << res.error;
    EXPECT_EQ(res.kind, HandleKind::PosixFd);
  }
}

TEST(NvlsGroup, RoundsToTheLargestGranularityOfAnyRank) {
  FakeWorld world;
  GroupRun spec;
  spec.nranks = 3;
  spec.bytes = 3 * kMiB + 1;
  spec.configure = [](int r, FakeDriver& f, GroupOptions&, size_t&) {
    if (r == 1) f.mcGranularity = 6 * kMiB;  // the fake refuses sizes that are not a multiple
    if (r == 2) f.ucGranularity = 4 * kMiB;
  };
  const auto results = runGroup(spec, world);
  for (const RankResult& res : results) {
    ASSERT_TRUE(res.created) << res.error;
    EXPECT_EQ(res.bytes, 12 * kMiB);  // lcm(2, 6, 4) MiB
    EXPECT_EQ(res.leaks, "");
  }
}

TEST(NvlsGroup, RanksAskingForDifferentSizesAllFail) {
  FakeWorld world;
  GroupRun spec;
  spec.nranks = 2;
  spec.configure = [](int r, FakeDriver&, GroupOptions&, size_t& bytes) {
    if (r == 1) bytes = 5 * kMiB;
  };
  const auto results = runGroup(spec, world);
  for (const RankResult& res : results) {
    EXPECT_FALSE(res.created);
    EXPECT_EQ(res.status, PB_ERR_INVALID);
    EXPECT_NE(res.error.find("disagree on the group"), std::string::npos) << res.error;
    EXPECT_EQ(res.multicastCreates, 0);
    EXPECT_EQ(res.leaks, "");
  }
}

TEST(NvlsGroup, DisagreeingHandleTypesAllFail) {
  FakeWorld world;
  GroupRun spec;
  spec.configure = [](int r, FakeDriver& f, GroupOptions& o, size_t&) {
    f.fabricSupported = 1;
    o.handlePreference = r == 0 ? HandlePreference::Fabric : HandlePreference::PosixFd;
  };
  for (const RankResult& res : runGroup(spec, world)) {
    EXPECT_EQ(res.status, PB_ERR_INVALID);
    EXPECT_NE(res.error.find("disagree on handle_type"), std::string::npos) << res.error;
    EXPECT_EQ(res.leaks, "");
  }
}

TEST(NvlsGroup, TeardownReportsTheFirstFailureButReleasesEverything) {
  FakeWorld world;
  GroupRun spec;
  spec.configure = [](int r, FakeDriver& f, GroupOptions&, size_t&) {
    if (r != 1) return;
    f.failAt = "cuMemUnmap(mc)";
    f.failWith = CUDA_ERROR_INVALID_VALUE;
  };
  const auto results = runGroup(spec, world);
  const RankResult& res = results[1];
  ASSERT_TRUE(res.created) << res.error;
  EXPECT_NE(res.destroyError.find("group rank 1 (communicator rank 11)"), std::string::npos) << res.destroyError;
  EXPECT_NE(res.destroyError.find("cuMemUnmap (multicast view): CUDA_ERROR_INVALID_VALUE"), std::string::npos)
      << res.destroyError;
  // The multicast view's range is still mapped (the unmap failed), so its
  // free fails too; everything after is released all the same.
  EXPECT_EQ(res.teardown, kTeardown) << joined(res.teardown);
  EXPECT_EQ(results[0].destroyError, "");
  EXPECT_EQ(results[0].leaks, "");
}

TEST(NvlsGroup, DestructorWithoutDestroyReleasesInTheSameOrder) {
  FakeWorld world;
  GroupRun spec;
  spec.destroy = false;
  for (const RankResult& res : runGroup(spec, world)) {
    ASSERT_TRUE(res.created) << res.error;
    EXPECT_EQ(res.teardown, kTeardown) << joined(res.teardown);
    EXPECT_EQ(res.leaks, "");
  }
  EXPECT_EQ(world.leaks(), "");
}

TEST(NvlsGroup, AFailedAllGatherUnwindsEveryRank) {
  for (int failing = 1; failing <= 6; ++failing) {
    SCOPED_TRACE("all_gather " + std::to_string(failing) + " fails");
    FakeWorld world;
    GroupRun spec;
    spec.nranks = 3;
    spec.failGather = failing;
    for (const RankResult& res : runGroup(spec, world)) {
      EXPECT_FALSE(res.created);
      EXPECT_EQ(res.status, PB_ERR_TIMEOUT) << res.error;
      EXPECT_NE(res.error.find("the core's all_gather failed (status -5)"), std::string::npos) << res.error;
      EXPECT_EQ(res.leaks, "");
    }
    EXPECT_EQ(world.leaks(), "");
  }
}

TEST(NvlsGroup, ARankThatCannotCopyTheDescriptorFailsEveryRank) {
  FakeWorld world;
  GroupRun spec;
  spec.nranks = 4;
  spec.configure = [](int r, FakeDriver&, GroupOptions& o, size_t&) {
    if (r == 2)
      o.copyFd = [](uint32_t, int, const std::string& who) -> int {
        throw Error(PB_ERR_UNSUPPORTED, "nvls: cannot copy the multicast handle of " + who + ": EPERM");
      };
  };
  for (const RankResult& res : runGroup(spec, world)) {
    EXPECT_EQ(res.status, PB_ERR_UNSUPPORTED);
    EXPECT_NE(res.error.find("group rank 2 (communicator rank 12) failed while importing"), std::string::npos)
        << res.error;
    EXPECT_NE(res.error.find("cannot copy the multicast handle of group rank 0 (communicator rank 10): EPERM"),
              std::string::npos)
        << res.error;
    EXPECT_EQ(res.leaks, "");
  }
  EXPECT_EQ(world.leaks(), "");
}

// ---- one failing call on one rank ---------------------------------------------------------------

struct FailCase {
  std::string label;   ///< the fake's call label
  int occurrence;      ///< which call of that label fails
  int rank;            ///< the failing rank (of 4)
  std::string named;   ///< what the error must say about the call
};

/// gtest prints a case by its fields, not as bytes.
void PrintTo(const FailCase& c, std::ostream* os) {
  *os << c.label << " #" << c.occurrence << " on rank " << c.rank;
}

class NvlsGroupFailure : public ::testing::TestWithParam<FailCase> {};

TEST_P(NvlsGroupFailure, EveryRankFailsNamingItAndNothingStaysHeld) {
  const FailCase& c = GetParam();
  FakeWorld world;
  GroupRun spec;
  spec.nranks = 4;
  spec.configure = [&](int r, FakeDriver& f, GroupOptions&, size_t&) {
    if (r != c.rank) return;
    f.failAt = c.label;
    f.failOccurrence = c.occurrence;
  };
  const auto results = runGroup(spec, world);
  const std::string who = "group rank " + std::to_string(c.rank) + " (communicator rank " +
                          std::to_string(10 + c.rank) + ") failed while ";
  for (int r = 0; r < 4; ++r) {
    const RankResult& res = results[static_cast<size_t>(r)];
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_FALSE(res.created);
    EXPECT_EQ(res.status, PB_ERR_SYSTEM) << res.error;
    EXPECT_NE(res.error.find(who), std::string::npos) << res.error;
    EXPECT_NE(res.error.find(c.named + ": CUDA_ERROR_OUT_OF_MEMORY (driver error 2)"), std::string::npos)
        << res.error;
    EXPECT_EQ(res.leaks, "") << joined(res.calls);
  }
  EXPECT_EQ(world.leaks(), "");
}

std::vector<FailCase> failCases() {
  const std::vector<FailCase> steps = {
      {"cuDeviceGet", 1, 0, "cuDeviceGet(R)"},
      {"cuDevicePrimaryCtxRetain", 1, 0, "cuDevicePrimaryCtxRetain"},
      {"cuCtxSetCurrent", 1, 0, "cuCtxSetCurrent"},
      {"cuMulticastGetGranularity", 1, 0, "cuMulticastGetGranularity"},
      {"cuMemGetAllocationGranularity", 1, 0, "cuMemGetAllocationGranularity"},
      {"cuMulticastAddDevice", 1, 0, "cuMulticastAddDevice"},
      {"cuMemCreate", 1, 0, "cuMemCreate (4194304 bytes)"},
      {"cuMulticastBindMem", 1, 0, "cuMulticastBindMem"},
      {"cuMemAddressReserve", 1, 0, "cuMemAddressReserve (unicast view)"},
      {"cuMemMap(mem)", 1, 0, "cuMemMap (unicast view)"},
      {"cuMemSetAccess(mem)", 1, 0, "cuMemSetAccess (unicast view)"},
      {"cuMemAddressReserve", 2, 0, "cuMemAddressReserve (multicast view)"},
      {"cuMemMap(mc)", 1, 0, "cuMemMap (multicast view)"},
      {"cuMemSetAccess(mc)", 1, 0, "cuMemSetAccess (multicast view)"},
  };
  std::vector<FailCase> cases;
  for (int rank : {0, 3})
    for (FailCase c : steps) {
      c.rank = rank;
      const size_t at = c.named.find("(R)");
      if (at != std::string::npos) c.named.replace(at, 3, "(" + std::to_string(rank) + ")");
      cases.push_back(c);
    }
  cases.push_back({"cuMulticastCreate", 1, 0, "cuMulticastCreate"});
  cases.push_back({"cuMemExportToShareableHandle(posix_fd)", 1, 0, "cuMemExportToShareableHandle (posix_fd)"});
  cases.push_back({"cuMemImportFromShareableHandle(posix_fd)", 1, 3, "cuMemImportFromShareableHandle (posix_fd)"});
  cases.push_back({"cuMemImportFromShareableHandle(posix_fd)", 1, 1, "cuMemImportFromShareableHandle (posix_fd)"});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(EachStep, NvlsGroupFailure, ::testing::ValuesIn(failCases()), [](const auto& info) {
  std::string name = info.param.label + "_" + std::to_string(info.param.occurrence) + "_rank" +
                     std::to_string(info.param.rank);
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
});

// ---- the support checks --------------------------------------------------------------------------

GroupRequest requestFor(int rank, int nranks, int device) {
  GroupRequest r;
  r.rank = rank;
  r.nranks = nranks;
  r.device = device;
  r.bytes = kMiB;
  for (int i = 0; i < nranks; ++i) r.commRanks.push_back(i);
  return r;
}

/// supportCost on a fresh fake (rank 0, device 0) adjusted by tweak; *fake gets the recorder.
int support(const std::function<void(FakeDriver&, NvlsDriver&)>& tweak, std::string* why,
            HandlePreference pref = HandlePreference::Auto, int nranks = 2, int device = 0) {
  FakeWorld world;
  FakeDriver fake(world, 0, nranks);
  UseFake use(fake);
  NvlsDriver table = fake.table();
  tweak(fake, table);
  const int cost = supportCost(table, requestFor(0, nranks, device), pref, why);
  EXPECT_EQ(fake.multicastCreates, 0);
  EXPECT_EQ(fake.leaks(), "");
  return cost;
}

TEST(NvlsSupport, SaysYesOnAMulticastCapableGpu) {
  std::string why;
  EXPECT_EQ(support([](FakeDriver&, NvlsDriver&) {}, &why), 0) << why;
  EXPECT_EQ(why, "");
}

TEST(NvlsSupport, NamesAnOldDriversVersion) {
  std::string why;
  EXPECT_EQ(support([](FakeDriver& f, NvlsDriver&) { f.driverVersion = 12000; }, &why), -1);
  EXPECT_EQ(why, "the CUDA driver is version 12.0 (12000); multicast objects need 12.1 (12010) or later");
}

TEST(NvlsSupport, NamesMissingDriverEntries) {
  std::string why;
  EXPECT_EQ(support(
                [](FakeDriver&, NvlsDriver& d) {
                  d.cuMulticastCreate = nullptr;
                  d.cuMulticastUnbind = nullptr;
                },
                &why),
            -1);
  EXPECT_EQ(why, "the CUDA driver 12.8 (12080) lacks cuMulticastCreate, cuMulticastUnbind");
}

TEST(NvlsSupport, RefusesAGpuWithoutMulticast) {
  std::string why;
  EXPECT_EQ(support([](FakeDriver& f, NvlsDriver&) { f.multicastSupported = 0; }, &why), -1);
  EXPECT_EQ(why, "device 0 does not support multicast (needs NVSwitch / NVLink SHARP, Hopper or later)");
}

TEST(NvlsSupport, RefusesASingleRankAndAMissingDevice) {
  std::string why;
  EXPECT_EQ(support([](FakeDriver&, NvlsDriver&) {}, &why, HandlePreference::Auto, 1), -1);
  EXPECT_EQ(why, "a multicast group needs at least 2 ranks, this one has 1");
  EXPECT_EQ(support([](FakeDriver&, NvlsDriver&) {}, &why, HandlePreference::Auto, 2, 5), -1);
  EXPECT_EQ(why, "device 5: cuDeviceGet: CUDA_ERROR_INVALID_DEVICE (driver error 101)");
}

TEST(NvlsSupport, ChecksTheHandleKindTheSettingAsksFor) {
  std::string why;
  EXPECT_EQ(support([](FakeDriver&, NvlsDriver&) {}, &why, HandlePreference::Fabric), -1);
  EXPECT_EQ(why, "device 0 cannot export fabric handles (handle_type=fabric)");
  EXPECT_EQ(support([](FakeDriver& f, NvlsDriver&) { f.posixSupported = 0; }, &why), -1);
  EXPECT_EQ(why, "device 0 exports neither fabric handles nor POSIX fds");
  EXPECT_EQ(support([](FakeDriver& f, NvlsDriver&) { f.fabricSupported = 1; }, &why, HandlePreference::Fabric), 0);
}

// ---- the entries: the gate before any driver call --------------------------------------------------

/// Why the environment already forbids multicast ("" when it does not).
std::string environmentGate() { return disabledBy(""); }

#define NEEDS_OPEN_ENVIRONMENT()                                                                           \
  do {                                                                                                     \
    if (!environmentGate().empty())                                                                        \
      GTEST_SKIP() << "the environment forbids multicast (" << environmentGate()                           \
                   << ") and tests never lift that; this test needs the gate open to reach the fake driver"; \
  } while (0)

/// A DriverSource handing out the calling thread's fake, counting calls.
struct CountingSource {
  std::atomic<int> calls{0};
  DriverSource source() {
    return [this]() -> const NvlsDriver& {
      ++calls;
      thread_local NvlsDriver table;
      table = tFake->table();
      return table;
    };
  }
};

pb_group_desc_v1 descFor(int rank, int nranks, const int* comm, const pb_group_bootstrap_v1* boot) {
  pb_group_desc_v1 d{};
  d.struct_size = sizeof(d);
  d.rank = rank;
  d.nranks = nranks;
  d.comm_ranks = comm;
  d.cuda_device = rank;
  d.bytes = 3 * kMiB;
  d.bootstrap = boot;
  return d;
}

TEST(NvlsEntry, CanCreateRefusesByTheGateWithoutTheDriver) {
  for (const char* var : kGateVariables) {
    if (std::string(var) != "NCCL_NVLS_ENABLE" && !environmentGate().empty()) continue;  // NCCL's is read first
    EnvGuard env;
    env.set(var, "0");
    FakeWorld world;
    FakeDriver fake(world, 0, 2);
    UseFake use(fake);
    CountingSource source;
    const auto d = descFor(0, 2, nullptr, nullptr);
    std::string why;
    EXPECT_EQ(canCreateGroup(source.source(), NvlsSettings{}, &d, &why), -1);
    EXPECT_EQ(why, std::string("disabled by ") + var + "=0");
    EXPECT_EQ(source.calls.load(), 0);
    EXPECT_EQ(fake.driverCalls, 0);
  }
}

TEST(NvlsEntry, CanCreateRefusesByTheSettingWithoutTheDriver) {
  NEEDS_OPEN_ENVIRONMENT();
  FakeWorld world;
  FakeDriver fake(world, 0, 2);
  UseFake use(fake);
  CountingSource source;
  NvlsSettings settings;
  settings.enable = "0";
  const auto d = descFor(0, 2, nullptr, nullptr);
  std::string why;
  EXPECT_EQ(canCreateGroup(source.source(), settings, &d, &why), -1);
  EXPECT_EQ(why, "disabled by nvls.enable=0");
  EXPECT_EQ(source.calls.load(), 0);
  EXPECT_EQ(fake.driverCalls, 0);
}

TEST(NvlsEntry, CanCreateGivesNoDriverAsAReasonAndOtherwiseAsks) {
  NEEDS_OPEN_ENVIRONMENT();
  const auto d = descFor(0, 2, nullptr, nullptr);
  std::string why;
  const DriverSource absent = []() -> const NvlsDriver& {
    throw Error(PB_ERR_UNSUPPORTED, "nvls: no CUDA device: cudaGetDeviceCount returned cudaErrorNoDevice");
  };
  EXPECT_EQ(canCreateGroup(absent, NvlsSettings{}, &d, &why), -1);
  EXPECT_EQ(why, "nvls: no CUDA device: cudaGetDeviceCount returned cudaErrorNoDevice");

  FakeWorld world;
  FakeDriver fake(world, 0, 2);
  UseFake use(fake);
  CountingSource source;
  EXPECT_EQ(canCreateGroup(source.source(), NvlsSettings{}, &d, &why), 0) << why;
  fake.multicastSupported = 0;
  EXPECT_EQ(canCreateGroup(source.source(), NvlsSettings{}, &d, &why), -1);
  EXPECT_EQ(why, "device 0 does not support multicast (needs NVSwitch / NVLink SHARP, Hopper or later)");
  EXPECT_EQ(fake.multicastCreates, 0);
  EXPECT_EQ(fake.leaks(), "");
}

/// Runs createGroup on n threads; each rank's settings from settingsOf.
struct EntryRun {
  std::vector<RankResult> results;
  int sourceCalls = 0;
};
EntryRun runEntries(int n, const std::function<NvlsSettings(int)>& settingsOf, bool withBootstrap = true,
                    size_t viewSize = sizeof(pb_group_view_v1),
                    const std::function<void(int, FakeDriver&)>& configure = nullptr) {
  FakeWorld world;
  ThreadBootstrap boot(n);
  CountingSource source;
  std::vector<int> comm;
  for (int i = 0; i < n; ++i) comm.push_back(10 + i);
  EntryRun run;
  run.results.resize(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      RankResult& res = run.results[static_cast<size_t>(r)];
      FakeDriver fake(world, r, n);
      if (configure) configure(r, fake);
      UseFake use(fake);
      GroupOptions options;
      options.copyFd = dupCopier;
      options.pid = 4242;
      const auto d = descFor(r, n, comm.data(), withBootstrap ? boot.forRank(r) : nullptr);
      pb_group_view_v1 view{};
      view.struct_size = viewSize;
      try {
        auto g = createGroup(source.source(), settingsOf(r), &d, options, view);
        res.created = true;
        res.multicast = reinterpret_cast<uintptr_t>(view.multicast);
        res.unicast = reinterpret_cast<uintptr_t>(view.unicast);
        res.bytes = view.bytes;
        EXPECT_EQ(res.multicast, g->multicast());
        EXPECT_EQ(res.unicast, g->unicast());
        g->destroy();
      } catch (const Error& e) {
        res.status = e.status();
        res.error = e.what();
      }
      res.calls = fake.calls;
      res.driverCalls = fake.driverCalls;
      res.multicastCreates = fake.multicastCreates;
      res.leaks = fake.leaks();
    });
  }
  for (auto& t : threads) t.join();
  run.sourceCalls = source.calls.load();
  EXPECT_EQ(world.leaks(), "");
  return run;
}

TEST(NvlsEntry, CreateRefusedByTheEnvironmentCallsNoDriverFunction) {
  for (bool withBootstrap : {true, false}) {
    SCOPED_TRACE(withBootstrap ? "with a bootstrap" : "without a bootstrap");
    EnvGuard env;
    env.set("NCCL_NVLS_ENABLE", "0");
    const EntryRun run = runEntries(2, [](int) { return NvlsSettings{}; }, withBootstrap);
    EXPECT_EQ(run.sourceCalls, 0);
    for (const RankResult& res : run.results) {
      EXPECT_FALSE(res.created);
      EXPECT_EQ(res.status, PB_ERR_UNSUPPORTED);
      EXPECT_EQ(res.error, "nvls group_create: disabled by NCCL_NVLS_ENABLE=0 (no multicast object was created)");
      EXPECT_EQ(res.driverCalls, 0);
      EXPECT_EQ(res.multicastCreates, 0);
      // With a bootstrap each rank tells the others once, then stops.
      EXPECT_EQ(res.calls, withBootstrap ? std::vector<std::string>{"all_gather"} : std::vector<std::string>{});
    }
  }
}

TEST(NvlsEntry, CreateWithOneRankRefusingBySettingUnwindsTheOthers) {
  NEEDS_OPEN_ENVIRONMENT();
  const EntryRun run = runEntries(3, [](int r) {
    NvlsSettings s;
    if (r == 1) s.enable = "off";
    return s;
  });
  EXPECT_EQ(run.sourceCalls, 2);  // ranks 0 and 2 only
  const RankResult& refusing = run.results[1];
  EXPECT_EQ(refusing.status, PB_ERR_UNSUPPORTED);
  EXPECT_EQ(refusing.error, "nvls group_create: disabled by nvls.enable=off (no multicast object was created)");
  EXPECT_EQ(refusing.driverCalls, 0);
  for (int r : {0, 2}) {
    const RankResult& res = run.results[static_cast<size_t>(r)];
    EXPECT_EQ(res.status, PB_ERR_UNSUPPORTED);
    EXPECT_NE(res.error.find("group rank 1 (communicator rank 11) failed while agreeing on the group set-up: "
                             "disabled by nvls.enable=off (no multicast object was created)"),
              std::string::npos)
        << res.error;
    EXPECT_EQ(res.multicastCreates, 0);
    EXPECT_EQ(res.leaks, "");
  }
}

TEST(NvlsEntry, CreateWhereOneGpuLacksMulticastCreatesNothing) {
  NEEDS_OPEN_ENVIRONMENT();
  const EntryRun run = runEntries(
      2, [](int) { return NvlsSettings{}; }, true, sizeof(pb_group_view_v1),
      [](int r, FakeDriver& f) { f.multicastSupported = r == 0; });
  EXPECT_NE(run.results[1].error.find("device 1 does not support multicast"), std::string::npos);
  EXPECT_NE(run.results[0].error.find("group rank 1 (communicator rank 11) failed while agreeing on the group "
                                      "set-up: device 1 does not support multicast"),
            std::string::npos)
      << run.results[0].error;
  for (const RankResult& res : run.results) {
    EXPECT_EQ(res.status, PB_ERR_UNSUPPORTED);
    EXPECT_EQ(res.multicastCreates, 0);
    EXPECT_EQ(res.leaks, "");
  }
}

TEST(NvlsEntry, CreateFillsTheView) {
  NEEDS_OPEN_ENVIRONMENT();
  const EntryRun run = runEntries(2, [](int) { return NvlsSettings{}; });
  for (const RankResult& res : run.results) {
    ASSERT_TRUE(res.created) << res.error;
    EXPECT_NE(res.multicast, 0u);
    EXPECT_NE(res.unicast, 0u);
    EXPECT_EQ(res.bytes, 4 * kMiB);
    EXPECT_EQ(res.leaks, "");
  }
}

TEST(NvlsEntry, CreateRefusesAShortViewBeforeAnything) {
  NEEDS_OPEN_ENVIRONMENT();
  const EntryRun run =
      runEntries(2, [](int) { return NvlsSettings{}; }, true, offsetof(pb_group_view_v1, bytes));
  for (const RankResult& res : run.results) {
    EXPECT_EQ(res.status, PB_ERR_INVALID);
    EXPECT_NE(res.error.find("pb_group_view_v1 of 24 bytes is too short"), std::string::npos) << res.error;
    EXPECT_EQ(res.driverCalls, 0);
  }
}

// ---- the real descriptor copy ------------------------------------------------------------------------

TEST(NvlsFd, CopiesADescriptorOutOfAProcess) {
  const int fd = memfd_create("nvls-fd-test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  UniqueFd original(fd);
  int copy = -1;
  try {
    copy = copyPeerFd(static_cast<uint32_t>(getpid()), fd, "this process");
  } catch (const Error& e) {
    ASSERT_EQ(e.status(), PB_ERR_UNSUPPORTED) << e.what();
    GTEST_SKIP() << "pidfd_getfd is not allowed here: " << e.what();
  }
  UniqueFd owned(copy);
  struct stat a {}, b {};
  ASSERT_EQ(fstat(fd, &a), 0);
  ASSERT_EQ(fstat(copy, &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_NE(copy, fd);
  try {
    copyPeerFd(static_cast<uint32_t>(getpid()), 1 << 20, "this process");
    ADD_FAILURE() << "copied a descriptor that is not open";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), PB_ERR_REMOTE) << e.what();
    EXPECT_NE(std::string(e.what()).find("not open there"), std::string::npos) << e.what();
  }
}

}  // namespace
