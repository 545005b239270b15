// One rank's part of a multicast group buffer: the multicast object (made
// by group rank 0, imported by the others), this rank's physical memory
// bound into it, and both views mapped on this rank's GPU. Creation is
// collective over the group and runs in phases (wire.hpp's Phase), each
// closed by an all_gather of every rank's status, so a failure anywhere
// unwinds every rank with the same message and nothing stays allocated.
// Every driver call goes through the NvlsDriver table it is given.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "device_context.hpp"
#include "driver.hpp"
#include "error.hpp"
#include "exchange.hpp"
#include "fd.hpp"
#include "handle_kind.hpp"
#include "held.hpp"
#include "request.hpp"

namespace plugboard::nvls {

/// What group creation takes besides the request.
struct GroupOptions {
  HandlePreference handlePreference = HandlePreference::Auto;  ///< This rank's handle_type.
  FdCopier copyFd = copyPeerFd;  ///< How a posix_fd handle reaches the other ranks.
  uint32_t pid = 0;              ///< This process's id, sent with a posix_fd handle.
};

/// The least common multiple of granularities (the largest, for the
/// powers of two drivers report). Throws Error(PB_ERR_INVALID) on a zero
/// granularity, Error(PB_ERR_NOMEM) on overflow.
uint64_t commonGranularity(const std::vector<uint64_t>& granularities);

/// bytes rounded up to a multiple of granularity (> 0). Throws
/// Error(PB_ERR_NOMEM) when the result does not fit a size_t.
size_t roundUp(size_t bytes, uint64_t granularity);

/// This rank's share of a created group buffer.
class MulticastGroup {
 public:
  /// Collective: every rank of request's group calls it with its own
  /// request, driver table and exchange. Throws Error naming the first
  /// failing group rank, its communicator rank, the phase and the driver
  /// call (with the driver's error name); then nothing is held.
  static std::unique_ptr<MulticastGroup> create(const NvlsDriver& d, const GroupRequest& request, Exchange& exchange,
                                                const GroupOptions& options);

  /// For a rank that cannot take part (refusal: its reason and status):
  /// tells the others through the first all_gather, so they unwind at once
  /// instead of waiting for the core's timeout, then throws refusal. Calls
  /// no driver function; a failing exchange is ignored.
  [[noreturn]] static void refuse(const GroupRequest& request, Exchange& exchange, const Error& refusal);

  /// Releases what is still held (as destroy, ignoring errors).
  ~MulticastGroup();
  MulticastGroup(const MulticastGroup&) = delete;
  MulticastGroup& operator=(const MulticastGroup&) = delete;

  /// Unmaps and frees the multicast view, then the unicast view, unbinds
  /// this device, releases the physical memory, then the multicast object,
  /// carrying on past failures. Throws Error(PB_ERR_SYSTEM) naming the
  /// first failure once everything was attempted.
  void destroy();

  /// Device address whose stores and reductions reach every rank's buffer.
  CUdeviceptr multicast() const { return mcView_; }
  /// Device address of this rank's own buffer.
  CUdeviceptr unicast() const { return ucView_; }
  /// Usable bytes of each view (the request rounded up to the granularity).
  size_t bytes() const { return bytes_; }
  /// The handle kind the group agreed on.
  HandleKind handleKind() const { return kind_; }
  /// The request it was created for.
  const GroupRequest& request() const { return request_; }

 private:
  MulticastGroup(const NvlsDriver& d, GroupRequest request) : d_(d), request_(std::move(request)), held_(d) {}

  /// Runs the phases in order under the device's primary context.
  void build(Exchange& exchange, const GroupOptions& options);
  /// Runs work (which fills this rank's report) and all_gathers the
  /// reports; throws the first failing rank's error on every rank.
  template <typename Work>
  std::vector<Report> phase(Exchange& exchange, Phase which, Work&& work);
  /// Throws when any report failed: the same message on every rank.
  void throwIfAnyFailed(const std::vector<Report>& reports, Phase which) const;

  void agree(Report& mine, const GroupOptions& options, std::optional<ContextGuard>& guard);
  void decide(const std::vector<Report>& all);
  void queryGranularity(Report& mine) const;
  void createAndExport(Report& mine, const GroupOptions& options);
  void importAndAdd(const Report& creator, const GroupOptions& options);
  void allocateAndBind();
  void mapViews();
  CUdeviceptr mapView(const char* label, CUmemGenericAllocationHandle handle);

  CUmulticastObjectProp multicastProp(size_t size) const;
  CUmemAllocationProp allocationProp() const;

  const NvlsDriver& d_;
  GroupRequest request_;
  // Declaration order is release order reversed: the resources go first
  // (under the context, in ~MulticastGroup), the context last.
  std::optional<PrimaryContext> primary_;
  HeldResources held_;
  UniqueFd exported_;  ///< Rank 0's exported posix_fd handle, until every rank imported it.
  HandleKind kind_ = HandleKind::PosixFd;
  size_t granularity_ = 0;
  size_t bytes_ = 0;
  CUmemGenericAllocationHandle mc_ = 0;
  CUmemGenericAllocationHandle memory_ = 0;
  CUdeviceptr ucView_ = 0;
  CUdeviceptr mcView_ = 0;
};

}  // namespace plugboard::nvls
