// The plugin context: host services, settings, the UCP context and its one
// worker, the lock every UCX call runs under, control words for clean
// close, the registry of local regions and the last error. One per loaded
// plugin per communicator; the core's pb_plugin_ctx*.
#pragma once

#include <plugboard/transport_cxx.hpp>
#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "lane.hpp"
#include "memory.hpp"

namespace plugboard::ucx {

class Connection;

/// can_connect's cost for a reachable peer (lower is better) when UCX has
/// an RDMA or GPU transport: below the ethernet plugin's 100, above in-host
/// paths such as cudaipc (~10).
constexpr int kConnectCost = 90;
/// The cost when UCX's only way between processes is TCP: then it is a
/// slower TCP than the ethernet plugin, which `transports: auto` should
/// prefer (README "Reachability and cost").
constexpr int kTcpOnlyConnectCost = 110;

/// How a signal is kept behind the writes posted before it (README:
/// "Ordering").
enum class Ordering {
  Flush,  ///< Post the atomic once an ep flush covering those writes completed.
  Fence   ///< ucp_worker_fence() between the writes and the atomic.
};

/// How operations travel (README: "Protocols").
enum class Protocol {
  ActiveMessage,  ///< One UCP active message per operation; the target stores and adds.
  Rma             ///< ucp_put_nbx + ucp_atomic_op_nbx, ordered by `ordering`.
};

/// Resolved values of the plugin's settings (see Context::declareSettings).
struct Settings {
  std::string tls;                    ///< UCX_TLS to use when the environment sets none; "" = UCX's default.
  std::string protocolText = "auto";  ///< The protocol setting as given.
  std::string amEager = "auto";       ///< The am_eager setting: "auto", "1", "0" or a byte count.
  Protocol protocol = Protocol::ActiveMessage;  ///< Resolved after ucp_init (auto depends on CUDA support).
  Ordering ordering = Ordering::Flush;
  bool progressThread = true;         ///< Run Context::progressLoop (README "Progress").
  std::string lanesText = "auto";     ///< The lanes setting as given.
  size_t laneBytes = size_t(256) << 10; ///< Writes of at least this many bytes go over lanes (README "Lanes").
  bool tcpSegments = true;            ///< tcp_segments=auto: larger UCX TCP segments unless the environment sets them.
};

/// The far end of a connection (the adapter's).
using PeerInfo = transport_cxx::PeerInfo;

/// A registered 8-byte word a peer writes wire::kCloseMarker into when it
/// closes its end of one connection cleanly. Never reused or unmapped
/// before the context dies, so a late marker can never land in memory
/// that has been given to something else.
struct ControlSlot {
  uint64_t* word = nullptr;                   ///< The word, initially 0.
  const std::vector<uint8_t>* rkey = nullptr; ///< Packed UCP rkey covering it.
};

/// The argument of an endpoint's error handler. Owned by the context and
/// kept until the worker is destroyed, so a handler UCX runs after its
/// connection is gone finds owner == nullptr instead of freed memory.
struct EndpointGuard {
  void* owner = nullptr;  ///< The Connection, or null once it was freed.
};

/// State shared by every connection and region of one plugin instance.
///
/// Locking: one mutex (workerMutex()) guards every UCX call on the
/// context, its worker, endpoints, requests and rkeys, and all mutable
/// state of every Connection. UCX runs callbacks only inside calls made
/// under it, so a callback for one connection may safely update that
/// connection while another thread drives a different one, and the
/// progress thread may pump any connection.
class Context : public transport_cxx::ErrorSlot {
 public:
  /// Checks the host table, declares and reads the settings, creates the
  /// UCP context and worker; throws Error.
  explicit Context(const pb_host_services_v1* host);
  /// Unmaps control words and leftover regions, destroys worker and context.
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  /// This process's rank.
  int rank() const { return host_.rank(); }
  /// This host's name as the core identifies it.
  const std::string& hostname() const { return host_.hostname(); }
  /// Settings read at init.
  const Settings& settings() const { return settings_; }
  /// The transports UCX was asked for ("" = its default) and from where,
  /// e.g. "UCX_TLS=tcp (environment)".
  const std::string& tlsSource() const { return tlsSource_; }
  /// Empty if peer is reachable, else why not (e.g. shared-memory-only
  /// UCX_TLS and a peer on another host).
  std::string unreachableReason(const PeerInfo& peer) const;
  /// can_connect's cost for a reachable peer.
  int connectCost() const { return networkOnlyTcp_ ? kTcpOnlyConnectCost : kConnectCost; }
  /// True when every transport of UCX's resources registers host memory
  /// without pinning it (tcp and the shared-memory ones but knem, xpmem):
  /// what PB_CAP_CHEAP_REGISTRATION promises.
  bool registersCheaply() const { return registersCheaply_; }
  /// "self, tcp, posix": the transports of UCX's resources, for messages.
  const std::string& resources() const { return resources_; }
  /// For plugboard-info (describe): UCX's version, transports, resources,
  /// protocol, progress and memory types (what set-up logs at INFO).
  const std::string& describe() const { return summary_; }
  /// True when operations travel as active messages (Protocol::ActiveMessage).
  bool activeMessages() const { return settings_.protocol == Protocol::ActiveMessage; }
  /// Active messages shorter than this many bytes are sent eagerly
  /// (ucx.am_eager; eager_rule.hpp).
  size_t eagerBelow() const;

