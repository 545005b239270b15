// The driver resources one rank holds for a group, released newest first:
// the teardown order (multicast view, unicast view, binding, physical
// memory, multicast object) is the reverse of the creation order by
// construction, on success (group_destroy) and on any failure midway.
#pragma once

#include <cuda.h>

#include <array>
#include <cstddef>
#include <string>

#include "driver.hpp"

namespace plugboard::nvls {

/// A stack of held driver resources. Pushing never allocates, so a
/// resource the driver just created is always recorded.
class HeldResources {
 public:
  /// Resources are released through d, which must outlive this object.
  explicit HeldResources(const NvlsDriver& d) : d_(&d) {}
  /// Releases whatever is still held, ignoring errors (the caller has made
  /// the right context current: MulticastGroup does).
  ~HeldResources() { releaseAll(); }
  HeldResources(const HeldResources&) = delete;
  HeldResources& operator=(const HeldResources&) = delete;

  /// An allocation handle (multicast object or physical memory): cuMemRelease.
  void allocation(const char* label, CUmemGenericAllocationHandle handle);
  /// mc's binding of this device's memory: cuMulticastUnbind(mc, dev, 0, size).
  void binding(CUmemGenericAllocationHandle mc, CUdevice dev, size_t size);
  /// A reserved address range: cuMemAddressFree.
  void reservation(const char* label, CUdeviceptr ptr, size_t size);
  /// A mapping: cuMemUnmap.
  void mapping(const char* label, CUdeviceptr ptr, size_t size);

  /// Releases everything, newest first, carrying on past failures. Returns
  /// "" or the first failure, e.g. "cuMemUnmap (multicast view):
  /// CUDA_ERROR_INVALID_VALUE (driver error 1)".
  std::string releaseAll() noexcept;
  /// Number of resources held.
  size_t size() const { return count_; }

 private:
  enum class Kind { Allocation, Binding, Reservation, Mapping };
  struct Entry {
    Kind kind = Kind::Allocation;
    const char* label = "";
    CUmemGenericAllocationHandle handle = 0;  ///< Allocation, Binding (the multicast object).
    CUdeviceptr ptr = 0;                      ///< Reservation, Mapping.
    CUdevice device = 0;                      ///< Binding.
    size_t size = 0;                          ///< Binding, Reservation, Mapping.
  };
  /// A group holds at most 2 allocations, 1 binding, 2 reservations, 2 mappings.
  static constexpr size_t kCapacity = 8;

  void push(const Entry& e);
  /// Releases e; returns the driver's result and its call's name.
  CUresult release(const Entry& e, const char** call) const noexcept;

  const NvlsDriver* d_;
  std::array<Entry, kCapacity> entries_{};
  size_t count_ = 0;
};

}  // namespace plugboard::nvls
