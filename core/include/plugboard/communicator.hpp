/// @file communicator.hpp
/// The communicator: transports per peer pair, connections, registered
/// memory, one-sided writes and host semaphores (MSCCL++-style set-up).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "plugboard/bootstrap.hpp"
#include "plugboard/config.hpp"
#include "plugboard/error.hpp"

namespace plugboard {

class Communicator;
class GpuCollectives;
struct ConnectionImpl;
struct RegisteredMemoryImpl;
struct RemoteMemoryImpl;

/// Where a registered buffer lives.
enum class MemoryKind {
  Host,  ///< CPU memory.
  Cuda   ///< CUDA device memory (cudaMalloc or cuMem).
};

/// How to build a communicator's settings.
struct CommunicatorOptions {
  /// A ready registry; when empty, one is read from configPath, or from
  /// PLUGBOARD_CONFIG, or defaults + environment.
  std::optional<Config> config;
  /// YAML file to read when config is empty ("" = PLUGBOARD_CONFIG if set).
  std::string configPath;
  /// Values set by the program, beating YAML and environment.
  std::map<std::string, std::string> overrides;
};

/// Local memory registered with every loaded transport that can take it.
/// Copies share one registration, released with the last copy (or when the
/// communicator is destroyed, whichever comes first).
class RegisteredMemory {
 public:
  RegisteredMemory() = default;
  /// Start of the region.
  void* data() const;
  /// Size in bytes.
  size_t size() const;
  /// Host or CUDA memory.
  MemoryKind kind() const;
  /// True if this refers to a registration.
  explicit operator bool() const { return impl_ != nullptr; }

 private:
  friend class Communicator;
  friend class Connection;
  std::shared_ptr<RegisteredMemoryImpl> impl_;
};

/// A peer's registered memory, imported for the connection to that peer.
class RemoteMemory {
 public:
  RemoteMemory() = default;
  /// Size in bytes of the peer's region.
  size_t size() const;
  /// Rank that owns it.
  int rank() const;
  /// True if this refers to an imported region.
  explicit operator bool() const { return impl_ != nullptr; }

 private:
  friend class Communicator;
  friend class Connection;
  std::shared_ptr<RemoteMemoryImpl> impl_;
};

/// A connection to one peer over the transport selected for the pair.
/// Operations are posted without waiting; flush() waits for local
/// completion. Errors found by the proxy thread are rethrown by the next
/// call on this connection. Thread-safe.
class Connection {
 public:
  /// The peer's rank.
  int remoteRank() const;
  /// Name of the transport carrying it.
  const std::string& transport() const;
  /// Posts a one-sided write of size bytes from src+srcOffset to dst+dstOffset.
  /// CUDA source data must be complete (its stream synchronised) first.
  /// Where CUDA memory is staged (a host-only transport), the call returns
  /// once every chunk is copied out and posted, so src may be reused then.
  /// Throws Error(InvalidUsage) for ranges outside the regions.
  void write(const RemoteMemory& dst, uint64_t dstOffset, const RegisteredMemory& src, uint64_t srcOffset,
             uint64_t size);
  /// Posts an atomic add of value to the 8-byte counter at dst+dstOffset;
  /// it lands after every earlier write on this connection.
  void signal(const RemoteMemory& dst, uint64_t dstOffset, uint64_t value);
  /// write() then signal(), as one operation where the transport can
  /// (ABI write_signal), else as two.
  void writeWithSignal(const RemoteMemory& dst, uint64_t dstOffset, const RegisteredMemory& src, uint64_t srcOffset,
                       uint64_t size, const RemoteMemory& signalDst, uint64_t signalOffset, uint64_t value);
  /// True when the transport wakes host waiters (PB_CAP_SIGNAL_NOTIFY), so
  /// waits on this connection may sleep instead of poll.
  bool notifiesWaiters() const;
  /// True when the transport registers host memory for about the cost of a
  /// table entry (PB_CAP_CHEAP_REGISTRATION): registering a caller's buffer
  /// per call to write straight from or into it pays.
  bool registersCheaply() const;
  /// True when peer memory imported on this connection is mapped into this
  /// process (PB_CAP_MAPPED, e.g. CUDA IPC): kernels may load and store it.
  bool mapsPeerMemory() const;
  /// The address in this process where the peer's region starts (a device
  /// pointer for CUDA memory). Throws Error(InvalidUsage) when the
  /// transport does not map peer memory.
  void* remotePointer(const RemoteMemory& remote) const;
  /// Waits until every operation posted so far has completed locally.
  /// timeout < 0 uses the "timeout" setting. Throws Error(Timeout) naming
  /// the peer, host and transport.
  void flush(std::chrono::milliseconds timeout = std::chrono::milliseconds(-1));
  /// Waits until the first upTo operations posted (posted() read after
  /// posting them) have completed locally, not those posted after: a
  /// caller reusing a buffer waits for its own writes only, never for a
  /// later signal to a peer that may already be gone. Same errors as flush.
  void waitCompleted(uint64_t upTo, std::chrono::milliseconds timeout = std::chrono::milliseconds(-1));
  /// Operations posted / completed so far.
  uint64_t posted() const;
  uint64_t completed() const;
  /// One line on where the connection stands (operations posted and
  /// completed; for staged CUDA memory, both directions' slots), for
  /// messages about a stalled peer. Any thread.
  std::string describeState() const;
  /// Drives the transport once (as the proxy thread does) so completed()
  /// is current now; rethrows the connection's error, if any.
  void progress();

