#include "lane.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "context.hpp"
#include "error.hpp"
#include "keep.hpp"
#include "worker.hpp"

namespace plugboard::ucx {

namespace {

/// A lane keeps polling this long after its last piece moved: the next
/// piece of a stream of large writes usually follows within it.
constexpr int64_t kHotNs = 200 * 1000;
/// An idle lane wakes at least this often (a missed wake-up costs
/// latency, never a hang).
constexpr int kIdleSleepMs = 100;
/// How long awaitForget() waits for the lane's thread, and the thread for UCX
/// to close an endpoint.
constexpr auto kForgetWait = std::chrono::seconds(2);
constexpr int64_t kCloseWaitNs = 1000 * 1000 * 1000;

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// What a rendezvous receive of a piece reports when it finishes.
struct PieceReceipt {
  Lane* lane;
  uint32_t conn;
  uint64_t piece;
};

}  // namespace

Lane::Lane(Context& ctx, int index, ucp_context_h ucp)
    : ctx_(ctx), index_(index), where_("ucx lane " + std::to_string(index) + " of rank " + std::to_string(ctx.rank())),
      ucp_(ucp) {
  try {
    worker_ = createWorker(ucp_, &address_, where_);  // mu_ serializes every call
    setAmHandler(worker_, wire::kLaneAmId, &Lane::onPiece, this, where_);

    int workerFd = -1;
    const ucs_status_t st = ucp_worker_get_efd(worker_, &workerFd);
    PB_UCX_CHECK(st == UCS_OK, PB_ERR_SYSTEM, ucsText(where_ + ": ucp_worker_get_efd failed", st));
    epollFd_ = epoll_create1(EPOLL_CLOEXEC);
    wakeFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    PB_UCX_CHECK(epollFd_ >= 0 && wakeFd_ >= 0, PB_ERR_SYSTEM,
                 where_ + ": cannot create its epoll/eventfd: " + std::strerror(errno));
    for (int fd : {workerFd, wakeFd_}) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = fd;
      PB_UCX_CHECK(epoll_ctl(epollFd_, EPOLL_CTL_ADD, fd, &ev) == 0, PB_ERR_SYSTEM,
                   where_ + ": epoll_ctl: " + std::strerror(errno));
    }
    thread_ = std::thread(&Lane::run, this);
  } catch (...) {
    teardown();
    throw;
  }
}

Lane::~Lane() { teardown(); }

void Lane::teardown() noexcept {
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    stop_ = true;
  }
  served_.notify_all();
  if (thread_.joinable()) {
    wake();
    thread_.join();
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint32_t> all;
  for (auto& [conn, peer] : peers_) all.push_back(conn);
  closePeers(all);
  if (worker_ && !drain(0, nowNs() + kCloseWaitNs)) {
    // UCX aborts the process when a worker dies with requests on its
    // endpoints: keep it (and the headers it reads) for the process's life.
    try {
      ctx_.log(PB_LOG_WARN, where_ + ": UCX did not finish " + std::to_string(inFlight_.size()) + " send(s) and " +
                                std::to_string(receiving_.size()) + " connection(s)' receives within 1 s; "
                                "leaking the lane's worker");
    } catch (...) {
    }
    keepUntilExit(std::move(inFlight_));
    keepUntilExit(std::move(closedPeers_));  // their error handlers' argument
    inFlight_.clear();
    closedPeers_.clear();
    worker_ = nullptr;
    ucp_ = nullptr;
  }
  for (InFlight& f : inFlight_) ucp_request_free(f.req);
  if (worker_) ucp_worker_destroy(worker_);
  worker_ = nullptr;
  inFlight_.clear();
  closedPeers_.clear();  // no handler runs without the worker
  if (ucp_) ucp_cleanup(ucp_);
  ucp_ = nullptr;
  for (int* fd : {&epollFd_, &wakeFd_})
    if (*fd >= 0) {
      ::close(*fd);
      *fd = -1;
    }
}

