// Set-up, remote keys and close of a connection. Posting and completion
// are in progress.cpp.
#include "connection.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "error.hpp"
#include "wire.hpp"
#include "keep.hpp"
#include "worker.hpp"

namespace plugboard::ucx {

namespace {

using Clock = std::chrono::steady_clock;

/// How long free() waits for the close marker to land at the peer, and
/// then for UCX to close the endpoint. Bounded, so a dead or stalled peer
/// never hangs free().
constexpr std::chrono::milliseconds kCloseGrace{2000};

}  // namespace

Connection::Connection(Context& ctx, const PeerInfo& peer, void* addr, size_t* addrLen)
    : ctx_(ctx), peer_(peer), eagerBelow_(ctx.eagerBelow()) {
  PB_UCX_CHECK(addr && addrLen, PB_ERR_INVALID, "ucx setup: address buffer and length must not be NULL");
  std::lock_guard<std::mutex> lock(ctx.workerMutex());
  size_t room = *addrLen;
  *addrLen = ctx.addressSize();
  PB_UCX_CHECK(room >= ctx.addressSize(), PB_ERR_INVALID,
               "ucx setup with " + peer.describe() + ": address buffer of " + std::to_string(room) +
                   " bytes is smaller than the " + std::to_string(ctx.addressSize()) + " a ucx address needs");
  control_ = ctx.newControlSlot();
  if (ctx.activeMessages()) token_ = ctx.addAmTarget(this);
  wire::AddressBlob blob;
  blob.rank = ctx.rank();
  blob.connToken = token_;
  blob.controlAddr = reinterpret_cast<uintptr_t>(control_.word);
  blob.workerAddress = ctx.workerAddress();
  blob.controlRkey = *control_.rkey;
  for (int i = 0; i < ctx.laneCount(); ++i) blob.laneAddresses.push_back(ctx.lane(i).address());
  blob.encode(static_cast<uint8_t*>(addr));
  laneLanding_.resize(static_cast<size_t>(ctx.laneCount()));
  guard_ = ctx.newEndpointGuard(this);
  ctx_.connectionOpened();
}

Connection::~Connection() {
  close();
  ctx_.connectionClosed();
}

void Connection::onEndpointError(void* arg, ucp_ep_h, ucs_status_t status) {
  // Runs inside a worker call, under the worker lock.
  auto* self = static_cast<Connection*>(static_cast<EndpointGuard*>(arg)->owner);
  if (self && self->epStatus_ == UCS_OK) self->epStatus_ = status;
}

bool Connection::connect(const void* peerAddr, size_t peerAddrLen) {
  std::lock_guard<std::mutex> lock(ctx_.workerMutex());
  if (connected_) return true;
  throwIfFailed();
  const std::string who = "ucx connection to " + peer_.describe();
  if (!ep_) {
    wire::AddressBlob blob;
    std::string why = wire::AddressBlob::decode(static_cast<const uint8_t*>(peerAddr), peerAddrLen, &blob);
    PB_UCX_CHECK(why.empty(), PB_ERR_INVALID, who + ": bad address blob from rank " + std::to_string(peer_.rank) +
                                                  ": " + why);
    PB_UCX_CHECK(blob.rank == peer_.rank, PB_ERR_INVALID,
                 who + ": the address blob is from rank " + std::to_string(blob.rank) + ", expected rank " +
                     std::to_string(peer_.rank));
    // Token 0: the peer sends RMA and has no handler for our messages.
    PB_UCX_CHECK((blob.connToken != 0) == ctx_.activeMessages(), PB_ERR_INVALID,
                 who + ": " + peer_.describe() + " uses ucx.protocol " + (blob.connToken ? "am" : "rma") +
                     " and rank " + std::to_string(ctx_.rank()) + " uses " +
                     (ctx_.activeMessages() ? "am" : "rma") + "; set the same ucx.protocol on every rank");
    peerToken_ = blob.connToken;
    // PEER mode: a vanished peer becomes an error on this endpoint instead
    // of a process abort inside UCX.
    const ucp_ep_params_t params = peerEndpointParams(blob.workerAddress, &Connection::onEndpointError, guard_);
    ucs_status_t st = ucp_ep_create(ctx_.worker(), &params, &ep_);
    PB_UCX_CHECK(st == UCS_OK, PB_ERR_SYSTEM, ucsText(who + ": ucp_ep_create failed", st));
    // From here on a failure is final: a later call must not find the
    // endpoint and take the connection for made.
    ucp_rkey_h rkey = nullptr;
    st = ucp_ep_rkey_unpack(ep_, blob.controlRkey.data(), &rkey);
    if (st != UCS_OK) fail(PB_ERR_INVALID, ucsText(who + ": the peer's control key does not unpack", st));
    throwIfFailed();
    peerControl_ = std::make_shared<UcpRkey>(rkey);
    peerControlAddr_ = blob.controlAddr;
    if (ctx_.activeMessages()) {
      usableLanes_ = std::min(ctx_.laneCount(), static_cast<int>(blob.laneAddresses.size()));
      for (int i = 0; i < usableLanes_; ++i)
        ctx_.lane(i).addPeer(token_, blob.laneAddresses[static_cast<size_t>(i)], peer_.describe());
    }
    // UCX wires the endpoint up in the background; a flush completes once
    // every lane is connected, so it is the handshake.
    ucp_request_param_t none{};
    ucs_status_ptr_t req = ucp_ep_flush_nbx(ep_, &none);
    if (UCS_PTR_IS_ERR(req)) fail(PB_ERR_REMOTE, ucsText(who + ": the handshake flush failed", UCS_PTR_STATUS(req)));
    throwIfFailed();
    handshake_ = req;
  }
  ctx_.progressLocked();
  if (epStatus_ != UCS_OK) fail(PB_ERR_REMOTE, ucsText(who + " failed while connecting", epStatus_));
  throwIfFailed();
  if (handshake_) {
    ucs_status_t st = ucp_request_check_status(handshake_);
    if (st == UCS_INPROGRESS) return false;
    ucp_request_free(handshake_);
    handshake_ = nullptr;
    if (st != UCS_OK) fail(PB_ERR_REMOTE, ucsText(who + ": the handshake flush failed", st));
    throwIfFailed();
  }
  connected_ = true;
  ctx_.attach(this);
  ctx_.log(PB_LOG_INFO, "rank " + std::to_string(ctx_.rank()) + " connected to " + peer_.describe() +
                            " over UCX (" + ctx_.tlsSource() + "): " + describeLanes() + describeEager());
  return true;
}

std::string Connection::describeEager() const {
  if (!ctx_.activeMessages()) return "";
  std::string lanes;
  if (ctx_.laneCount() > 0)
    lanes = "; " + std::to_string(usableLanes_) + " ucx lane(s) for writes of at least " +
            std::to_string(ctx_.laneBytes()) + " bytes";
  if (eagerBelow_ == SIZE_MAX) return "; active messages all eager" + lanes;
  if (eagerBelow_ == 0) return "; active messages eager or rendezvous as UCX chooses" + lanes;
  return "; active messages eager below " + std::to_string(eagerBelow_) + " bytes, UCX's choice above" + lanes;
}

std::string Connection::describeLanes() const {
  char* text = nullptr;
  size_t size = 0;
  FILE* stream = open_memstream(&text, &size);
  if (!stream) return "(lanes unknown)";
  ucp_ep_print_info(ep_, stream);
  std::fclose(stream);
  std::istringstream in(std::string(text, size));
  std::free(text);
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.find("lane[") == std::string::npos) continue;
    // "#     lane[0]:  0:tcp/lo.0 md[0]     -> ..." -> "lane[0]: 0:tcp/lo.0 md[0] -> ..."
    std::istringstream words(line);
    std::string word, compact;
    while (words >> word)
      if (word != "#") compact += (compact.empty() ? "" : " ") + word;
    out += (out.empty() ? "" : "; ") + compact;
  }
  return out.empty() ? "(no lanes reported)" : out;
}