 private:
  friend class Communicator;
  friend class Host2HostSemaphore;
  friend class PendingFailover;
  explicit Connection(std::shared_ptr<ConnectionImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<ConnectionImpl> impl_;
};

/// One pair's failover in steps that never wait on the peer
/// (Communicator::beginFailover): a rank moving several pairs at once
/// drives them all together, so no two ranks can each wait on a pair the
/// other handles later. The failed connection is closed already (so the
/// peer notices); the next transport's connection is started. Hand
/// address() to the peer by any route, then step() with the peer's until
/// it returns the connection. Destroying it unfinished closes the new
/// connection.
class PendingFailover {
 public:
  ~PendingFailover();
  PendingFailover(const PendingFailover&) = delete;
  PendingFailover& operator=(const PendingFailover&) = delete;

  /// The transport given up ("ethernet").
  const std::string& failedTransport() const { return failed_; }
  /// The transport taken next ("libfabric").
  const std::string& nextTransport() const;
  /// This side's address on the next transport, for the peer's step().
  const std::vector<char>& address() const { return address_; }
  /// Drives the next transport's connect once with the peer's address();
  /// once up, installs the connection as the pair's and returns it (every
  /// later call returns it too); null while not up. Throws the transport's
  /// error naming the pair.
  std::shared_ptr<Connection> step(const std::vector<char>& peerAddress);

 private:
  friend class Communicator;
  PendingFailover(Communicator& comm, std::shared_ptr<ConnectionImpl> conn, std::string failed,
                  std::vector<char> address);
  Communicator& comm_;
  std::shared_ptr<ConnectionImpl> conn_;
  std::string failed_;
  std::vector<char> address_;
  std::shared_ptr<Connection> done_;
};

/// Communicator of nranks processes. Construction is collective: every rank
/// loads its transports, the ranks compare versions and settings, and every
/// rank computes the same transport for every peer pair.
class Communicator {
 public:
  /// Collective. Throws on every rank with the same reason when any rank
  /// fails to load its configuration or transports, or when ranks disagree.
  explicit Communicator(std::shared_ptr<Bootstrap> bootstrap, CommunicatorOptions options = {});
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  /// This rank.
  int rank() const;
  /// Number of ranks.
  int size() const;
  /// The bootstrap it was built on.
  Bootstrap& bootstrap() const;
  /// The resolved settings, plugin settings included.
  const Config& config() const;
  /// Host identity of a rank.
  const std::string& hostOf(int rank) const;
  /// True when rank's host runs at least as many ranks of this communicator
  /// as it has hardware threads (as that rank's process counted them at
  /// set-up): there, copies cost more than waits. Every rank answers alike.
  bool coresScarceOn(int rank) const;
  /// Transport selected for the pair (rank(), peer) and memory kind. Throws
  /// Error(Config) with the reason when no transport moves that kind.
  std::string transportFor(int peer, MemoryKind kind = MemoryKind::Host) const;
  /// Why transportFor(peer, kind) was chosen.
  std::string selectionReason(int peer, MemoryKind kind = MemoryKind::Host) const;
  /// Names of the transports loaded on this rank.
  std::vector<std::string> loadedTransports() const;

