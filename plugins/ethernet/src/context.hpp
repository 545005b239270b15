// The plugin context: host services, settings, interface choice, the
// registry of local regions and the last error. One per loaded plugin per
// communicator; the core's pb_plugin_ctx*.
#pragma once

#include <plugboard/transport_cxx.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <cstdint>
#include <string>

#include "memory.hpp"
#include "stripe_rule.hpp"
#include "net/socket.hpp"

namespace plugboard::ethernet {

/// can_connect's cost for a reachable peer (lower is better): a fallback,
/// worse than in-host paths such as cudaipc (~10) or RDMA.
constexpr int kConnectCost = 100;
/// Most stripe sockets a connection may open (ethernet.stripe_sockets) or
/// a peer may announce.
constexpr uint32_t kMaxStripes = 16;

/// Resolved values of the plugin's settings (see Context::declareSettings).
struct Settings {
  std::string ifname;         ///< NCCL_SOCKET_IFNAME-style interface spec; "" = automatic.
  int socketBufferBytes = 0;  ///< SO_SNDBUF/SO_RCVBUF; 0 = system default.
  /// Largest frame a posting or polling thread sends itself; larger ones go
  /// to the connection's sender thread. SIZE_MAX: every frame.
  size_t callerSendBytes = SIZE_MAX;
  /// Extra sockets per connection that carry the pieces of large writes; 0:
  /// every byte on the one frame stream. Ignored while stripeSocketsAuto.
  uint32_t stripeSockets = 0;
  /// stripe_sockets = auto: stripesFor() (stripe_rule.hpp) decides per connection.
  bool stripeSocketsAuto = false;
  /// Smallest write cut into pieces over the stripe sockets.
  size_t stripeBytes = 128 * 1024;
  /// TCP_USER_TIMEOUT of every data socket: how long sent data may stay
  /// unacknowledged before the connection fails (a cut link or a dead
  /// host); 0 = the system's retransmission limit.
  std::chrono::milliseconds ackTimeout{30000};
};

/// The far end of a connection (the adapter's).
using PeerInfo = transport_cxx::PeerInfo;

/// Where this side listens for a given peer.
struct Route {
  std::string ifname;     ///< Interface name ("lo" for the same-host default).
  net::SockAddr address;  ///< Its address, port 0.
};

/// State shared by every connection and region of one plugin instance;
/// last_error's text lives in its ErrorSlot.
class Context : public transport_cxx::ErrorSlot {
 public:
  /// Checks the host table and declares the settings; throws Error.
  explicit Context(const pb_host_services_v1* host);
  /// Wakes the core's host-side waiters (host service signal_landed), if the core offers it.
  void notifyWaiters() const { host_.signalLanded(); }

  /// This process's rank.
  int rank() const { return host_.rank(); }
  /// This host's name as the core identifies it.
  const std::string& hostname() const { return host_.hostname(); }
  /// Reads the settings' current values from the core; throws Error.
  Settings settings() const;
  /// For plugboard-info (describe): the interfaces, which ones ifname
  /// selects, and where same-host and other-host peers are reached.
  std::string describe() const;
  /// The address to listen on for peer, or why the peer is unreachable.
  std::optional<Route> route(const PeerInfo& peer, const Settings& settings, std::string* why) const;
  /// Local registered regions.
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
  /// Declares ifname and socket_buffer_bytes through the host table.
  void declareSettings() const;

  transport_cxx::HostServices host_;
  RegionRegistry regions_;
  std::atomic<int> connections_{0};
};

}  // namespace plugboard::ethernet