bool Lane::drain(uint32_t conn, int64_t deadlineNs) {
  auto pending = [&] {
    if (conn == 0) return !inFlight_.empty() || !receiving_.empty();
    if (receiving_.count(conn)) return true;
    return std::any_of(inFlight_.begin(), inFlight_.end(), [&](const InFlight& f) {
      return f.conn == conn && ucp_request_check_status(f.req) == UCS_INPROGRESS;
    });
  };
  while (pending()) {
    if (nowNs() >= deadlineNs) return false;
    ucp_worker_progress(worker_);
    if (conn != 0) continue;
    for (auto it = inFlight_.begin(); it != inFlight_.end();) {
      if (ucp_request_check_status(it->req) == UCS_INPROGRESS) {
        ++it;
        continue;
      }
      ucp_request_free(it->req);
      it = inFlight_.erase(it);
    }
  }
  return true;
}

// ---- what other threads hand over -------------------------------------------------

void Lane::addPeer(uint32_t conn, const std::vector<uint8_t>& peerAddress, const std::string& peerName) {
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    newPeers_.push_back(PeerRequest{conn, peerAddress, peerName});
  }
  wake();
}

void Lane::send(const LaneSend& piece) {
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    queue_.push_back(piece);
  }
  wake();
}

uint64_t Lane::requestForget(uint32_t conn) {
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    if (stop_) return 0;
    forgets_.push_back(conn);
    ticket = ++forgetsAsked_;
  }
  wake();
  return ticket;
}

void Lane::awaitForget(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(queueMu_);
  if (!served_.wait_for(lock, kForgetWait, [&] { return forgetsDone_ >= ticket || stop_; }))
    ctx_.log(PB_LOG_WARN, where_ + " did not close its endpoint of a freed connection within " +
                              std::to_string(kForgetWait.count()) + " s");
}

void Lane::wake() {
  uint64_t one = 1;
  ssize_t ignored = ::write(wakeFd_, &one, sizeof(one));
  (void)ignored;
}

// ---- the lane's thread --------------------------------------------------------------

void Lane::run() {
  std::vector<LaneEvent> events;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(queueMu_);
      if (stop_) return;
    }
    events.clear();
    const bool busy = turn(events);
    if (!events.empty()) {
      hotUntil_.store(nowNs() + kHotNs, std::memory_order_relaxed);
      ctx_.onLaneEvents(index_, events);  // takes the context's lock: never under mu_ here
    }
    if (busy || nowNs() < hotUntil_.load(std::memory_order_relaxed)) {
      std::this_thread::yield();
      continue;
    }
    sleep();
  }
}

bool Lane::turn(std::vector<LaneEvent>& events) {
  std::vector<PeerRequest> fresh;
  std::deque<LaneSend> sends;
  std::vector<uint32_t> gone;
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    fresh.swap(newPeers_);
    sends.swap(queue_);
    gone.swap(forgets_);
    ticket = forgetsAsked_;
  }
  bool busy = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!gone.empty()) {
      closePeers(gone);
      for (uint32_t conn : gone)
        for (auto it = sends.begin(); it != sends.end();) it = it->conn == conn ? sends.erase(it) : it + 1;
    }
    openPeers(fresh, events);
    for (const LaneSend& piece : sends) post(piece, events);
    for (int i = 0; i < 64 && ucp_worker_progress(worker_) != 0; ++i) {
    }
    collect(events);
    busy = !inFlight_.empty() || !receiving_.empty();
  }
  if (!gone.empty()) {
    {
      std::lock_guard<std::mutex> lock(queueMu_);
      forgetsDone_ = ticket;
    }
    served_.notify_all();
  }
  return busy;
}

void Lane::openPeers(std::vector<PeerRequest>& fresh, std::vector<LaneEvent>& events) {
  for (PeerRequest& request : fresh) {
    auto peer = std::make_unique<Peer>();
    peer->name = request.name;
    const ucp_ep_params_t params = peerEndpointParams(request.address, &Lane::onEndpointError, peer.get());
    ucs_status_t st = ucp_ep_create(worker_, &params, &peer->ep);
    if (st != UCS_OK) {
      events.push_back({LaneEvent::Kind::Failed, request.conn, 0, st,
                        ucsText(where_ + ": ucp_ep_create to " + request.name + "'s lane failed", st)});
      peer->ep = nullptr;
      peer->reported = true;
    }
    peers_[request.conn] = std::move(peer);
  }
}