RemoteKey* Connection::importRkey(const void* buf, size_t len) {
  wire::PackedRkey packed;
  std::string why = wire::PackedRkey::decode(static_cast<const uint8_t*>(buf), len, &packed);
  PB_UCX_CHECK(why.empty(), PB_ERR_INVALID, "ucx import_rkey from " + peer_.describe() + ": " + why);
  std::lock_guard<std::mutex> lock(ctx_.workerMutex());
  PB_UCX_CHECK(ep_, PB_ERR_INVALID,
               "ucx import_rkey: the connection to " + peer_.describe() + " has no endpoint yet (call proxy_connect first)");
  auto key = std::make_unique<RemoteKey>();
  key->conn = this;
  key->base = packed.base;
  key->size = packed.size;
  key->regionId = packed.regionId;
  key->regionCheck = packed.regionCheck;
  key->memType = packed.memType;
  if (packed.size > 0) {  // a zero-byte region packs no UCX key (see RegionRegistry::add)
    ucp_rkey_h rkey = nullptr;
    ucs_status_t st = ucp_ep_rkey_unpack(ep_, packed.ucpRkey.data(), &rkey);
    PB_UCX_CHECK(st == UCS_OK, PB_ERR_INVALID,
                 ucsText("ucx import_rkey: a key from " + peer_.describe() + " does not unpack", st));
    key->rkey = std::make_shared<UcpRkey>(rkey);
  }
  RemoteKey* handle = key.get();
  keys_.emplace(handle, std::move(key));
  return handle;
}