  /// A token naming conn in the active messages peers send it; caller
  /// holds workerMutex().
  uint32_t addAmTarget(Connection* conn);
  /// The connection token names, or NULL (freed); caller holds workerMutex().
  Connection* amTarget(uint32_t token) const;
  /// Forgets token: messages still arriving for it are dropped. Caller
  /// holds workerMutex().
  void removeAmTarget(uint32_t token);
  /// Lanes this context opened (README "Lanes").
  int laneCount() const { return static_cast<int>(lanes_.size()); }
  /// Lane i (< laneCount()).
  Lane& lane(int i) { return *lanes_[static_cast<size_t>(i)]; }
  /// Writes of at least this many bytes go as one piece per lane.
  size_t laneBytes() const { return settings_.laneBytes; }
  /// A piece arrived on a lane (Lane's handler, under its lock): finds its
  /// connection and checks it there; on Accepted *dst is where it goes.
  LanePieceVerdict checkLanePiece(const wire::LanePiece& piece, size_t length, char** dst);
  /// Hands a lane's events to their connections (takes the worker lock),
  /// then tells the core something may have landed.
  void onLaneEvents(int lane, std::vector<LaneEvent>& events);
  /// Notes that a caller is polling (proxy_progress), so the progress
  /// thread keeps out of its way (README "Progress").
  void notePolled();

  /// The lock described in the class comment.
  std::mutex& workerMutex() const { return workerMu_; }
  /// The UCP context.
  ucp_context_h ucp() const { return ucp_; }
  /// The worker every connection of this context uses.
  ucp_worker_h worker() const { return worker_; }
  /// Our worker's address as ucp_worker_get_address gave it.
  const std::vector<uint8_t>& workerAddress() const { return workerAddress_; }
  /// Progresses the worker until it reports no more events (bounded).
  /// Caller holds workerMutex(). Returns the number of events.
  unsigned progressLocked();
  /// Tells the core something may have landed (host signal_landed).
  void notifyLanded() const;
  /// A rendezvous receive was started / finished; caller holds workerMutex().
  void receiveStarted() { ++pendingReceives_; }
  /// See receiveStarted().
  void receiveEnded() { --pendingReceives_; }
  /// An endpoint close did not finish in its bounded wait with operations
  /// of ours still in flight on it (a link cut silently): UCX still holds
  /// their requests, so the worker must never be destroyed (UCX asserts on
  /// an endpoint with requests). Caller holds workerMutex().
  void closeUnfinished() { ++unfinishedCloses_; }
  /// Lets the progress thread pump conn (connected); caller holds workerMutex().
  void attach(Connection* conn);
  /// Stops pumping conn; caller holds workerMutex().
  void detach(Connection* conn);

  /// True when UCX can register CUDA memory (ucp_context_query).
  bool supportsCuda() const;
  /// "host, cuda": the memory types UCX reports, for messages.
  std::string memoryTypesText() const;
  /// Upper bound on setup()'s address blob.
  size_t maxAddressSize() const;
  /// Upper bound on pack_rkey()'s blob.
  size_t maxRkeySize() const;
  /// Size of setup()'s blob (fixed for this context).
  size_t addressSize() const;

  /// A fresh control word; caller holds workerMutex(). Throws Error.
  ControlSlot newControlSlot();
  /// A fresh endpoint guard pointing at owner; caller holds workerMutex().
  EndpointGuard* newEndpointGuard(void* owner);
  /// Local registered regions; callers hold workerMutex().
  RegionRegistry& regions() { return regions_; }

  /// Logs one line through the core.
  void log(pb_log_level level, const std::string& message) const { host_.log(level, message); }

  /// Counts live connections, so finalize can refuse while any remain.
  void connectionOpened() { ++connections_; }
  /// See connectionOpened().
  void connectionClosed() { --connections_; }
  /// Live connections.
  int connections() const { return connections_.load(); }

