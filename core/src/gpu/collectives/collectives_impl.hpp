// Private state of GpuCollectives: settings, the scratch buffer and its
// peers' mappings, the PortChannels of unmapped peers, the device context
// the kernels get.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "gpu/collectives/device_ctx.hpp"
#include "communicator/failure_notices.hpp"
#include "gpu/collectives/host_relay.hpp"
#include "gpu/plans/plan_selection.hpp"
#include "plugboard/error.hpp"
#include "plugboard/gpu/collectives.hpp"
#include "plugboard/gpu/port_channel.hpp"
#include "plugboard/gpu/switch_channel.hpp"

namespace plugboard {

/// The GPU collectives' settings, read once from the registry and checked.
struct GpuCollSettings {
  uint64_t smallBytes = 0;           ///< gpu_allreduce_small_bytes
  uint64_t broadcastSmallBytes = 0;  ///< gpu_broadcast_small_bytes
  uint64_t blocksSmallBytes = 0;     ///< gpu_blocks_small_bytes (allgather, alltoall, reducescatter)
  uint64_t oneShotBytes = 0;         ///< gpu_allreduce_oneshot_bytes
  uint64_t p2pSmallBytes = 0;        ///< gpu_p2p_small_bytes (send, recv, sendRecv)
  uint64_t relayBytes = 0;           ///< gpu_host_relay_bytes
  /// `failover` on (and relayBytes > 0): on a communicator with an unmapped
  /// pair every call, send/recv too, goes through the host relay, whose
  /// host collectives fail over; calls above relayBytes go in pieces.
  bool relayAll = false;
  uint64_t relayAreaBytes = 0;       ///< The relay's data area: relayBytes, kRelayPieceBytes at least with relayAll.
  uint64_t scratchBytes = 0;  ///< gpu_scratch_bytes (per peer)
  uint32_t blocks = 0;        ///< gpu_blocks
  uint32_t portBlocks = 0;    ///< gpu_port_blocks
  uint32_t portSlots = 0;     ///< gpu_port_slots
  uint32_t threads = 0;       ///< gpu_threads
  uint64_t chunkBytes = 0;    ///< gpu_chunk_bytes
  int64_t waitTimeoutNs = 0;  ///< gpu_wait_timeout, in nanoseconds
  std::string switchMode;     ///< gpu_switch: auto, multicast, peers or off
  uint64_t switchBytes = 0;   ///< gpu_switch_bytes
  uint64_t switchChunkBytes = 0;  ///< gpu_switch_chunk_bytes (0: no cap)

