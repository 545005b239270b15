// Private state behind Communicator, Connection, RegisteredMemory and
// RemoteMemory. Ownership: the communicator owns the plugins; connections
// and registrations refer to them and are closed by the communicator before
// the plugins are finalised, even if a user still holds a handle.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "communicator/failure_notices.hpp"
#include "communicator/notice_watcher.hpp"
#include "communicator/local_setup.hpp"
#include "communicator/stager.hpp"
#include "plugboard/communicator.hpp"
#include "plugins/transport_plugin.hpp"
#include "selection/selector.hpp"

namespace plugboard {

class ProxyService;

/// Bootstrap tags used by the core. User tags of sendMemory are offset past them.
enum CoreTag : int {
  kTagConnect = 1,
  kTagSemaphore = 2,
  kTagStaging = 3,
  kTagGpuCollectives = 4,  // GpuCollectives scratch descriptors
  kTagGpuCollectivesPort = 5,  // GpuCollectives port-area descriptors
  kTagSwitchChannel = 6,  // SwitchChannel (peers backend) buffer descriptors
  kTagUserMemoryBase = 1 << 20,
};

/// One open connection to a peer.
struct ConnectionImpl {
  TransportPlugin* plugin = nullptr;
  pb_conn* conn = nullptr;
  int rank = -1;
  int peer = -1;
  std::string peerHost;
  std::chrono::milliseconds timeout{60000};
  std::mutex mutex;                    // serialises every plugin call on conn
  std::atomic<uint64_t> posted{0};
  std::atomic<uint64_t> completed{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;            // guarded by mutex
  /// The communicator's abort flag (shared: a Connection may outlive it).
  std::shared_ptr<const std::atomic<bool>> aborted;
  bool closed = false;                 // guarded by mutex
  std::vector<std::weak_ptr<RemoteMemoryImpl>> imports;  // guarded by mutex; pruned as it grows
  /// Set by setup() when the pair's CUDA memory is staged over this transport;
  /// stopped by close() before the plugin connection is freed.
  std::unique_ptr<Stager> stager;

  /// "rank 0 -> rank 3 (host b) over ethernet", for messages.
  std::string describe() const;
  /// Posts a plugin write; returns the posted count including it.
  uint64_t postWrite(pb_mr* src, uint64_t srcOffset, pb_rkey* dst, uint64_t dstOffset, uint64_t size);
  /// Posts write then signal, fused where the plugin has write_signal.
  uint64_t postWriteSignal(pb_mr* src, uint64_t srcOffset, pb_rkey* dst, uint64_t dstOffset, uint64_t size,
                           pb_rkey* signalDst, uint64_t signalOffset, uint64_t value);
  /// Posts a plugin signal; returns the posted count including it.
  uint64_t postSignal(pb_rkey* dst, uint64_t dstOffset, uint64_t value);
  /// Calls proxy_progress once; records an error instead of throwing.
  /// With ifIdle, returns at once when another thread holds the connection
  /// (it is progressing or posting: no need to queue behind it). Returns
  /// false only then.
  bool progress(bool ifIdle = false);
  /// Rethrows the recorded error, if any.
  void throwIfFailed();
  /// Throws Error(InvalidUsage) if the communicator closed this connection.
  void requireOpen() const;
  /// Records e as this connection's error (first one wins).
  void fail(std::exception_ptr e);
  /// Throws the plugin's error for a post that returned st (what: "write",
  /// ...), after recording it as the connection's: a transport that refused
  /// a post is done, and later checks (failover among them) see it.
  /// Caller holds mutex.
  void checkPost(pb_status st, const char* what);
  /// Releases imported keys and frees the plugin connection. Idempotent.
  void close();
  ~ConnectionImpl() { close(); }
};

/// One registration of local memory with each transport that accepts it.
struct RegisteredMemoryImpl {
  uint64_t id = 0;  // unique in the communicator; names the region in staged writes
  void* data = nullptr;
  size_t size = 0;
  MemoryKind kind = MemoryKind::Host;
  int rank = -1;
  std::mutex mutex;
  std::vector<std::pair<TransportPlugin*, pb_mr*>> regs;  // guarded by mutex
  /// Staged signals to device counters here: offset -> the value last
  /// written (gpu/staged_counter.hpp). Guarded by mutex.
  std::map<uint64_t, uint64_t> stagedCounters;
  /// The region's handle for a transport, or null.
  pb_mr* handleFor(const TransportPlugin* plugin);
  /// Deregisters from every transport. Idempotent.
  void release();
  ~RegisteredMemoryImpl() { release(); }
};

/// A peer region imported on one connection.
struct RemoteMemoryImpl {
  std::shared_ptr<ConnectionImpl> connection;
  pb_rkey* rkey = nullptr;  // released by ConnectionImpl::close or the destructor; null when staged
  size_t size = 0;
  int rank = -1;
  uint64_t regionId = 0;              // the owner's RegisteredMemoryImpl::id
  MemoryKind kind = MemoryKind::Host;
  bool staged = false;                // reached through the connection's stager, not the plugin
  ~RemoteMemoryImpl();
};

/// Private state of a Communicator.
struct Communicator::Impl {
  std::shared_ptr<Bootstrap> bootstrap;
  LocalSetup local;                      // config and plugins
  Config* config = nullptr;              // == local.config.get()
  LocalIdentity self;
  std::vector<std::unique_ptr<TransportPlugin>>& plugins = local.plugins;
  std::vector<RankView> views;  // by rank: host, transports, reach
  std::map<MemoryKind, std::map<std::pair<int, int>, PairChoice>> choices;  // by memory kind, then pair
  std::map<MemoryKind, std::string> selectionErrors;  // kinds no transport serves, and why
  std::chrono::milliseconds timeout{60000};

