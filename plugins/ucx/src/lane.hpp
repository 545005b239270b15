// A lane: a second UCP context and worker with a thread of its own, which
// sends and receives pieces of large writes (README "Lanes"). UCX over TCP
// copies every byte through the socket in whichever thread progresses the
// worker, so one worker moves data at one core's speed; a write cut into
// one piece per lane runs on several cores at once, as the ethernet
// plugin's stripe sockets and the libfabric plugin's lanes do.
//
// Locking: mu_ guards every UCX call on the lane's worker and endpoints;
// queueMu_ guards what other threads hand over. Order: mu_, then the
// context's worker lock, then queueMu_. So the lane's UCX callbacks (run
// under mu_) may take the context's lock to reach a connection, and a
// connection (under the context's lock) may only queue work here: it never
// takes mu_, and awaitForget() must be called without the context's lock.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "wire.hpp"

namespace plugboard::ucx {

class Context;

/// One piece handed to a lane to send.
struct LaneSend {
  uint32_t conn = 0;     ///< The sending connection's own token (its completion goes back there).
  uint64_t seq = 0;      ///< The operation's sequence number on that connection.
  uint8_t header[wire::LanePiece::kSize] = {};  ///< The encoded wire::LanePiece.
  const char* data = nullptr;
  size_t size = 0;
  bool eager = false;    ///< Send with UCP_AM_SEND_FLAG_EAGER.
};

/// What a lane reports to its context's connections.
struct LaneEvent {
  enum class Kind {
    Sent,    ///< A piece of operation `number` was sent (status: how).
    Landed,  ///< Piece `number` of the lane landed in place.
    Failed   ///< The connection's lane broke (what says how).
  };
  Kind kind = Kind::Sent;
  uint32_t conn = 0;  ///< The local connection's token.
  uint64_t number = 0;
  ucs_status_t status = UCS_OK;
  std::string what;
};

/// What a context says of a piece arriving on a lane.
enum class LanePieceVerdict {
  Accepted,  ///< Store it at the address given.
  Closed,    ///< Its connection is gone: drop it quietly.
  Refused    ///< Bad: the connection was failed with the reason.
};

/// One lane. See the file comment.
class Lane {
 public:
  /// Creates the worker on ucp (which the lane owns from here), registers
  /// the piece handler and starts the thread. Throws Error naming the lane.
  Lane(Context& ctx, int index, ucp_context_h ucp);
  /// Stops the thread, closes every endpoint and destroys worker and context.
  ~Lane();
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  /// The lane's index (the same lane on both ends of a connection).
  int index() const { return index_; }
  /// The lane worker's address (for the address blob).
  const std::vector<uint8_t>& address() const { return address_; }
  /// Connection conn sends its pieces for this lane to the peer lane at
  /// peerAddress (queued; the endpoint is made on the lane's thread).
  void addPeer(uint32_t conn, const std::vector<uint8_t>& peerAddress, const std::string& peerName);
  /// Queues a piece; the lane's thread posts it.
  void send(const LaneSend& piece);
  /// Asks the lane's thread to drop conn's queued pieces and close its
  /// endpoint; returns the ticket awaitForget() waits for.
  uint64_t requestForget(uint32_t conn);
  /// Waits (bounded) until the lane's thread served ticket, so nothing of
  /// that connection is read after it returns. Call without the context's lock.
  void awaitForget(uint64_t ticket);

 private:
  /// An endpoint to a peer's lane and its error (set by UCX's handler).
  struct Peer {
    ucp_ep_h ep = nullptr;
    std::string name;                  ///< "rank 1 (host b)", for errors.
    ucs_status_t status = UCS_OK;      ///< First endpoint error.
    bool reported = false;             ///< The error was reported.
  };
  /// A peer lane added by addPeer, not yet given an endpoint.
  struct PeerRequest {
    uint32_t conn;
    std::vector<uint8_t> address;
    std::string name;
  };
  /// A piece UCX has not finished sending.
  struct InFlight {
    void* req;
    uint32_t conn;
    uint64_t seq;
    uint8_t header[wire::LanePiece::kSize];  ///< UCX reads it until the send completes.
  };

  /// The thread: takes queued work, posts, progresses, reports, sleeps when idle.
  void run();
  /// One turn under mu_: applies queued work, posts, progresses, collects events.
  /// Returns true while the lane has work in flight.
  bool turn(std::vector<LaneEvent>& events);
  /// Creates an endpoint for each newly added peer (mu_ held).
  void openPeers(std::vector<PeerRequest>& fresh, std::vector<LaneEvent>& events);
  /// Closes the endpoints of forgotten connections (mu_ held).
  void closePeers(const std::vector<uint32_t>& gone);
  /// Posts one piece (mu_ held).
  void post(const LaneSend& piece, std::vector<LaneEvent>& events);
  /// Moves finished sends and endpoint errors into events (mu_ held).
  void collect(std::vector<LaneEvent>& events);
  /// Sleeps on the worker's event fd and the wake-up fd (bounded).
  void sleep();
  /// Wakes the thread.
  void wake();
  /// UCP's handler for a piece (arg: the Lane), run inside progress under mu_.
  static ucs_status_t onPiece(void* arg, const void* header, size_t headerLength, void* data, size_t length,
                              const ucp_am_recv_param_t* param);
  /// A rendezvous receive of a piece finished.
  static void onPieceReceived(void* request, ucs_status_t status, size_t length, void* userData);
  /// UCX's endpoint error handler (arg: the Peer).
  static void onEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);
  /// Progresses until nothing of conn (any connection: 0) is in flight
  /// or deadlineNs passes; true when nothing is (mu_ held).
  bool drain(uint32_t conn, int64_t deadlineNs);
  /// Destroys everything UCX gave the lane; safe on a half-built lane.
  void teardown() noexcept;

  Context& ctx_;
  const int index_;
  const std::string where_;  // "ucx lane 2 of rank 0"
  ucp_context_h ucp_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<uint8_t> address_;
  int epollFd_ = -1;
  int wakeFd_ = -1;

  std::mutex mu_;
  std::unordered_map<uint32_t, std::unique_ptr<Peer>> peers_;  // by connection token (mu_)
  std::vector<std::unique_ptr<Peer>> closedPeers_;             // kept for late error handlers (mu_)
  std::list<InFlight> inFlight_;                               // stable addresses (mu_)
  std::vector<LaneEvent> handlerEvents_;  // events UCX's callbacks produced during a turn (mu_)
  std::unordered_map<uint32_t, int> receiving_;  // rendezvous receives in flight, per connection (mu_)

  std::mutex queueMu_;
  std::condition_variable served_;
  std::vector<PeerRequest> newPeers_;
  std::deque<LaneSend> queue_;
  std::vector<uint32_t> forgets_;
  uint64_t forgetsAsked_ = 0, forgetsDone_ = 0;
  bool stop_ = false;

  std::atomic<int64_t> hotUntil_{0};  // steady-clock ns: poll without sleeping until then
  std::thread thread_;
};

}  // namespace plugboard::ucx