  /// Asks for a connection to peer over the transport selected for `kind`
  /// memory; the peer must ask for the same. Completed by setup(). Kinds
  /// served by the same transport share one connection.
  std::shared_future<std::shared_ptr<Connection>> connect(int peer, MemoryKind kind = MemoryKind::Host);
  /// Completes every pending connect(): exchanges addresses and drives the
  /// transports' non-blocking connect until all are up or the timeout.
  void setup();
  /// connect() to every other rank, then setup(); returns connections by peer.
  std::map<int, std::shared_ptr<Connection>> connectAll(MemoryKind kind = MemoryKind::Host);
  /// With the "failover" setting on: replaces the failed connection to
  /// peer for `kind` memory by one over the next transport the pair's rule
  /// (or, without a rule, the rising cost) allows. Closes the failed one
  /// first, so the peer notices, then connects pairwise: the peer must call
  /// it too. Logs the switch once per pair. Throws Error(Config) when
  /// failover is off and Error(Remote) naming the pair when no transport is
  /// left. Memory registered before stays registered (registrations cover
  /// every loaded transport); peers' descriptors must be imported again.
  std::shared_ptr<Connection> failover(int peer, MemoryKind kind = MemoryKind::Host);
  /// failover() for host memory, in steps that never wait on the peer
  /// (PendingFailover): for code that fails over several pairs at once.
  /// `failing` is the pair's connection as the caller holds it (failed, or
  /// one whose peer asks to move it). Where the pair has moved since (a
  /// recover(), or another object's failover of it), it moves no further:
  /// the PendingFailover is done at once with the pair's current
  /// connection (both ends see their old one fail, so both join it). Throws
  /// as failover() does, and Error(InvalidUsage) for a pair whose memory is
  /// staged (failover() handles those).
  std::unique_ptr<PendingFailover> beginFailover(const Connection& failing, MemoryKind kind = MemoryKind::Host);
  /// Collective, with the "failover" setting on: after a call failed (a
  /// user's plan executor's run, a channel's wait), every rank calls it,
  /// with nothing else running on the communicator. Every pair whose
  /// connection for some memory kind failed on either side moves that kind
  /// (and a kind sharing the connection) to the next transport its rule
  /// allows, all pairs at once, as failover() would one by one; the
  /// failure notices sent and heard are dropped, so later waits no longer
  /// end with them. Returns once every write posted before on the
  /// connections kept has landed: keep what peers may still write into (a
  /// failed executor, buffers) until then, and release it after. Channels,
  /// semaphores, imported memory and plan executors made over a moved pair
  /// are dead (their calls throw naming the failover): make them again, as
  /// at set-up. Host and GPU collectives move their own pairs within their
  /// calls and need none of this. `suspects`: peers whose pairs move too
  /// although no error was seen on them (a wait on them that timed out:
  /// signals lost without a word); either end may name the pair. Returns
  /// the peers whose pairs moved. Throws Error(Config) with failover off,
  /// Error(InvalidUsage) for a suspect that is no peer, Error(Remote)
  /// naming the pair when no transport is left, Error(Timeout) when a
  /// connect stalls.
  std::vector<int> recover(const std::vector<int>& suspects = {});
  /// The established connection for `kind` memory to peer; throws
  /// Error(InvalidUsage) if none.
  std::shared_ptr<Connection> connection(int peer, MemoryKind kind = MemoryKind::Host) const;

