// A GPU's primary context, retained for as long as a group uses it, and a
// guard that makes it current for a stretch of driver calls and restores
// whatever the calling thread had before (possibly nothing), so neither the
// core's threads nor the user's see their device change.
#pragma once

#include <cuda.h>

#include "driver.hpp"

namespace plugboard::nvls {

/// Device `ordinal`'s CUdevice and its retained primary context.
class PrimaryContext {
 public:
  /// cuDeviceGet + cuDevicePrimaryCtxRetain; throws Error naming the call.
  PrimaryContext(const NvlsDriver& d, int ordinal);
  /// cuDevicePrimaryCtxRelease.
  ~PrimaryContext();
  PrimaryContext(const PrimaryContext&) = delete;
  PrimaryContext& operator=(const PrimaryContext&) = delete;

  /// The device.
  CUdevice device() const { return device_; }
  /// The retained primary context.
  CUcontext context() const { return context_; }

 private:
  const NvlsDriver& d_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
};

/// Makes a context current for the guard's lifetime.
class ContextGuard {
 public:
  /// cuCtxGetCurrent, then cuCtxSetCurrent(ctx) unless it already is;
  /// throws Error naming the call.
  ContextGuard(const NvlsDriver& d, CUcontext ctx);
  /// Restores the saved context.
  ~ContextGuard();
  ContextGuard(const ContextGuard&) = delete;
  ContextGuard& operator=(const ContextGuard&) = delete;

 private:
  const NvlsDriver& d_;
  CUcontext saved_ = nullptr;
  bool switched_ = false;
};

}  // namespace plugboard::nvls
