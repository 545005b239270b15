// Operations as UCP active messages (ucx.protocol=am, README "Protocols"):
// every write, signal and write_signal is one message whose header names
// the target region by id and check value, and whose data is the write's
// bytes. The target stores eager data at once, receives rendezvous data
// straight into place (ucp_am_recv_data_nbx), and applies a message's
// signal only when it and every earlier message of the connection have
// landed, which is transport.h's ordering: a signal is visible only after
// every earlier write. Everything here runs under the worker lock (UCP
// calls its callbacks only inside worker calls made under it).
#include <cstring>

#include "connection.hpp"
#include "error.hpp"

namespace plugboard::ucx {

namespace {

/// What a rendezvous receive's completion callback needs. The connection
/// is found again by token, so a receive that outlives it finds nobody.
struct RndvLanding {
  Context* ctx;
  uint32_t token;
  uint64_t seq;
};

void onRndvDone(void* request, ucs_status_t status, size_t, void* userData) {
  auto* landing = static_cast<RndvLanding*>(userData);
  landing->ctx->receiveEnded();
  if (Connection* conn = landing->ctx->amTarget(landing->token)) conn->rndvLanded(landing->seq, status);
  ucp_request_free(request);
  delete landing;
}

}  // namespace

// ---- sending ---------------------------------------------------------------------

void Connection::describeWrite(wire::AmHeader& h, const RemoteKey& dst, size_t dstOffset, size_t size) {
  PB_UCX_CHECK(dst.memType == PB_MEM_HOST, PB_ERR_UNSUPPORTED,
               "ucx.protocol=am writes only into host memory, and this key names GPU memory (set ucx.protocol=rma "
               "on every rank)");
  h.flags |= wire::AmHeader::kHasWrite;
  h.dataRegion = dst.regionId;
  h.dataCheck = dst.regionCheck;
  h.dataOffset = dstOffset;
  h.dataSize = size;
}

void Connection::describeSignal(wire::AmHeader& h, const RemoteKey& dst, size_t dstOffset, uint64_t value) {
  PB_UCX_CHECK(dst.memType == PB_MEM_HOST, PB_ERR_UNSUPPORTED,
               "ucx.protocol=am signals only counters in host memory, and this key names GPU memory (set "
               "ucx.protocol=rma on every rank)");
  h.flags |= wire::AmHeader::kHasSignal;
  h.signalRegion = dst.regionId;
  h.signalCheck = dst.regionCheck;
  h.signalOffset = dstOffset;
  h.value = value;
}

void Connection::sendAm(Op& op, wire::AmHeader& h, const LocalRegion* src, size_t srcOffset, size_t size) {
  h.connToken = peerToken_;
  h.seq = ++amSent_;
  h.fromRank = ctx_.rank();
  h.encode(op.amHeader);
  ucp_request_param_t params{};
  if (size) {
    params.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
    params.memh = src->memh;  // registered already: spares UCX a registration-cache lookup
  }
  if (size < eagerBelow_) {  // eager_rule.hpp: where UCX's rendezvous measured slower
    params.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    params.flags = UCP_AM_SEND_FLAG_EAGER;
  }
  const void* data = size ? src->base + srcOffset : nullptr;
  ucs_status_ptr_t req = ucp_am_send_nbx(ep_, wire::kAmId, op.amHeader, wire::AmHeader::kSize, data, size, &params);
  if (UCS_PTR_IS_ERR(req)) {
    fail(PB_ERR_REMOTE, ucsText("ucx message #" + std::to_string(op.seq) + " (" + std::to_string(size) +
                                    " bytes) to " + peer_.describe() + " failed",
                                UCS_PTR_STATUS(req)));
    throwIfFailed();
  }
  op.amReq = req;  // null: already complete
}

// ---- receiving -------------------------------------------------------------------

Connection* Context::amTarget(uint32_t token) const {
  auto it = amTargets_.find(token);
  return it == amTargets_.end() ? nullptr : it->second;
}

ucs_status_t Context::onAm(void* arg, const void* header, size_t headerLength, void* data, size_t length,
                           const ucp_am_recv_param_t* param) {
  auto* self = static_cast<Context*>(arg);
  const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  try {
    wire::AmHeader h;
    std::string why = wire::AmHeader::decode(header, headerLength, &h);
    if (!why.empty()) {
      self->log(PB_LOG_WARN, "rank " + std::to_string(self->rank()) + " dropped " + why + " (" +
                                 std::to_string(length) + " bytes of data)");
      return rndv ? UCS_ERR_INVALID_PARAM : UCS_OK;
    }
    Connection* conn = self->amTarget(h.connToken);
    if (!conn) {
      // A message still travelling when its connection was freed.
      self->log(PB_LOG_TRACE, "rank " + std::to_string(self->rank()) + " dropped ucx message #" +
                                  std::to_string(h.seq) + " from rank " + std::to_string(h.fromRank) +
                                  ": its connection (token " + std::to_string(h.connToken) + ") is closed");
      return rndv ? UCS_ERR_CANCELED : UCS_OK;
    }
    return conn->receiveAm(h, data, length, param);
  } catch (...) {
    return rndv ? UCS_ERR_NO_MEMORY : UCS_OK;  // wording an error ran out of memory; never throw into UCX
  }
}

char* Connection::regionBytes(uint64_t id, uint64_t check, uint64_t offset, uint64_t length,
                              std::string* problem) const {
  LocalRegion* region = ctx_.regions().find(id, check);
  if (!region) {
    *problem = "write of " + std::to_string(length) + " bytes to region " + std::to_string(id) +
               ", which is not registered here (deregistered, or a stale key)";
    return nullptr;
  }
  if (!rangeFits(offset, length, region->size) || region->type != PB_MEM_HOST) {
    *problem = "write of " + std::to_string(length) + " bytes at offset " + std::to_string(offset) +
               (region->type != PB_MEM_HOST ? " into GPU memory"
                                            : " overruns region " + std::to_string(id) + " of " +
                                                  std::to_string(region->size) + " bytes");
    return nullptr;
  }
  return region->base + offset;
}

char* Connection::writeTarget(const wire::AmHeader& h, size_t length) {
  // The message's name is built only for an error: this runs for every message.
  auto bad = [&] { return "bad ucx message #" + std::to_string(h.seq) + " from " + peer_.describe() + ": "; };
  if (!(h.flags & wire::AmHeader::kHasWrite)) {
    if (length) fail(PB_ERR_REMOTE, bad() + "it carries " + std::to_string(length) + " bytes but no write");
    return nullptr;
  }
  if (h.dataSize != length) {
    fail(PB_ERR_REMOTE, bad() + "its header says " + std::to_string(h.dataSize) + " bytes, it carries " +
                            std::to_string(length));
    return nullptr;
  }
  std::string problem;
  char* dst = regionBytes(h.dataRegion, h.dataCheck, h.dataOffset, length, &problem);
  if (!dst) fail(PB_ERR_REMOTE, bad() + problem);
  return dst;
}

uint64_t* Connection::signalTarget(uint64_t regionId, uint64_t check, uint64_t offset, const std::string& why) {
  LocalRegion* region = ctx_.regions().find(regionId, check);
  std::string problem;
  if (!region)
    problem = "region " + std::to_string(regionId) + " is not registered here (deregistered, or a stale key)";
  else if (!rangeFits(offset, sizeof(uint64_t), region->size))
    problem = "offset " + std::to_string(offset) + " + 8 overruns region " + std::to_string(regionId) + " of " +
              std::to_string(region->size) + " bytes";
  else if ((reinterpret_cast<uintptr_t>(region->base) + offset) % alignof(uint64_t) != 0)
    problem = "the counter at offset " + std::to_string(offset) + " is not 8-byte aligned";
  else if (region->type != PB_MEM_HOST)
    problem = "the counter is in GPU memory";
  if (problem.empty()) return reinterpret_cast<uint64_t*>(region->base + offset);
  fail(PB_ERR_REMOTE, "bad ucx " + why + " from " + peer_.describe() + ": signal: " + problem);
  return nullptr;
}

ucs_status_t Connection::receiveAm(const wire::AmHeader& h, void* data, size_t length,
                                   const ucp_am_recv_param_t* param) {
  const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  const ucs_status_t refuse = rndv ? UCS_ERR_INVALID_PARAM : UCS_OK;  // a refused rendezvous fails at the sender too
  if (failure_) return refuse;  // nothing more lands on a failed connection
  const std::string what = "message #" + std::to_string(h.seq);
  if (h.fromRank != peer_.rank) {
    fail(PB_ERR_REMOTE, "bad ucx " + what + ": it claims to be from rank " + std::to_string(h.fromRank) +
                            " but reached rank " + std::to_string(ctx_.rank()) + "'s connection to " + peer_.describe());
    return refuse;
  }
  if (h.seq <= landedThrough_ || arrivals_.count(h.seq)) {
    fail(PB_ERR_REMOTE, "bad ucx " + what + " from " + peer_.describe() + ": that number arrived before");
    return refuse;
  }
  const bool laneWrite = (h.flags & wire::AmHeader::kLaneWrite) != 0;
  char* dst = nullptr;
  if (laneWrite) {
    if (!acceptLaneWrite(h, length, what)) return refuse;
  } else {
    dst = writeTarget(h, length);
    if (failure_) return refuse;
  }
  const bool hasSignal = (h.flags & wire::AmHeader::kHasSignal) != 0;
  if (hasSignal && !signalTarget(h.signalRegion, h.signalCheck, h.signalOffset, what)) return refuse;

  Arrival& a = arrivals_[h.seq];
  a.hasSignal = hasSignal;
  a.signalRegion = h.signalRegion;
  a.signalCheck = h.signalCheck;
  a.signalOffset = h.signalOffset;
  a.value = h.value;
  a.laneWrite = laneWrite ? h.laneWrite : 0;
  a.lanes = laneWrite ? h.lanes : 0;
  if (!rndv) {
    if (length) std::memcpy(dst, data, length);
    markLanded(h.seq);
    return UCS_OK;
  }
  auto* landing = new RndvLanding{&ctx_, token_, h.seq};
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  params.cb.recv_am = &onRndvDone;
  params.user_data = landing;
  ucs_status_ptr_t req = ucp_am_recv_data_nbx(ctx_.worker(), data, dst, length, &params);
  if (req == nullptr) {  // done at once: no callback comes
    delete landing;
    markLanded(h.seq);
  } else if (!UCS_PTR_IS_ERR(req)) {
    ctx_.receiveStarted();  // onRndvDone ends it
  } else {
    delete landing;
    fail(PB_ERR_REMOTE, ucsText("ucx receive of " + what + " (" + std::to_string(length) + " bytes) from " +
                                    peer_.describe() + " failed",
                                UCS_PTR_STATUS(req)));
  }
  return UCS_OK;  // UCP owns the descriptor once ucp_am_recv_data_nbx was called
}

void Connection::rndvLanded(uint64_t seq, ucs_status_t status) {
  if (status != UCS_OK) {
    fail(PB_ERR_REMOTE, ucsText("ucx receive of message #" + std::to_string(seq) + " from " + peer_.describe() +
                                    " failed",
                                status));
    return;
  }
  markLanded(seq);
}

void Connection::markLanded(uint64_t seq) {
  arrivals_[seq].landed = true;
  applyLanded();
}

bool Connection::lanesLanded(const Arrival& a) const {
  for (uint32_t i = 0; i < a.lanes; ++i)
    if (laneLanding_[i].through < a.laneWrite) return false;
  return true;
}

void Connection::applyLanded() {
  while (!failure_ && !arrivals_.empty() && arrivals_.begin()->first == landedThrough_ + 1 &&
         arrivals_.begin()->second.landed && lanesLanded(arrivals_.begin()->second)) {
    const Arrival& a = arrivals_.begin()->second;
    if (a.hasSignal) {
      // Checked again: the region may have gone while earlier data landed.
      uint64_t* counter = signalTarget(a.signalRegion, a.signalCheck, a.signalOffset,
                                       "message #" + std::to_string(landedThrough_ + 1));
      if (!counter) return;
      // Release: every earlier message's data is in place; whoever
      // acquires the new value sees it.
      __atomic_fetch_add(counter, a.value, __ATOMIC_RELEASE);
    }
    ++landedThrough_;
    arrivals_.erase(arrivals_.begin());
  }
}

}  // namespace plugboard::ucx