void Lane::closePeers(const std::vector<uint32_t>& gone) {
  for (uint32_t conn : gone) {
    auto it = peers_.find(conn);
    if (it == peers_.end()) continue;
    std::unique_ptr<Peer> peer = std::move(it->second);
    peers_.erase(it);
    if (peer->ep) {
      // Graceful: UCX finishes what is in flight first. Forced with the
      // peer lane still there, UCX's TCP progress crashed now and then (as
      // on the endpoint, connection.cpp). Bounded: a dead peer cannot
      // acknowledge, and then the request is left to UCX.
      ucp_request_param_t params{};
      void* req = ucp_ep_close_nbx(peer->ep, &params);
      const int64_t deadline = nowNs() + kCloseWaitNs;
      while (req && !UCS_PTR_IS_ERR(req) && ucp_request_check_status(req) == UCS_INPROGRESS && nowNs() < deadline)
        ucp_worker_progress(worker_);
      if (req && !UCS_PTR_IS_ERR(req)) ucp_request_free(req);
      peer->ep = nullptr;
      // Rendezvous receives of its pieces write into the connection's
      // regions: let them finish before free() returns.
      drain(conn, deadline);
    }
    // UCX may still call its error handler: the Peer lives until the worker dies.
    closedPeers_.push_back(std::move(peer));
  }
}

void Lane::post(const LaneSend& piece, std::vector<LaneEvent>& events) {
  auto it = peers_.find(piece.conn);
  if (it == peers_.end() || !it->second->ep) {
    events.push_back({LaneEvent::Kind::Sent, piece.conn, piece.seq, UCS_ERR_NOT_CONNECTED,
                      where_ + " has no endpoint for this connection"});
    return;
  }
  // UCX reads the header until the send completes: it lives in inFlight_.
  inFlight_.push_back(InFlight{nullptr, piece.conn, piece.seq, {}});
  InFlight& f = inFlight_.back();
  std::memcpy(f.header, piece.header, sizeof(f.header));
  ucp_request_param_t params{};
  if (piece.eager) {
    params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    params.flags = UCP_AM_SEND_FLAG_EAGER;
  }
  ucs_status_ptr_t req = ucp_am_send_nbx(it->second->ep, wire::kLaneAmId, f.header, sizeof(f.header), piece.data,
                                         piece.size, &params);
  if (UCS_PTR_IS_PTR(req) && req != nullptr) {
    f.req = req;
    return;
  }
  const ucs_status_t st = UCS_PTR_STATUS(req);
  inFlight_.pop_back();
  events.push_back({LaneEvent::Kind::Sent, piece.conn, piece.seq, st,
                    st == UCS_OK ? "" : ucsText(where_ + ": sending a piece to " + it->second->name + " failed", st)});
}

void Lane::collect(std::vector<LaneEvent>& events) {
  for (auto it = inFlight_.begin(); it != inFlight_.end();) {
    const ucs_status_t st = ucp_request_check_status(it->req);
    if (st == UCS_INPROGRESS) {
      ++it;
      continue;
    }
    ucp_request_free(it->req);
    auto peer = peers_.find(it->conn);
    const std::string to = peer == peers_.end() ? "a closed connection" : peer->second->name;
    events.push_back({LaneEvent::Kind::Sent, it->conn, it->seq, st,
                      st == UCS_OK ? "" : ucsText(where_ + ": sending a piece to " + to + " failed", st)});
    it = inFlight_.erase(it);
  }
  for (auto& [conn, peer] : peers_)
    if (peer->status != UCS_OK && !peer->reported) {
      peer->reported = true;
      events.push_back({LaneEvent::Kind::Failed, conn, 0, peer->status,
                        ucsText(where_ + ": its endpoint to " + peer->name + "'s lane failed (peer process gone?)",
                                peer->status)});
    }
  for (LaneEvent& e : handlerEvents_) events.push_back(std::move(e));
  handlerEvents_.clear();
}

