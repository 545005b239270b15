#include "held.hpp"

#include "error.hpp"

namespace plugboard::nvls {

void HeldResources::push(const Entry& e) {
  // Only a bug gets here: creation holds at most kCapacity at once.
  NVLS_CHECK(count_ < kCapacity, PB_ERR_INTERNAL, "nvls: more than 8 resources held by one group");
  entries_[count_++] = e;
}

void HeldResources::allocation(const char* label, CUmemGenericAllocationHandle handle) {
  Entry e;
  e.kind = Kind::Allocation;
  e.label = label;
  e.handle = handle;
  push(e);
}

void HeldResources::binding(CUmemGenericAllocationHandle mc, CUdevice dev, size_t size) {
  Entry e;
  e.kind = Kind::Binding;
  e.label = "binding";
  e.handle = mc;
  e.device = dev;
  e.size = size;
  push(e);
}

void HeldResources::reservation(const char* label, CUdeviceptr ptr, size_t size) {
  Entry e;
  e.kind = Kind::Reservation;
  e.label = label;
  e.ptr = ptr;
  e.size = size;
  push(e);
}

void HeldResources::mapping(const char* label, CUdeviceptr ptr, size_t size) {
  Entry e;
  e.kind = Kind::Mapping;
  e.label = label;
  e.ptr = ptr;
  e.size = size;
  push(e);
}

CUresult HeldResources::release(const Entry& e, const char** call) const noexcept {
  switch (e.kind) {
    case Kind::Allocation: *call = "cuMemRelease"; return d_->cuMemRelease(e.handle);
    case Kind::Binding: *call = "cuMulticastUnbind"; return d_->cuMulticastUnbind(e.handle, e.device, 0, e.size);
    case Kind::Reservation: *call = "cuMemAddressFree"; return d_->cuMemAddressFree(e.ptr, e.size);
    case Kind::Mapping: *call = "cuMemUnmap"; return d_->cuMemUnmap(e.ptr, e.size);
  }
  *call = "?";
  return CUDA_ERROR_UNKNOWN;
}

std::string HeldResources::releaseAll() noexcept {
  std::string first;
  while (count_ > 0) {
    const Entry e = entries_[--count_];
    const char* call = "";
    const CUresult r = release(e, &call);
    if (r == CUDA_SUCCESS || !first.empty()) continue;
    try {
      first = std::string(call) + " (" + e.label + "): " + d_->text(r);
    } catch (...) {  // out of memory for the text: still release the rest
      first = "?";
    }
  }
  return first;
}

}  // namespace plugboard::nvls