 private:
  /// Registered memory holding control words.
  struct ControlChunk {
    std::unique_ptr<uint64_t[]> words;
    ucp_mem_h memh = nullptr;
    std::vector<uint8_t> rkey;
    size_t used = 0;
  };

  /// Declares tls and ordering through the host table.
  void declareSettings() const;
  /// Reads and checks every setting; throws Error(PB_ERR_INVALID).
  Settings readSettings() const;
  /// ucp_init with the tls setting applied unless UCX_TLS is set.
  void initUcp();
  /// Asks UCX for protocols v1 unless UCX_PROTO_ENABLE is set (v2 in UCX 1.16 has no intra-node atomic post).
  void useProtocolV1(ucp_config_t* config, bool logChoice) const;
  /// With tcp_segments=auto: UCX's TCP segment sizes kAutoTcpSegments
  /// names, each unless the environment sets it.
  void useTcpSegments(ucp_config_t* config, bool logChoice) const;
  /// A UCP context with features, configured as initUcp decided (transports,
  /// protocols v1); what names it in errors. Throws Error.
  ucp_context_h newUcpContext(uint64_t features, const std::string& what, bool logChoice) const;
  /// Opens the lanes the lanes setting asks for (README "Lanes"). Throws Error.
  void openLanes();
  /// Creates the worker and records its address.
  void initWorker();
  /// Lists UCX's resources (ucp_context_print_info) into resources_ and
  /// networkOnlyTcp_.
  void surveyResources();
  /// Maps one more chunk of control words.
  void addControlChunk();
  /// Starts progressLoop on its own thread (settings().progressThread).
  void startProgressThread();
  /// Stops and joins it; never throws.
  void stopProgressThread() noexcept;
  /// The progress thread (progress.cpp): sleeps on the worker's event fd,
  /// progresses the worker when it fires (landing peers' puts and
  /// atomics), pumps every attached connection (posting signals whose
  /// flush completed) and tells the core.
  void progressLoop();
  /// Releases everything UCX gave us; safe on a half-built context.
  void teardown() noexcept;
  /// Progresses (bounded) until no rendezvous receive is pending; true when
  /// none is. Caller holds workerMu_.
  bool drainReceivesLocked() noexcept;
  /// Keeps the worker, the UCP context and what they may still use for the
  /// process's life (UCX aborts when a worker dies with receives pending or
  /// an endpoint still closing); count and what: for the warning ("2
  /// endpoint close(s) ..."). Caller holds workerMu_.
  void keepForeverLocked(int count, const char* what) noexcept;
  /// Resolves settings_.protocol ("auto": active messages unless UCX can
  /// register CUDA memory) and, for active messages, registers onAm.
  void initProtocol();
  /// UCP's active-message callback (arg: the Context): hands the message
  /// to the connection its token names (am.cpp).
  static ucs_status_t onAm(void* arg, const void* header, size_t headerLength, void* data, size_t length,
                           const ucp_am_recv_param_t* param);
  /// True while a polling caller called proxy_progress within kPollerGrace.
  bool callerPolling() const;

  transport_cxx::HostServices host_;
  Settings settings_;
  std::string tlsSource_;
  std::string effectiveTls_;
  bool registersCheaply_ = false;  ///< surveyResources()
  std::string resources_;         // see resources()
  std::string summary_;           // see describe()
  bool networkOnlyTcp_ = false;   // no UCX resource but TCP and host-local ones
  uint64_t memoryTypes_ = 0;

  mutable std::mutex workerMu_;
  ucp_context_h ucp_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<uint8_t> workerAddress_;
  std::vector<std::unique_ptr<ControlChunk>> controlChunks_;
  std::vector<std::unique_ptr<EndpointGuard>> guards_;
  std::vector<Connection*> attached_;  // connected, not closing
  std::unordered_map<uint32_t, Connection*> amTargets_;  // by token; see addAmTarget
  uint32_t nextToken_ = 1;
  std::atomic<int64_t> lastPollNs_{0};  // steady-clock ns of the last proxy_progress
  RegionRegistry regions_;

  std::vector<std::unique_ptr<Lane>> lanes_;  // fixed after the constructor
  int pendingReceives_ = 0;                   // rendezvous receives in flight (workerMu_)
  int unfinishedCloses_ = 0;                  // endpoint closes left to UCX (workerMu_)

  std::thread progressThread_;
  int epollFd_ = -1;  // worker event fd + stopFd_
  int stopFd_ = -1;   // eventfd: wakes the progress thread to exit
  std::atomic<bool> stopping_{false};

  std::atomic<int> connections_{0};
};

}  // namespace plugboard::ucx