  /// Registers memory of the given kind with every loaded transport that
  /// accepts that kind. Throws Error(InvalidUsage) when none does (naming
  /// the loaded transports).
  RegisteredMemory registerMemory(void* data, size_t size, MemoryKind kind = MemoryKind::Host);
  /// Registers memory with the named loaded transport only (for a buffer
  /// used on one connection, where registering with every transport would
  /// cost more). Throws Error(InvalidUsage) when that transport is not
  /// loaded or does not take the kind.
  RegisteredMemory registerMemory(void* data, size_t size, MemoryKind kind, const std::string& transport);
  /// mem's descriptor as bytes, to hand a peer in-band (sendMemory sends the
  /// same through the bootstrap).
  std::vector<char> serializeMemory(const RegisteredMemory& mem);
  /// Imports a descriptor peer made with serializeMemory, on the connection
  /// to peer for its memory kind (connect first). Throws Error(Remote) for
  /// a malformed descriptor, naming peer.
  RemoteMemory deserializeMemory(const std::vector<char>& descriptor, int peer);
  /// Sends mem's descriptor to peer (tag >= 0 tells apart several).
  void sendMemory(const RegisteredMemory& mem, int peer, int tag = 0);
  /// Receives a descriptor peer sent with sendMemory and imports it on the
  /// connection carrying its memory kind (connect to peer for that kind first).
  RemoteMemory recvMemory(int peer, int tag = 0);

  /// Throws Error(Aborted) once abort() was called, then a peer's reported
  /// failure (peerFailure()), then the first error a background thread
  /// recorded, if any.
  void checkErrors() const;
  /// Tells every peer that this rank gives up on the communicator, and why
  /// (a failure its own code met), so that their waits on it end within
  /// milliseconds naming this rank and the reason instead of at their
  /// timeout: checkErrors(), semaphore waits, host collectives, host plan
  /// executors, GPU plan executors and GPU collectives hear it (the GPU
  /// objects' kernels end within about 10 ms, also while the user waits in
  /// cudaStreamSynchronize: a watcher thread per communicator looks); a
  /// HostPlanExecutor or GpuPlanExecutor that fails reports through it by
  /// itself. Only the first call sends, and none once a peer's
  /// notice came (that peer told everyone). Never throws. Sends through the
  /// bootstrap: call it where a bootstrap call may run (Bootstrap's contract).
  void reportFailure(const std::string& reason) noexcept;
  /// The failure a peer reported (reportFailure()), if one came:
  /// Error(Remote) naming this rank, the peer, its host and its reason.
  /// Kept: every later call returns it. Looks at most once a millisecond;
  /// never waits on a peer. Reads through the bootstrap, as reportFailure().
  std::optional<Error> peerFailure();
  /// Ends this communicator's work, from any thread, while other threads
  /// (and GPU kernels) may be blocked in it (NCCL's ncclCommAbort): every
  /// host wait (collectives, semaphores, flush) and every device wait of
  /// its GpuCollectives ends within a few milliseconds with Error(Aborted),
  /// and every later call fails the same way (set-up too: setup(),
  /// connectAll(), sendMemory(), recvMemory(), failover() and the host and
  /// GPU collectives' constructors throw it at once instead of exchanging
  /// with peers that may have aborted as well). Local: peers learn of it by
  /// their own timeouts or lost connections. Destroy the communicator after
  /// it (without collective steps) and build a new one to go on. A
  /// bootstrap call waiting at that moment ends with Error(Aborted) too
  /// (Bootstrap::abort); later bootstrap calls run as usual. Idempotent.
  void abort();
  /// True once abort() was called.
  bool aborted() const;
  /// The first error this communicator holds without a call having thrown
  /// it yet: the abort, a peer's reported failure (one not read yet is
  /// named by its sender only: peerFailure() reads the reason), or a
  /// connection's failure found by a background thread
  /// (ncclCommGetAsyncError). Never blocks or throws; empty if none.
  std::optional<Error> asyncError() const;
  /// The "timeout" setting as a duration.
  std::chrono::milliseconds defaultTimeout() const;