  std::mutex mutex;  // guards the maps below
  /// Connections by (peer, transport): one serves every memory kind its transport moves.
  using ConnKey = std::pair<int, std::string>;
  std::map<ConnKey, std::shared_ptr<ConnectionImpl>> connections;
  /// Failed-over connections that another memory kind's stager still runs
  /// on: left open for it, closed by shutdown() with the rest (startFailover).
  std::vector<std::shared_ptr<ConnectionImpl>> retired;
  std::map<ConnKey, std::promise<std::shared_ptr<Connection>>> pendingPromises;
  std::map<ConnKey, std::shared_future<std::shared_ptr<Connection>>> pendingFutures;
  std::vector<std::weak_ptr<RegisteredMemoryImpl>> memories;  // pruned of expired ones as it grows
  std::map<uint64_t, std::weak_ptr<RegisteredMemoryImpl>> regionsById;  // for staged writes landing here
  uint64_t nextRegionId = 1;
  std::set<ConnKey> pendingStagers;  // connections setup() must give a stager
  std::unique_ptr<ProxyService> proxy;

  /// Peers' reported failures (Communicator::reportFailure), made once
  /// every rank has passed set-up's exchanges.
  std::unique_ptr<FailureNotices> notices;
  /// Looks for notices between calls for GPU objects (their kernels wait
  /// where no host loop polls); its thread starts with the first watch.
  std::unique_ptr<NoticeWatcher> noticeWatcher;

  /// Set by abort(); every connection holds it (ConnectionImpl::aborted).
  std::shared_ptr<std::atomic<bool>> aborted = std::make_shared<std::atomic<bool>>(false);
  std::mutex abortMutex;  // guards abortHooks and nextAbortHook
  std::map<uint64_t, std::function<void()>> abortHooks;
  uint64_t nextAbortHook = 1;
  /// Runs fn on abort() (or at once if aborted already): objects that wait
  /// outside the host's loops (GPU kernels) end their waits there. fn must
  /// not throw or call back into the communicator. Returns its id.
  uint64_t addAbortHook(std::function<void()> fn);
  /// Removes a hook; after it returns the hook no longer runs.
  void removeAbortHook(uint64_t id);
  /// "rank 3 (host b): the communicator was aborted (Communicator::abort)".
  std::string abortText() const;
  /// Throws Error(Aborted) naming call once abort() was called: the
  /// communicator's own bootstrap exchanges then fail at once rather than
  /// wait for peers that aborted too (a call already waiting is ended by
  /// the bootstrap's abort).
  void throwIfAborted(const char* call) const;