  /// Reads and validates; throws Error(Config) naming the setting.
  static GpuCollSettings read(const Config& config);
};

/// "30 s", "0.5 s": a duration in nanoseconds for messages.
std::string formatSeconds(int64_t ns);

struct GpuCollectives::Impl {
  Communicator& comm;
  GpuCollSettings settings;
  int rank = 0, nranks = 0, device = 0;
  std::map<int, std::shared_ptr<Connection>> connections;  // CUDA-memory connection per peer
  char* scratch = nullptr;          // device, layout.total bytes
  uint64_t* state = nullptr;        // device, see DeviceCtx
  char** remoteTable = nullptr;     // device [nranks]
  uint32_t* flags = nullptr;        // mapped host: [0] abort, [1] first failure, [2, 2 + nranks) per-peer errors
  uint32_t* flagsDev = nullptr;
  RegisteredMemory local;
  std::vector<RemoteMemory> remotes;  // by rank (empty for self)
  char* portArea = nullptr;           // pinned mapped host, layout.portTotal bytes (when this rank has an unmapped peer)
  char* portAreaDev = nullptr;        // its device alias
  RegisteredMemory portLocal;         // the port area, registered as host memory
  std::vector<RemoteMemory> portRemotes;  // by rank: unmapped peers' port areas
  /// Some pair of the communicator (not necessarily ours) is unmapped: the
  /// same on every rank, so every rank picks the same algorithms and layout.
  bool portPairs = false;
  /// Blocks of every pipelined call (and of the layout): gpu_blocks, or at
  /// most gpu_port_blocks when portPairs. The same on every rank.
  uint32_t blocks = 0;
  uint32_t maxUnmappedPeers = 0;                  // over every rank
  std::unique_ptr<PortChannelService> service;     // when this rank has an unmapped peer
  std::vector<gpucoll::PortPipe> portTable;        // host copy of ctx.ports
  gpucoll::PortPipe* ports = nullptr;              // device [nranks][blocks][2]
  uint64_t* portSeen = nullptr;                    // device [nranks][blocks][2]: PortPipe::seen
  gpucoll::DeviceCtx ctx;
  /// The SwitchChannel of the switch algorithms (gpu_switch), or null:
  /// the same on every rank.
  std::unique_ptr<SwitchChannel> switchChannel;
  SwitchChannelDeviceHandle switchHandle;
  uint64_t switchCellBytes = 0;  // bytes per (rank, block) cell of the switch kernels' rounds
  uint64_t abortHook = 0;  // Communicator::Impl::addAbortHook id (0: none)
  /// Small allreduces and reduces through the host (gpu_host_relay_bytes
  /// with portPairs), or null: the same on every rank.
  std::unique_ptr<gpucoll::HostRelay> relay;
  /// Executors of the YAML plans: rules for GPU buffers at this rank count, or null.
  std::unique_ptr<GpuPlanSelection> plans;
  /// Tells the peers of this rank's failure and learns of theirs; mutable:
  /// the const error checks send and poll.
  mutable FailureNotices notices;
  mutable std::mutex noticeMu;                        // notices' reads, noticeTaken: callers and the watcher
  mutable bool noticeTaken = false;                   // actOnNotice() has run
  mutable std::atomic<bool> ownFailureFirst{false};   // this rank had recorded a failure before the notice came
  /// The communicator's NoticeWatcher watches for this channel's notices
  /// and the communicator's between calls too, so one ends this rank's
  /// kernels while its threads are in CUDA (a user's cudaStreamSynchronize)
  /// rather than at the next call. Added at the end of setup(), removed
  /// first in ~Impl.
  std::vector<uint64_t> noticeWatches;

  explicit Impl(Communicator& c) : comm(c), notices(c, NoticeScope::GpuCollectives) {}
  ~Impl();
  /// Connects, allocates and exchanges the scratch, builds ctx (collective).
  void setup();
  /// Throws the first recorded device failure, if any, or a peer's failure
  /// notice (which ends this object's device waits); a failure of this
  /// rank's own is first told to the peers.
  void throwIfFailed() const;
  /// Looks for a peer's failure notice, of these GPU collectives or of the
  /// communicator (FailureNotices::poll); on one, ends this object's device
  /// waits. The notice's error, if one came. Calling threads only (it reads
  /// the notice: a bootstrap call).
  std::optional<Error> pollNotices() const;
  /// The NoticeWatcher's call on a notice waiting in the bootstrap: acts on
  /// it without reading it.
  void watchNotices() const;
  /// Once per object, under noticeMu: notes whether this rank had failed
  /// first, then ends this object's device waits.
  void actOnNotice() const;
  /// Throws Error(InvalidUsage) unless the current device is the construction one.
  void checkDevice() const;

 private:
  void throwIfPortProxyFailed() const;
  /// throwIfFailed() less the abort and the notices: what this rank recorded.
  void throwRecordedFailure() const;
  /// Throws the failure of a SwitchChannel barrier (first word with no peer).
  [[noreturn]] void throwSwitchFailure(uint32_t first) const;
  void agreeOnPortPairs();
  /// Loads every kernel; returns the fewest blocks of any that an SM holds.
  uint32_t loadKernels() const;
  /// Lowers blocks so every rank sharing a GPU has all its blocks resident
  /// (collective; the same on every rank).
  void capBlocksForSharedGpus(uint32_t perSM);
  void computeLayout();
  void exchangeScratch();
  /// Allocates, registers and exchanges the port area with the unmapped peers.
  void exchangePortAreas();
  void setupPorts();
  /// Creates switchChannel as gpu_switch says (collective).
  void setupSwitch();
  void drainPorts() noexcept;
  /// Communicator::abort(): ends every device wait of this object's kernels.
  void abortDeviceWaits() const noexcept;
};

}  // namespace plugboard