void Lane::sleep() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Busy: something arrived since the last progress; go round again.
    if (ucp_worker_arm(worker_) == UCS_ERR_BUSY) return;
  }
  epoll_event ready[2];
  epoll_wait(epollFd_, ready, 2, kIdleSleepMs);
  uint64_t drained = 0;
  ssize_t ignored = ::read(wakeFd_, &drained, sizeof(drained));
  (void)ignored;
}

// ---- UCX's callbacks (under mu_) ---------------------------------------------------

void Lane::onEndpointError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* peer = static_cast<Peer*>(arg);
  if (peer->status == UCS_OK) peer->status = status;
}

ucs_status_t Lane::onPiece(void* arg, const void* header, size_t headerLength, void* data, size_t length,
                           const ucp_am_recv_param_t* param) {
  auto* self = static_cast<Lane*>(arg);
  const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  const ucs_status_t refuse = rndv ? UCS_ERR_INVALID_PARAM : UCS_OK;  // a refused rendezvous fails the sender too
  try {
    wire::LanePiece p;
    std::string why = wire::LanePiece::decode(header, headerLength, &p);
    if (why.empty() && p.lane != static_cast<uint32_t>(self->index_))
      why = "a piece for lane " + std::to_string(p.lane) + " on lane " + std::to_string(self->index_);
    if (!why.empty()) {
      self->ctx_.log(PB_LOG_WARN, self->where_ + " dropped " + why + " (" + std::to_string(length) + " bytes)");
      return refuse;
    }
    char* dst = nullptr;
    switch (self->ctx_.checkLanePiece(p, length, &dst)) {
      case LanePieceVerdict::Closed:
        return rndv ? UCS_ERR_CANCELED : UCS_OK;
      case LanePieceVerdict::Refused:
        return refuse;
      case LanePieceVerdict::Accepted:
        break;
    }
    self->hotUntil_.store(nowNs() + kHotNs, std::memory_order_relaxed);
    if (!rndv) {
      if (length) std::memcpy(dst, data, length);
      self->handlerEvents_.push_back({LaneEvent::Kind::Landed, p.connToken, p.piece, UCS_OK, ""});
      return UCS_OK;
    }
    auto* receipt = new PieceReceipt{self, p.connToken, p.piece};
    ucp_request_param_t params{};
    params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    params.cb.recv_am = &Lane::onPieceReceived;
    params.user_data = receipt;
    ucs_status_ptr_t req = ucp_am_recv_data_nbx(self->worker_, data, dst, length, &params);
    if (UCS_PTR_IS_PTR(req) && req != nullptr) {
      ++self->receiving_[p.connToken];
      return UCS_OK;
    }
    delete receipt;
    const ucs_status_t st = UCS_PTR_STATUS(req);
    if (st == UCS_OK)
      self->handlerEvents_.push_back({LaneEvent::Kind::Landed, p.connToken, p.piece, UCS_OK, ""});
    else
      self->handlerEvents_.push_back({LaneEvent::Kind::Failed, p.connToken, p.piece, st,
                                      ucsText(self->where_ + ": receiving piece " + std::to_string(p.piece) +
                                                  " failed",
                                              st)});
    return UCS_OK;  // UCP owns the descriptor once ucp_am_recv_data_nbx was called
  } catch (...) {
    return rndv ? UCS_ERR_NO_MEMORY : UCS_OK;  // never throw into UCX
  }
}

void Lane::onPieceReceived(void* request, ucs_status_t status, size_t, void* userData) {
  auto* receipt = static_cast<PieceReceipt*>(userData);
  Lane* self = receipt->lane;
  auto it = self->receiving_.find(receipt->conn);
  if (it != self->receiving_.end() && --it->second == 0) self->receiving_.erase(it);
  try {
    if (status == UCS_OK)
      self->handlerEvents_.push_back({LaneEvent::Kind::Landed, receipt->conn, receipt->piece, UCS_OK, ""});
    else
      self->handlerEvents_.push_back({LaneEvent::Kind::Failed, receipt->conn, receipt->piece, status,
                                      ucsText(self->where_ + ": receiving piece " + std::to_string(receipt->piece) +
                                                  " failed",
                                              status)});
  } catch (...) {
  }
  ucp_request_free(request);
  delete receipt;
}

}  // namespace plugboard::ucx
