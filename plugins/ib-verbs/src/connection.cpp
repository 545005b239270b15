#include "connection.hpp"

#include <algorithm>
#include <random>

#include "striping.hpp"

namespace plugboard::ibverbs {
namespace {

uint32_t randomPsn() {
  static thread_local std::mt19937 random{std::random_device{}()};
  return random() & 0xffffff;
}

}  // namespace

Connection::Connection(Context& ctx, const PeerInfo& peer, void* addr, size_t* addrLen) : ctx_(ctx), peer_(peer) {
  const IbSettings& s = ctx.settings();
  inlineLimit_ = s.inlineBytes;
  const size_t nqps = static_cast<size_t>(s.qpsPerConnection);
  const std::string to = "ib-verbs: " + ctx.where() + ": connection to " + peer_.describe() + ": ";
  const QpStep init = initStep(localPort());
  for (size_t i = 0; i < nqps; ++i) {
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = ctx.cq().handle();
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = kSendDepth;
    a.cap.max_recv_wr = 1;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    a.cap.max_inline_data = s.inlineBytes;
    qps_.emplace_back(ibv_create_qp(ctx.pd(), &a));
    if (!qps_.back())
      verbsNullFailure(to + "ibv_create_qp (RC, " + std::to_string(kSendDepth) + " send requests, " +
                           std::to_string(s.inlineBytes) + " inline bytes: lower ib-verbs.inline_bytes if the device "
                           "allows less)",
                       PB_ERR_SYSTEM);
    inlineLimit_ = std::min<uint32_t>(inlineLimit_, a.cap.max_inline_data);  // what the device granted
    QpStep step = init;
    verbsCheck(ibv_modify_qp(qps_.back().get(), &step.attr, step.mask), to + "queue pair RESET -> INIT", PB_ERR_SYSTEM);
    psns_.push_back(randomPsn());
  }
  backlog_ = std::make_unique<PostQueues<Request>>(nqps, kSendDepth);
  flushes_ = GpuFlushTracker(nqps);
  fetched_.reset(new uint64_t[2]());
  fetchedMr_.reset(ibv_reg_mr(ctx.pd(), fetched_.get(), 2 * sizeof(uint64_t), IBV_ACCESS_LOCAL_WRITE));
  if (!fetchedMr_) verbsNullFailure(to + "ibv_reg_mr of the atomics' and flush reads' result words", PB_ERR_SYSTEM);

  wire::AddressBlob blob;
  blob.rank = ctx.host().rank();
  blob.lid = ctx.port().lid;
  blob.mtu = static_cast<uint8_t>(ctx.port().activeMtu);
  blob.linkLayer = static_cast<uint8_t>(ctx.port().linkLayer);
  blob.gid = ctx.port().gid.gid;
  blob.responderDepth = ctx.port().responderDepth;
  for (size_t i = 0; i < nqps; ++i) blob.qps.push_back({qps_[i]->qp_num, psns_[i]});
  const size_t room = *addrLen;
  *addrLen = blob.size();
  IBV_CHECK(room >= blob.size(), PB_ERR_INVALID,
            "ib-verbs setup: the address buffer has " + std::to_string(room) + " bytes, the address needs " +
                std::to_string(blob.size()));
  blob.encode(static_cast<uint8_t*>(addr));
  std::vector<uint32_t> qpNums;
  for (const auto& qp : qps_) qpNums.push_back(qp->qp_num);
  cqId_ = ctx.cq().attach(qpNums, static_cast<uint32_t>(nqps * kSendDepth));  // last: nothing after it throws
  ++ctx_.connections();
}

Connection::~Connection() {
  // Queue pairs first (nothing in flight touches a buffer after this), then
  // their place in the shared completion queue and the atomics' word; only
  // then may finalize free the protection domain.
  qps_.clear();
  ctx_.cq().detach(cqId_);
  fetchedMr_.reset();
  --ctx_.connections();
}

LocalPort Connection::localPort() const {
  LocalPort p;
  p.port = ctx_.port().port;
  p.activeMtu = ctx_.port().activeMtu;
  p.linkLayer = ctx_.port().linkLayer;
  p.gid = ctx_.port().gid;
  p.initiatorDepth = ctx_.port().initiatorDepth;
  p.responderDepth = ctx_.port().responderDepth;
  return p;
}

bool Connection::connect(const void* peerAddr, size_t len) {
  std::lock_guard<std::mutex> lock(mutex_);
  throwIfFailed();
  if (connected_) return true;
  try {
    applyPeerAddress(peerAddr, len);
  } catch (const Error& e) {
    fail(e.status(), e.what());  // a half-moved queue pair cannot be retried: every later call says why
  }
  connected_ = true;
  ctx_.log(PB_LOG_INFO, "ib-verbs connected to " + peer_.describe() + " over " + ctx_.port().name() + " with " +
                            std::to_string(qps_.size()) + " queue pair(s)");
  return true;
}

// Both ends reach RTS here without waiting for each other. A write that
// reached the peer's queue pair before its RTR would wait out the ack
// timeout, but none can: the core exchanges the regions' keys through the
// bootstrap after every proxy_connect returned, and posts nothing before.
void Connection::applyPeerAddress(const void* peerAddr, size_t len) {
  const std::string from = peer_.describe();
  const auto blob = wire::AddressBlob::decode(static_cast<const uint8_t*>(peerAddr), len, from);
  IBV_CHECK(blob.rank == peer_.rank, PB_ERR_INVALID,
            "ib-verbs: the address from " + from + " says it is rank " + std::to_string(blob.rank));
  IBV_CHECK(blob.qps.size() == qps_.size(), PB_ERR_INVALID,
            "ib-verbs: " + from + " uses " + std::to_string(blob.qps.size()) + " queue pair(s) per connection, rank " +
                std::to_string(ctx_.host().rank()) + " uses " + std::to_string(qps_.size()) +
                ": set ib-verbs.qps_per_connection alike on every rank");
  IBV_CHECK(blob.linkLayer == ctx_.port().linkLayer, PB_ERR_UNSUPPORTED,
            "ib-verbs: " + from + "'s port is " + linkLayerName(blob.linkLayer) + ", " + ctx_.port().name() + " is " +
                linkLayerName(ctx_.port().linkLayer) + ": no RDMA path between them");
  const LocalPort local = localPort();
  for (size_t i = 0; i < qps_.size(); ++i) {
    const std::string what = "ib-verbs: " + ctx_.where() + ": queue pair " + std::to_string(i) + " to " + from;
    QpStep rtr = rtrStep(local, blob, blob.qps[i], ctx_.settings());
    verbsCheck(ibv_modify_qp(qps_[i].get(), &rtr.attr, rtr.mask), what + ": INIT -> RTR", PB_ERR_REMOTE);
    QpStep rts = rtsStep(psns_[i], ctx_.settings(), initiatorDepth(local, blob));
    verbsCheck(ibv_modify_qp(qps_[i].get(), &rts.attr, rts.mask), what + ": RTR -> RTS", PB_ERR_REMOTE);
  }
}

void Connection::throwIfFailed() const {
  if (failure_) throw *failure_;
}

void Connection::checkConnected(const char* op) const {
  throwIfFailed();
  IBV_CHECK(connected_, PB_ERR_INVALID,
            std::string("ib-verbs ") + op + " to " + peer_.describe() + " before proxy_connect finished");
}

void Connection::checkWrite(const LocalRegion& src, size_t srcOffset, const RemoteRegion& dst, size_t dstOffset,
                            size_t size) const {
  IBV_CHECK(rangeFits(srcOffset, size, src.size), PB_ERR_INVALID,
            "ib-verbs write to " + peer_.describe() + ": source range [" + std::to_string(srcOffset) + ", +" +
                std::to_string(size) + ") overruns the local region of " + std::to_string(src.size) + " bytes");
  IBV_CHECK(rangeFits(dstOffset, size, dst.key.size), PB_ERR_INVALID,
            "ib-verbs write to " + peer_.describe() + ": destination range [" + std::to_string(dstOffset) + ", +" +
                std::to_string(size) + ") overruns its region " + std::to_string(dst.key.region) + " of " +
                std::to_string(dst.key.size) + " bytes");
}

void Connection::checkSignal(const RemoteRegion& dst, size_t dstOffset) const {
  IBV_CHECK(rangeFits(dstOffset, sizeof(uint64_t), dst.key.size), PB_ERR_INVALID,
            "ib-verbs signal to " + peer_.describe() + ": offset " + std::to_string(dstOffset) + " overruns its region " +
                std::to_string(dst.key.region) + " of " + std::to_string(dst.key.size) + " bytes");
  IBV_CHECK((dst.key.base + dstOffset) % alignof(uint64_t) == 0, PB_ERR_INVALID,
            "ib-verbs signal to " + peer_.describe() + ": the counter at offset " + std::to_string(dstOffset) +
                " is not 8-byte aligned");
}

uint64_t Connection::beginOp(OpKind kind, uint32_t requests, uint32_t flushReads) {
  const uint64_t seq = ++posted_;
  ops_.push_back({seq, kind, requests + flushReads, flushReads});
  return seq;
}

std::vector<Connection::Request> Connection::writeRequests(uint64_t seq, LocalRegion& src, size_t srcOffset,
                                                           RemoteRegion& dst, size_t dstOffset, size_t size) const {
  const uint64_t most = ctx_.port().maxMessageBytes;
  std::vector<Request> out;
  for (const Stripe& st : stripeWrite(size, qps_.size(), ctx_.settings().stripeMinBytes)) {
    // A work request moves at most the port's max_msg_sz (and an sge length is 32 bits).
    for (uint64_t done = 0; done == 0 || done < st.length; done += most) {
      const uint64_t offset = st.offset + done, length = std::min<uint64_t>(st.length - done, most);
      Request r;
      r.qp = st.qp;
      r.sge.addr = reinterpret_cast<uint64_t>(src.base + srcOffset + offset);
      r.sge.length = static_cast<uint32_t>(length);
      r.sge.lkey = src.mr->lkey;
      r.wr.wr_id = seq;
      r.wr.opcode = IBV_WR_RDMA_WRITE;
      r.wr.num_sge = length ? 1 : 0;
      // Inline copies the bytes with the CPU at post time: host memory only.
      const bool inlined = length && length <= inlineLimit_ && src.type == PB_MEM_HOST;
      r.wr.send_flags = IBV_SEND_SIGNALED | (inlined ? IBV_SEND_INLINE : 0);
      r.wr.wr.rdma.remote_addr = dst.key.base + dstOffset + offset;
      r.wr.wr.rdma.rkey = dst.key.rkey;
      out.push_back(r);
      if (st.length == 0) break;
    }
  }
  return out;
}

void Connection::noteWrites(const std::vector<Request>& writes, const RemoteRegion& dst) {
  if (!ctx_.settings().gdrFlush) return;
  for (const Request& w : writes)
    flushes_.wrote(w.qp, dst.key.memType == PB_MEM_CUDA, dst.key.region, dst.key.rkey, w.wr.wr.rdma.remote_addr,
                   w.sge.length);
}

void Connection::queueSignal(uint64_t seq, const std::vector<FlushRead>& reads, RemoteRegion& dst, size_t dstOffset,
                             uint64_t value) {
  bool fence = false;
  for (const FlushRead& f : reads) {
    Request r;
    r.qp = f.qp;
    r.sge.addr = reinterpret_cast<uint64_t>(fetched_.get() + 1);
    r.sge.length = 1;
    r.sge.lkey = fetchedMr_->lkey;
    r.wr.wr_id = seq;
    r.wr.opcode = IBV_WR_RDMA_READ;
    r.wr.num_sge = 1;
    r.wr.send_flags = IBV_SEND_SIGNALED;
    r.wr.wr.rdma.remote_addr = f.remoteAddr;
    r.wr.wr.rdma.rkey = f.rkey;
    backlog_->push(r.qp, r, false);
    fence = fence || f.qp == 0;
  }
  Request r;
  r.qp = 0;
  r.sge.addr = reinterpret_cast<uint64_t>(fetched_.get());
  r.sge.length = sizeof(uint64_t);
  r.sge.lkey = fetchedMr_->lkey;
  r.wr.wr_id = seq;
  r.wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  r.wr.num_sge = 1;
  // The fence holds the atomic until the read before it returned: only then
  // did the peer's GPU see the writes (gpu_flush.hpp).
  r.wr.send_flags = IBV_SEND_SIGNALED | (fence ? IBV_SEND_FENCE : 0);
  r.wr.wr.atomic.remote_addr = dst.key.base + dstOffset;
  r.wr.wr.atomic.compare_add = value;
  r.wr.wr.atomic.rkey = dst.key.rkey;
  backlog_->push(r.qp, r, qps_.size() > 1);
}

void Connection::queueWrites(const std::vector<Request>& writes) {
  for (const Request& w : writes) backlog_->push(w.qp, w, false);
}

void Connection::postWrite(LocalRegion& src, size_t srcOffset, RemoteRegion& dst, size_t dstOffset, size_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  checkConnected("write");
  checkWrite(src, srcOffset, dst, dstOffset, size);
  std::vector<Request> writes = writeRequests(posted_ + 1, src, srcOffset, dst, dstOffset, size);
  beginOp(OpKind::Write, static_cast<uint32_t>(writes.size()));
  noteWrites(writes, dst);
  queueWrites(writes);
  pump();
}

void Connection::postSignal(RemoteRegion& dst, size_t dstOffset, uint64_t value) {
  std::lock_guard<std::mutex> lock(mutex_);
  checkConnected("signal");
  checkSignal(dst, dstOffset);
  const std::vector<FlushRead> reads = flushes_.take();
  queueSignal(beginOp(OpKind::Signal, 1, static_cast<uint32_t>(reads.size())), reads, dst, dstOffset, value);
  pump();
}

void Connection::postWriteSignal(LocalRegion& src, size_t srcOffset, RemoteRegion& dst, size_t dstOffset, size_t size,
                                 RemoteRegion& signalDst, size_t signalOffset, uint64_t value) {
  std::lock_guard<std::mutex> lock(mutex_);
  checkConnected("write_signal");
  checkWrite(src, srcOffset, dst, dstOffset, size);
  checkSignal(signalDst, signalOffset);
  std::vector<Request> writes = writeRequests(posted_ + 1, src, srcOffset, dst, dstOffset, size);
  noteWrites(writes, dst);
  const std::vector<FlushRead> reads = flushes_.take();
  const uint64_t seq =
      beginOp(OpKind::WriteSignal, static_cast<uint32_t>(writes.size() + 1), static_cast<uint32_t>(reads.size()));
  queueWrites(writes);
  queueSignal(seq, reads, signalDst, signalOffset, value);
  pump();
}

void Connection::pump() {
  backlog_->pump([this](size_t qp, Request& r) {
    r.wr.sg_list = r.wr.num_sge ? &r.sge : nullptr;
    r.wr.next = nullptr;
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(qps_[qp].get(), &r.wr, &bad); rc != 0) {
      try {
        verbsCheck(rc, "ib-verbs: " + ctx_.where() + ": ibv_post_send to " + peer_.describe(), PB_ERR_SYSTEM);
      } catch (const Error& e) {
        fail(e.status(), e.what());
      }
    }
  });
}

