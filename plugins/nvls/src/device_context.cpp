#include "device_context.hpp"

#include <string>

namespace plugboard::nvls {

PrimaryContext::PrimaryContext(const NvlsDriver& d, int ordinal) : d_(d) {
  d.check(d.cuDeviceGet(&device_, ordinal), "cuDeviceGet(" + std::to_string(ordinal) + ")");
  d.check(d.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain");
}

PrimaryContext::~PrimaryContext() { d_.cuDevicePrimaryCtxRelease_v2(device_); }

ContextGuard::ContextGuard(const NvlsDriver& d, CUcontext ctx) : d_(d) {
  d.check(d.cuCtxGetCurrent(&saved_), "cuCtxGetCurrent");
  if (saved_ == ctx) return;
  d.check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  switched_ = true;
}

ContextGuard::~ContextGuard() {
  if (switched_) d_.cuCtxSetCurrent(saved_);
}

}  // namespace plugboard::nvls