  /// Ranks whose host is this rank's (this one included), from views.
  int localRanks() const;
  /// Ranks of the communicator on rank's host (rank included), from views.
  int ranksOnHostOf(int rank) const;
  /// Communicator::coresScarceOn.
  bool coresScarceOn(int rank) const;
  /// What plugins are told of the pair (this rank, peer); host strings
  /// point into self and views.
  pb_peer_info_v1 peerInfo(int peer) const;
  /// Round 1: identities, versions, settings; throws on every rank alike.
  void exchangeIdentity(const std::string& localError, ErrorCode localCode);
  /// Round 2: reachability, then the per-pair selection.
  void exchangeReach();
  /// The loaded plugin named name; throws Error(Internal) if absent.
  TransportPlugin& plugin(const std::string& name) const;
  /// The choice for the pair (rank, peer) and memory kind; throws the
  /// selection's error when no transport serves that kind.
  const PairChoice& choiceFor(int peer, MemoryKind kind) const;
  /// Moves the pair's choice for `kind` to its first fallback and drops the
  /// failed connection from the table (the caller closes it). Caller holds
  /// mutex. Throws Error(Remote) naming the pair when no fallback is left
  /// (the table unchanged then).
  std::shared_ptr<ConnectionImpl> takeFallback(int peer, MemoryKind kind, std::string* failedTransport);
  /// Selects transports for each memory kind (after exchangeReach's data).
  void selectAllKinds();
  /// True when a memory kind other than `kind` has the pair on `transport`.
  /// Caller holds mutex.
  bool otherKindUses(int peer, MemoryKind kind, const std::string& transport) const;
  /// The open connection carrying `kind` memory to peer, or null.
  std::shared_ptr<ConnectionImpl> findConnection(int peer, MemoryKind kind) const;
  /// Registers memory with every loaded transport that takes its kind (and
  /// for staging where CUDA memory has none); records it by id.
  /// Registers with every loaded transport taking kind, or with `only`
  /// (a transport name) when it is not empty.
  std::shared_ptr<RegisteredMemoryImpl> registerRegion(void* data, size_t size, MemoryKind kind,
                                                       const std::string& only = "");
  /// The live registration with this id, or null.
  std::shared_ptr<RegisteredMemoryImpl> findRegion(uint64_t id);
  /// Sets how waits spin (gWaitSpinPolls) from this host's ranks and cores.
  void paceWaits();
  /// A registration's descriptor, as peers import it.
  std::vector<char> describeMemory(RegisteredMemoryImpl& mem);
  /// Imports a descriptor from peer on conn, or (conn null) on the
  /// connection carrying its memory kind.
  std::shared_ptr<RemoteMemoryImpl> importMemory(const std::vector<char>& blob, int peer,
                                                 std::shared_ptr<ConnectionImpl> conn);
  /// A new connection to peer over transport, set up to the point where
  /// its address (addr) goes to the peer; proxy_connect completes it.
  std::shared_ptr<ConnectionImpl> startConnection(int peer, const std::string& transport, std::vector<char>& addr);
  /// Sends peer this side's address on transport (kTagConnect).
  void sendConnectAddress(int peer, const std::string& transport, const std::vector<char>& addr);
  /// Receives peer's address sent by sendConnectAddress; throws
  /// Error(Remote) "<mismatchBefore><its transport><mismatchAfter>" when it
  /// set up another transport.
  std::vector<char> recvConnectAddress(int peer, const std::string& transport, const std::string& mismatchBefore,
                                       const std::string& mismatchAfter);
  /// Makes a connected c the pair's connection for its transport and
  /// lets the proxy thread drive it. Caller holds mutex.
  void install(const std::shared_ptr<ConnectionImpl>& c);
  /// beginFailover() without the staged check (failover() builds the
  /// stager). seen: the connection the caller saw fail; where the pair has
  /// a healthy other one already, the result is done with it. Null: move.
  /// Where the next transport is connected already, the result joins it.
  std::unique_ptr<PendingFailover> startFailover(Communicator& comm, int peer, MemoryKind kind,
                                                 const ConnectionImpl* seen);
  /// Makes conn's error say that a failover to `next` gave it up (after
  /// its own error, if it had one): its holders (channels, other objects'
  /// links) learn from their next call that the pair moved.
  void markGivenUp(ConnectionImpl& conn, const std::string& next);
  /// A failover that is done at once: the pair's kind goes over conn,
  /// connected already (PendingFailover::step returns it).
  std::unique_ptr<PendingFailover> joinedFailover(Communicator& comm, const std::shared_ptr<ConnectionImpl>& conn,
                                                  const std::string& failedTransport);
  /// Moves the pairs to peers (every one failed, or its peer's side did)
  /// to their next transports, all at once: startFailover for each, the
  /// addresses exchanged, every connect driven together; a staged pair
  /// gets its stager. Both ends of every pair must call it. what names the
  /// call in errors ("recover()"). Returns the new connections by peer.
  std::map<int, std::shared_ptr<Connection>> movePairs(Communicator& comm, const std::vector<int>& peers,
                                                       MemoryKind kind, const std::string& what);
  /// Gives conn a stager, collectively with its peer (setup()).
  void startStager(const std::shared_ptr<ConnectionImpl>& conn);
  /// Sends a registration's descriptor under a raw bootstrap tag.
  void sendMemoryTagged(const RegisteredMemory& mem, int peer, int tag);
  /// Receives and imports a descriptor under a raw bootstrap tag.
  RemoteMemory recvMemoryTagged(int peer, int tag);
  /// Checks 0 <= peer < size and peer != rank.
  void checkPeer(int peer, const char* what) const;
  /// Closes connections and registrations; stops the proxy. Idempotent.
  void shutdown();
};

}  // namespace plugboard
