#include "session.hpp"

#include "loader.hpp"
#include "report.hpp"
#include "timing.hpp"

namespace plugboard::check {

Session::Session(const Options& o, const pb_transport_v1& t, const pb_transport_properties_v1& props)
    : o_(o), t_(t), props_(props), host_(0, 2, localHostName(), o.settings, o.verbose) {
  peer_ = std::make_unique<PeerProcess>(o);
  peer_->channel().expectReply(Msg::Ok, "starting the peer process", o.timeoutSeconds);
  pb_status st = t_.init(host_.services(), &ctx_);
  if (st != PB_OK) throw CheckFailed("init returned " + statusName(st) + ": " + lastError(t_, nullptr));
}

Session::~Session() {
  try {
    releaseKeys();
    if (conn_) t_.free(conn_);
    for (auto& b : locals_)
      if (b->mr && ctx_) t_.deregister_memory(ctx_, b->mr);
    if (ctx_) t_.finalize(ctx_);
  } catch (...) {
  }
}

std::string Session::error() const { return lastError(t_, ctx_); }

void Session::requireUsable() const {
  if (!broken_.empty()) skip("the connection is unusable after an earlier failure (" + broken_ + ")");
  if (!connected_) skip("not connected (see connect.loopback)");
}

double Session::connect() {
  PeerDescription peer(0, 1, true);
  std::string blob(props_.max_address_size ? props_.max_address_size : 4096, '\0');
  size_t len = blob.size();
  pb_status st = t_.setup(ctx_, &peer.info, &conn_, blob.data(), &len);
  expect(st == PB_OK, "setup returned " + statusName(st) + ": " + error());
  expect(conn_ != nullptr, "setup returned PB_OK but no connection");
  expect(len > 0 && len <= props_.max_address_size,
         "setup's address blob is " + std::to_string(len) + " bytes; properties promise at most " +
             std::to_string(props_.max_address_size));
  blob.resize(len);
  Channel& ch = peer_->channel();
  ch.send(Msg::Connect, blob);
  Message theirs = ch.expectReply(Msg::Address, "the peer's setup", o_.timeoutSeconds);
  double slowest = 0;
  bool peerDone = false;
  Deadline deadline(o_.timeoutSeconds);
  for (st = PB_IN_PROGRESS;;) {
    if (st == PB_IN_PROGRESS) {
      auto t0 = Clock::now();
      st = t_.proxy_connect(conn_, theirs.body.data(), theirs.body.size());
      slowest = std::max(slowest, secondsSince(t0));
      expect(st == PB_OK || st == PB_IN_PROGRESS, "proxy_connect returned " + statusName(st) + ": " + error());
    }
    // The peer answers once it is connected; keep calling ours meanwhile.
    Message m;
    if (!peerDone && ch.tryReceive(&m, st == PB_OK ? 0.01 : 0)) {
      if (m.type == Msg::Error) throw CheckFailed(m.body);
      peerDone = true;
    }
    if (st == PB_OK && peerDone) break;
    if (deadline.expired())
      throw CheckFailed(st == PB_IN_PROGRESS ? "proxy_connect still PB_IN_PROGRESS after " +
                                                   std::to_string(int(o_.timeoutSeconds)) + " s"
                                             : "the peer process was not connected after " +
                                                   std::to_string(int(o_.timeoutSeconds)) + " s");
  }
  connected_ = true;
  return slowest;
}

LocalBuffer& Session::localBuffer(size_t size) {
  auto b = std::make_unique<LocalBuffer>();
  b->bytes.resize(size);
  pb_status st = t_.register_memory(ctx_, b->bytes.data(), size, PB_MEM_HOST, &b->mr);
  expect(st == PB_OK, "register_memory(" + std::to_string(size) + " bytes) returned " + statusName(st) + ": " + error());
  expect(b->mr != nullptr, "register_memory returned PB_OK but no region");
  locals_.push_back(std::move(b));
  return *locals_.back();
}

RemoteBuffer& Session::remoteBuffer(size_t size, uint8_t fill) {
  Message m = request(Msg::Alloc, Encoder().u64(size).u64(fill).str(), Msg::Rkey, "the peer's buffer");
  Decoder d(m.body);
  auto b = std::make_unique<RemoteBuffer>();
  b->id = d.u64();
  b->size = size;
  b->packed = d.bytes();
  expect(b->packed.size() <= props_.max_rkey_size,
         "pack_rkey used " + std::to_string(b->packed.size()) + " bytes; properties promise at most " +
             std::to_string(props_.max_rkey_size));
  pb_status st = t_.import_rkey(conn_, b->packed.data(), b->packed.size(), &b->rkey);
  expect(st == PB_OK, "import_rkey of the peer's key returned " + statusName(st) + ": " + error());
  expect(b->rkey != nullptr, "import_rkey returned PB_OK but no key");
  remotes_.push_back(std::move(b));
  return *remotes_.back();
}

void Session::write(LocalBuffer& src, size_t srcOffset, RemoteBuffer& dst, size_t dstOffset, size_t size) {
  pb_status st = t_.write(conn_, src.mr, srcOffset, dst.rkey, dstOffset, size);
  expect(st == PB_OK, "write of " + std::to_string(size) + " bytes (operation " + std::to_string(posted_ + 1) +
                          ") returned " + statusName(st) + ": " + error());
  ++posted_;
}

void Session::signal(RemoteBuffer& dst, size_t offset, uint64_t value) {
  pb_status st = t_.signal(conn_, dst.rkey, offset, value);
  expect(st == PB_OK, "signal (operation " + std::to_string(posted_ + 1) + ") returned " + statusName(st) + ": " + error());
  ++posted_;
}

void Session::pump() {
  if (!conn_ || !connected_ || !progressError_.empty()) return;
  uint64_t done = 0;
  pb_status st = t_.proxy_progress(conn_, &done);
  if (st != PB_OK) {
    progressError_ = "proxy_progress returned " + statusName(st) + ": " + error();
  } else if (done > posted_) {
    progressError_ = "proxy_progress reports operation " + std::to_string(done) + " complete, but only " +
                     std::to_string(posted_) + " were posted";
  } else if (done < completed_) {
    progressError_ = "completion went backwards from " + std::to_string(completed_) + " to " + std::to_string(done);
  } else {
    completed_ = done;
  }
}

void Session::waitCompleted(uint64_t seq) {
  Deadline deadline(o_.timeoutSeconds);
  Pause pause;
  for (;;) {
    pump();
    if (!progressError_.empty()) throw CheckFailed(progressError_);
    if (completed_ >= seq) return;
    if (deadline.expired())
      throw CheckFailed("completion stuck at " + std::to_string(completed_) + " of " + std::to_string(seq) +
                        " after " + std::to_string(int(o_.timeoutSeconds)) + " s");
    pause();
  }
}

Message Session::request(Msg type, const std::string& body, Msg want, const std::string& what) {
  Channel& ch = peer_->channel();
  Message m;
  try {
    ch.send(type, body);
    m = ch.receive(o_.timeoutSeconds + 5, [this] { pump(); });
  } catch (const CheckFailed& e) {
    broken_ = e.what();
    throw;
  }
  if (m.type == Msg::Error) throw CheckFailed(what + ": " + m.body);
  if (m.type != want) {
    broken_ = "unexpected reply type " + std::to_string(uint32_t(m.type));
    throw CheckFailed(what + ": " + broken_);
  }
  return m;
}

void Session::verify(const VerifyRequest& v) {
  request(Msg::Verify, encode(v), Msg::Ok, "in the peer process");
  if (!progressError_.empty()) throw CheckFailed(progressError_);
}

pb_status Session::remotePointer(RemoteBuffer& b, void** ptr) {
  *ptr = nullptr;
  if (!PB_HAS_FIELD(&t_, pb_transport_v1, remote_pointer) || !t_.remote_pointer) return PB_ERR_UNSUPPORTED;
  return t_.remote_pointer(conn_, b.rkey, ptr);
}

void Session::releaseKeys() {
  for (auto& r : remotes_) {
    if (r->rkey && conn_) {
      pb_status st = t_.release_rkey(conn_, r->rkey);
      r->rkey = nullptr;
      expect(st == PB_OK, "release_rkey returned " + statusName(st) + ": " + error());
    }
  }
}

double Session::freeConnection() {
  releaseKeys();
  auto t0 = Clock::now();
  pb_status st = t_.free(conn_);
  double took = secondsSince(t0);
  conn_ = nullptr;
  connected_ = false;
  expect(st == PB_OK, "free returned " + statusName(st) + ": " + error());
  return took;
}

void Session::peerFreeConnection() { request(Msg::FreeConn, "", Msg::Ok, "free in the peer process"); }

void Session::finish() {
  std::string problems;
  auto note = [&](const std::string& p) { problems += (problems.empty() ? "" : "; ") + p; };
  try {
    releaseKeys();
  } catch (const CheckFailed& e) {
    note(e.what());
  }
  if (conn_) {
    pb_status st = t_.free(conn_);
    if (st != PB_OK) note("free returned " + statusName(st) + ": " + error());
    conn_ = nullptr;
  }
  for (auto& b : locals_) {
    pb_status st = t_.deregister_memory(ctx_, b->mr);
    if (st != PB_OK) note("deregister_memory returned " + statusName(st) + ": " + error());
    b->mr = nullptr;
  }
  pb_status st = t_.finalize(ctx_);
  if (st != PB_OK) note("finalize returned " + statusName(st) + ": " + lastError(t_, ctx_));
  ctx_ = nullptr;
  for (const auto& v : host_.violations()) note("host services misused: " + v);
  if (broken_.empty()) {
    try {
      request(Msg::Quit, "", Msg::Ok, "the peer process's deregister/free/finalize");
    } catch (const CheckFailed& e) {
      note(e.what());
    }
  }
  std::string how = peer_->waitExit(o_.timeoutSeconds);
  if (!how.empty() && broken_.empty()) note("the peer process ended badly: " + how);
  expect(problems.empty(), problems);
}

}  // namespace plugboard::check