  struct Impl;  ///< Private state (pimpl).

 private:
  /// recover()'s last step: returns once every write posted before on the
  /// open connections not mapping peer memory has landed (every rank calls it).
  void drain();
  friend class Host2HostSemaphore;
  friend class PendingFailover;
  friend class Device2DeviceSemaphore;
  friend class PortChannelService;
  friend class GpuCollectives;  // its set-up exchanges scratch descriptors under an internal tag
  friend class GpuPlanExecutor;  // registers an abort hook
  friend class SwitchChannel;    // exchanges buffer descriptors under an internal tag
  friend class MulticastGroup;   // finds the group transport among the plugins
  std::unique_ptr<Impl> impl_;
};

/// A host-to-host semaphore with one peer: signal() adds 1 to the peer's
/// inbound counter after every earlier write on the connection; wait()
/// returns once this side's inbound counter reaches the next expected value.
class Host2HostSemaphore {
 public:
  /// Collective with the peer, which must construct its own at the same
  /// point: exchanges the counters' descriptors over the bootstrap.
  Host2HostSemaphore(Communicator& comm, std::shared_ptr<Connection> connection);
  /// This side's half, made before the connection or the peer's half
  /// exists (PeerLink's failover sends it with everything else at once):
  /// the inbound counter, registered with every loaded transport.
  struct Half {
    std::unique_ptr<uint64_t> counter;  ///< Written by the transport.
    RegisteredMemory memory;            ///< Its registration; serializeMemory() it for the peer.
  };
  /// Registers a new counter.
  static Half prepare(Communicator& comm);
  /// Completes `half` with the descriptor of the peer's half (from its
  /// serializeMemory), imported on connection. Never waits.
  Host2HostSemaphore(Communicator& comm, std::shared_ptr<Connection> connection, Half half,
                     const std::vector<char>& peerCounter);
  ~Host2HostSemaphore();
  Host2HostSemaphore(const Host2HostSemaphore&) = delete;
  Host2HostSemaphore& operator=(const Host2HostSemaphore&) = delete;

  /// Posts +1 to the peer's inbound counter.
  void signal();
  /// Posts +n to the peer's inbound counter (n signals at once).
  void signalAdd(uint64_t n);
  /// Posts a write on the connection and then +1 to the peer's counter,
  /// fused into one operation where the transport allows.
  void writeAndSignal(const RemoteMemory& dst, uint64_t dstOffset, const RegisteredMemory& src, uint64_t srcOffset,
                      uint64_t size);
  /// Waits for the next signal from the peer. timeout < 0: the "timeout"
  /// setting. Throws Error(Timeout) naming peer, host, transport and counts,
  /// the connection's error if the peer failed, or a failure any peer
  /// reported (Communicator::peerFailure(), looked at once a millisecond).
  void wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(-1));
  /// Signals received so far.
  uint64_t inbound() const;
  /// The connection it signals over.
  Connection& connection() const { return *connection_; }

 private:
  Communicator& comm_;
  std::shared_ptr<Connection> connection_;
  std::unique_ptr<uint64_t> inbound_;  // written by the transport, read with acquire loads
  RegisteredMemory local_;
  RemoteMemory remote_;
  uint64_t expected_ = 0;
};

/// Version of the Plugboard library, "major.minor.patch".
const char* libraryVersion();

}  // namespace plugboard