CompletionParties Connection::parties(const Op* op, uint64_t wrId) const {
  CompletionParties p;
  p.operation = op ? operationText(op->kind, op->flushReads)
                   : "work request " + std::to_string(wrId) + " (of no outstanding operation)";
  p.port = ctx_.port().name();
  p.localRank = ctx_.host().rank();
  p.localHost = ctx_.host().hostname();
  p.peerRank = peer_.rank;
  p.peerHost = peer_.host;
  return p;
}

void Connection::complete(const ibv_wc& wc) {
  for (size_t i = 0; i < qps_.size(); ++i)
    if (qps_[i]->qp_num == wc.qp_num) backlog_->completed(i);
  Op* op = nullptr;
  if (!ops_.empty() && wc.wr_id >= ops_.front().seq && wc.wr_id - ops_.front().seq < ops_.size())
    op = &ops_[wc.wr_id - ops_.front().seq];
  if (wc.status != IBV_WC_SUCCESS)
    fail(statusForCompletion(wc.status), completionError(wc.status, parties(op, wc.wr_id)));
  if (!op || op->pending == 0)
    fail(PB_ERR_INTERNAL, "ib-verbs: " + ctx_.where() + ": a completion for operation " + std::to_string(wc.wr_id) +
                              " on the connection to " + peer_.describe() + ", which has none outstanding");
  --op->pending;
  while (!ops_.empty() && ops_.front().pending == 0) {
    completed_ = ops_.front().seq;
    ops_.pop_front();
  }
}

void Connection::progress(uint64_t* completed) {
  std::lock_guard<std::mutex> lock(mutex_);
  throwIfFailed();
  pump();
  const int rc = ctx_.cq().poll(cqId_, completions_);
  for (const ibv_wc& wc : completions_) complete(wc);
  if (rc < 0)
    fail(PB_ERR_SYSTEM, "ib-verbs: " + ctx_.where() + ": ibv_poll_cq failed (" + std::to_string(rc) +
                            ") on the queue shared with the connection to " + peer_.describe());
  pump();
  *completed = completed_;
}

void Connection::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  throwIfFailed();
  pump();
}

void Connection::fail(pb_status status, const std::string& message) {
  failure_.emplace(status, message);
  throw *failure_;
}

}  // namespace plugboard::ibverbs