void Connection::releaseRkey(RemoteKey* key) {
  std::lock_guard<std::mutex> lock(ctx_.workerMutex());
  auto it = keys_.find(key);
  PB_UCX_CHECK(it != keys_.end(), PB_ERR_INVALID,
               "ucx release_rkey: not a key imported on this connection (already released?)");
  keys_.erase(it);  // operations in flight keep their own reference to the UCX key
}

ucs_status_t Connection::waitAndFree(void* req, Clock::time_point deadline) {
  if (!req) return UCS_OK;
  if (UCS_PTR_IS_ERR(req)) return UCS_PTR_STATUS(req);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(ctx_.workerMutex());
      ctx_.progressLocked();
      ucs_status_t st = ucp_request_check_status(req);
      if (st != UCS_INPROGRESS || Clock::now() >= deadline) {
        ucp_request_free(req);  // an unfinished one is released by UCX when it completes
        return st;
      }
    }
    std::this_thread::yield();
  }
}

void Connection::sayGoodbye() {
  void* put = nullptr;
  void* flush = nullptr;
  {
    std::lock_guard<std::mutex> lock(ctx_.workerMutex());
    // Static: should the put outlive this connection (a close that timed
    // out), UCX still reads valid memory.
    static const uint64_t kMarker = wire::kCloseMarker;
    ucp_request_param_t none{};
    put = ucp_put_nbx(ep_, &kMarker, sizeof(kMarker), peerControlAddr_, peerControl_->get(), &none);
    if (UCS_PTR_IS_ERR(put)) return;
    flush = ucp_ep_flush_nbx(ep_, &none);
  }
  auto deadline = Clock::now() + kCloseGrace;
  ucs_status_t st = waitAndFree(flush, deadline);
  waitAndFree(put, Clock::now());  // done if the flush was; else the forced close below completes it
  if (st != UCS_OK)
    ctx_.log(PB_LOG_WARN, ucsText("could not tell " + peer_.describe() + " that rank " + std::to_string(ctx_.rank()) +
                                      " closes its ucx connection; it will see the close as a failure",
                                  st));
}

