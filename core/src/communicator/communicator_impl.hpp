// Private state behind Communicator, Connection, RegisteredMemory and
// RemoteMemory. Ownership: the communicator owns the plugins; connections
// and registrations refer to them and are closed by the communicator before
// the plugins are finalised, even if a user still holds a handle.
#pragma once

#include <atomic>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "communicator/local_setup.hpp"
#include "plugboard/communicator.hpp"
#include "plugins/transport_plugin.hpp"
#include "selection/selector.hpp"

namespace plugboard {

class ProxyService;

/// Bootstrap tags used by the core. User tags of sendMemory are offset past them.
enum CoreTag : int {
  kTagConnect = 1,
  kTagSemaphore = 2,
  kTagGpuCollectives = 3,  // GpuCollectives scratch descriptors
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
  bool closed = false;                 // guarded by mutex
  std::vector<std::weak_ptr<RemoteMemoryImpl>> imports;  // guarded by mutex

  /// "rank 0 -> rank 3 (host b) over ethernet", for messages.
  std::string describe() const;
  /// Calls proxy_progress once; records an error instead of throwing.
  void progress();
  /// Rethrows the recorded error, if any.
  void throwIfFailed();
  /// Throws Error(InvalidUsage) if the communicator closed this connection.
  void requireOpen() const;
  /// Records e as this connection's error (first one wins).
  void fail(std::exception_ptr e);
  /// Releases imported keys and frees the plugin connection. Idempotent.
  void close();
  ~ConnectionImpl() { close(); }
};

/// One registration of local memory with each transport that accepts it.
struct RegisteredMemoryImpl {
  void* data = nullptr;
  size_t size = 0;
  MemoryKind kind = MemoryKind::Host;
  int rank = -1;
  std::mutex mutex;
  std::vector<std::pair<TransportPlugin*, pb_mr*>> regs;  // guarded by mutex
  /// The region's handle for a transport, or null.
  pb_mr* handleFor(const TransportPlugin* plugin);
  /// Deregisters from every transport. Idempotent.
  void release();
  ~RegisteredMemoryImpl() { release(); }
};

/// A peer region imported on one connection.
struct RemoteMemoryImpl {
  std::shared_ptr<ConnectionImpl> connection;
  pb_rkey* rkey = nullptr;  // released by ConnectionImpl::close or the destructor
  size_t size = 0;
  int rank = -1;
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
  std::map<ConnKey, std::promise<std::shared_ptr<Connection>>> pendingPromises;
  std::map<ConnKey, std::shared_future<std::shared_ptr<Connection>>> pendingFutures;
  std::vector<std::weak_ptr<RegisteredMemoryImpl>> memories;
  std::unique_ptr<ProxyService> proxy;

  /// Round 1: identities, versions, settings; throws on every rank alike.
  void exchangeIdentity(const std::string& localError, ErrorCode localCode);
  /// Round 2: reachability, then the per-pair selection.
  void exchangeReach();
  /// The loaded plugin named name; throws Error(Internal) if absent.
  TransportPlugin& plugin(const std::string& name) const;
  /// The choice for the pair (rank, peer) and memory kind; throws the
  /// selection's error when no transport serves that kind.
  const PairChoice& choiceFor(int peer, MemoryKind kind) const;
  /// Selects transports for each memory kind (after exchangeReach's data).
  void selectAllKinds();
  /// The open connection carrying `kind` memory to peer, or null.
  std::shared_ptr<ConnectionImpl> findConnection(int peer, MemoryKind kind) const;
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
