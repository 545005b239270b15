/// @file switch_channel.hpp
/// Host side of a SwitchChannel (MSCCL++'s name): a buffer on every rank of
/// a communicator that kernels reduce over and broadcast into as a group
/// (switch_channel_device.hpp). Requires CUDA.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "plugboard/communicator.hpp"
#include "plugboard/datatype.hpp"
#include "plugboard/gpu/switch_channel_device.hpp"

namespace plugboard {

/// Where a SwitchChannel's group operations run.
enum class SwitchBackend {
  Multicast,  ///< NVLink SHARP multicast through the nvls transport: the switch reduces and replicates.
  Peers,      ///< Every rank's buffer mapped through a transport that maps peer memory (cudaipc).
};

/// Which backend a SwitchChannel may take.
enum class SwitchMode {
  Auto,       ///< Multicast where the nvls transport can create the group on every rank, else Peers.
  Multicast,  ///< Multicast only: Error(Plugin) with every rank's reason when it cannot.
  Peers,      ///< Peers only (never creates a multicast object).
};

/// "multicast" / "peers".
const char* switchBackendName(SwitchBackend backend);

/// A group buffer of `bytes` data bytes on every rank of a communicator.
///
/// Construction and destruction are collective (every rank, same
/// arguments). The multicast backend needs the nvls transport loaded (it is
/// in the default "auto" transport list) and every rank's group_can_create
/// to agree; it never creates a multicast object while NCCL_NVLS_ENABLE=0 or
/// PLUGBOARD_NVLS_ENABLE=0 is set (the plugin refuses, and the reason is
/// kept in multicastRefusal()). The peers backend needs every pair of the
/// communicator to map peer memory; otherwise Error(InvalidUsage) names
/// each rank's first pair that does not and its transport.
///
/// A construction that fails on any rank fails on every rank, each error
/// naming every failing rank and why (sizes that differ between ranks
/// included), so no rank keeps a channel another lacks.
///
/// The data starts zeroed (multicast: undefined until written; the counters
/// are zeroed). Kernels using the channel must have finished before the
/// destructor runs (it synchronises the device first).
class SwitchChannel {
 public:
  /// Collective over comm (which must outlive this object), on the CUDA
  /// device current now. bytes > 0 is rounded up to a multiple of 16.
  SwitchChannel(Communicator& comm, size_t bytes, SwitchMode mode = SwitchMode::Auto);
  ~SwitchChannel();
  SwitchChannel(const SwitchChannel&) = delete;
  SwitchChannel& operator=(const SwitchChannel&) = delete;

  /// The backend taken.
  SwitchBackend backend() const;
  /// Data bytes per rank (what deviceHandle().dataBytes says).
  size_t bytes() const;
  /// Why multicast was not taken ("" when it was; "not asked for" under
  /// SwitchMode::Peers): every rank's refusal, by rank.
  const std::string& multicastRefusal() const;
  /// Plain handle for kernels.
  SwitchChannelDeviceHandle deviceHandle() const;

  /// True for the types and ops both backends reduce: Float32 sum, Float16
  /// and BFloat16 sum, min and max.
  static bool supports(DataType type, ReduceOp op);
  /// Asks the nvls transport of comm, on every rank, whether it can create
  /// a group of comm's ranks on the current device; collective. "" when
  /// every rank can, else every refusing rank's reason ("rank 1: disabled
  /// by NCCL_NVLS_ENABLE=0; ..."). Creates nothing.
  static std::string multicastRefusalFor(Communicator& comm);

  struct Impl;  ///< Private state (pimpl).

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace plugboard