void Connection::closeEndpoint(bool graceful) {
  void* req = nullptr;
  {
    std::lock_guard<std::mutex> lock(ctx_.workerMutex());
    ucp_request_param_t params{};
    params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    // Graceful: UCX finishes (or fails) what is in flight on the endpoint
    // first. Forced with the peer there, UCX 1.13 crashed now and then in
    // its TCP progress (a rendezvous receive still using the endpoint's
    // lane); forced only when the peer is gone, where a flush cannot finish.
    // Either way the wait below is bounded and in-flight operations count
    // as abandoned (transport.h).
    params.flags = graceful ? 0 : UCP_EP_CLOSE_FLAG_FORCE;
    req = ucp_ep_close_nbx(ep_, &params);
    ep_ = nullptr;
  }
  bool closed = waitAndFree(req, Clock::now() + kCloseGrace) != UCS_INPROGRESS;
  std::lock_guard<std::mutex> lock(ctx_.workerMutex());
  // Released now if complete, else by UCX when it completes.
  bool requestsLeft = false;
  for (Op& op : ops_)
    for (void* r : {op.putReq, op.amoReq, op.amReq})
      if (r) {
        requestsLeft = requestsLeft || ucp_request_check_status(r) == UCS_INPROGRESS;
        ucp_request_free(r);
      }
  for (void* r : {flushReq_, handshake_})
    if (r) ucp_request_free(r);
  flushReq_ = handshake_ = nullptr;
  if (!closed) {
    // With its requests still on the endpoint, UCX asserts when the worker
    // is destroyed (seen after a silent link cut); a close that merely
    // waits for a quiet peer does not, and the worker can go.
    if (requestsLeft) ctx_.closeUnfinished();
    // UCX may still run requests that use these keys: never destroy them.
    ctx_.log(PB_LOG_WARN, "UCX did not finish closing the endpoint to " + peer_.describe() + " within " +
                              std::to_string(kCloseGrace.count()) + " ms; leaking its remote keys");
    for (Op& op : ops_) {
      if (op.putRkey) op.putRkey->leak();
      if (op.signalRkey) op.signalRkey->leak();
    }
    for (auto& [handle, key] : keys_)
      if (key->rkey) key->rkey->leak();
    if (peerControl_) peerControl_->leak();
    // Atomics in flight read their operand from the Op: keep the storage
    // (moving a deque keeps its elements where they are).
    keepUntilExit(std::move(ops_));
  }
  ops_.clear();
  pendingSignals_.clear();
  keys_.clear();  // the core never releases keys after free()
  peerControl_.reset();
}

void Connection::close() noexcept {
  try {
    bool haveEp = false, peerThere = false;
    {
      std::lock_guard<std::mutex> lock(ctx_.workerMutex());
      ctx_.detach(this);  // the progress thread must not pump what is being closed
      if (ep_) ctx_.progressLocked();  // learn of a peer that already closed or vanished
      haveEp = ep_ != nullptr;
      peerThere = haveEp && connected_ && !failure_ && epStatus_ == UCS_OK && !peerClosed();
    }
    if (peerThere) sayGoodbye();
    if (haveEp) closeEndpoint(peerThere);
    // Without the worker lock (Lane's lock order); nothing of ours is sent
    // after. Every lane closes its endpoint at once, each on its thread.
    std::vector<uint64_t> tickets;
    for (int i = 0; i < usableLanes_; ++i) tickets.push_back(ctx_.lane(i).requestForget(token_));
    for (int i = 0; i < usableLanes_; ++i) ctx_.lane(i).awaitForget(tickets[static_cast<size_t>(i)]);
  } catch (...) {
    // Nothing sensible to report from a destructor path.
  }
  try {
    std::lock_guard<std::mutex> lock(ctx_.workerMutex());
    keys_.clear();
    peerControl_.reset();
    guard_->owner = nullptr;  // a late error handler now finds nobody
    if (token_) ctx_.removeAmTarget(token_);  // late messages and receives now find nobody
    token_ = 0;
  } catch (...) {
  }
}

}  // namespace plugboard::ucx
