// The peer process: rank 1 of the connection checks. It owns the
// destination buffers, so every byte that arrives is checked in another
// address space than the one it was written from.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

#include "fake_host.hpp"
#include "loader.hpp"
#include "pattern.hpp"
#include "peer_process.hpp"
#include "timing.hpp"

namespace plugboard::check {
namespace {

/// A destination buffer the checker writes into.
struct Buffer {
  uint8_t* data = nullptr;
  size_t size = 0;
  pb_mr* mr = nullptr;
};

/// State of the peer process and the handlers of each request.
class Peer {
 public:
  Peer(const Options& o, Channel& channel)
      : o_(o), channel_(channel), lib_(o.plugin), t_(lib_.table(PB_TRANSPORT_ABI_MAJOR, PB_TRANSPORT_ABI_MINOR)),
        host_(1, 2, localHostName(), o.settings, o.verbose) {
    if (!t_) throw CheckFailed("the plugin returned no table to the peer process");
    pb_status st = t_->init(host_.services(), &ctx_);
    if (st != PB_OK) throw CheckFailed("init in the peer process: " + statusName(st) + ": " + lastError(*t_, nullptr));
  }

  /// Serves requests until Quit; false when the checker went away first.
  bool serve() {
    for (;;) {
      alarm(unsigned(o_.timeoutSeconds * 4 + 60));  // never outlive a stuck checker
      Message m = channel_.receive(1e9, [this] { pump(); });
      if (m.type == Msg::Quit) {
        quit();
        return true;
      }
      handle(m);
    }
  }

 private:
  std::string err() const { return lastError(*t_, ctx_); }

  /// Drives the connection as the core's proxy thread would.
  void pump() {
    if (!conn_ || !connected_ || !progressError_.empty()) return;
    uint64_t done = 0;
    pb_status st = t_->proxy_progress(conn_, &done);
    if (st != PB_OK) progressError_ = "proxy_progress in the peer process returned " + statusName(st) + ": " + err();
  }

  void handle(const Message& m) {
    try {
      switch (m.type) {
        case Msg::Connect: connect(m.body); break;
        case Msg::Alloc: alloc(m.body); break;
        case Msg::Verify: verify(decodeVerify(m.body)); break;
        case Msg::FreeConn: freeConn(); break;
        default: channel_.send(Msg::Error, "unknown request " + std::to_string(uint32_t(m.type)));
      }
    } catch (const CheckFailed& e) {
      channel_.send(Msg::Error, e.what());
    }
  }

  void connect(const std::string& parentBlob) {
    PeerDescription peer(1, 0, true);
    std::string blob(4096, '\0');
    size_t len = blob.size();
    pb_status st = t_->setup(ctx_, &peer.info, &conn_, blob.data(), &len);
    if (st != PB_OK) throw CheckFailed("setup in the peer process returned " + statusName(st) + ": " + err());
    blob.resize(len);
    channel_.send(Msg::Address, blob);
    Deadline deadline(o_.timeoutSeconds);
    while ((st = t_->proxy_connect(conn_, parentBlob.data(), parentBlob.size())) == PB_IN_PROGRESS) {
      if (deadline.expired()) throw CheckFailed("the peer's proxy_connect was still PB_IN_PROGRESS after " +
                                                std::to_string(int(o_.timeoutSeconds)) + " s");
    }
    if (st != PB_OK) throw CheckFailed("proxy_connect in the peer process returned " + statusName(st) + ": " + err());
    connected_ = true;
    channel_.send(Msg::Ok);
  }

  void alloc(const std::string& body) {
    Decoder d(body);
    Buffer b;
    b.size = d.u64();
    uint8_t fill = uint8_t(d.u64());
    size_t bytes = (b.size + 64) & ~size_t(63);
    b.data = static_cast<uint8_t*>(aligned_alloc(64, bytes));
    if (!b.data) throw CheckFailed("the peer process cannot allocate " + std::to_string(b.size) + " bytes");
    std::memset(b.data, fill, bytes);
    pb_status st = t_->register_memory(ctx_, b.data, b.size, PB_MEM_HOST, &b.mr);
    if (st != PB_OK) {
      free(b.data);
      throw CheckFailed("register_memory in the peer process returned " + statusName(st) + ": " + err());
    }
    uint64_t id = nextId_++;
    buffers_[id] = b;
    std::string key(4096, '\0');
    size_t len = key.size();
    st = t_->pack_rkey(ctx_, b.mr, key.data(), &len);
    if (st != PB_OK) throw CheckFailed("pack_rkey in the peer process returned " + statusName(st) + ": " + err());
    key.resize(len);
    channel_.send(Msg::Rkey, Encoder().u64(id).bytes(key.data(), key.size()).str());
  }

  Buffer& buffer(uint64_t id) {
    auto it = buffers_.find(id);
    if (it == buffers_.end()) throw CheckFailed("the peer process has no buffer " + std::to_string(id));
    return it->second;
  }

  /// Waits until the counter reaches value; fails on timeout or overshoot.
  void waitCounter(const VerifyRequest& v) {
    Buffer& c = buffer(v.counterBuffer);
    const uint64_t* counter = reinterpret_cast<const uint64_t*>(c.data + v.counterOffset);
    Deadline deadline(o_.timeoutSeconds);
    Pause pause;
    uint64_t seen = 0;
    while ((seen = __atomic_load_n(counter, __ATOMIC_ACQUIRE)) < v.counterValue) {
      pump();
      if (!progressError_.empty()) throw CheckFailed(progressError_);
      if (deadline.expired())
        throw CheckFailed("the signalled counter stayed at " + std::to_string(seen) + " for " +
                          std::to_string(int(o_.timeoutSeconds)) + " s, expected " + std::to_string(v.counterValue));
      pause();
    }
    if (seen != v.counterValue)
      throw CheckFailed("the signalled counter is " + std::to_string(seen) + ", expected exactly " +
                        std::to_string(v.counterValue) + " (a signal applied twice or with the wrong value)");
    std::string other = compareFill(c.data, v.counterOffset, 0, 0);
    if (other.empty()) other = compareFill(c.data + v.counterOffset + 8, c.size - v.counterOffset - 8, 0, v.counterOffset + 8);
    if (!other.empty()) throw CheckFailed("a signal changed a word it did not target: counter buffer " + other);
  }

  /// "" when the buffer holds what v describes, else the first difference.
  std::string compare(const VerifyRequest& v) {
    Buffer& b = buffer(v.buffer);
    std::string bad = compareFill(b.data, v.offset, uint8_t(v.fill), 0);
    if (!bad.empty()) return bad + " (before the start of the write)";
    bad = comparePattern(b.data + v.offset, v.length, v.patternStart, v.seed, v.offset);
    if (!bad.empty()) return bad;
    size_t end = v.offset + v.length;
    bad = compareFill(b.data + end, b.size - end, uint8_t(v.fill), end);
    return bad.empty() ? bad : bad + " (past the end of the write)";
  }

  void verify(const VerifyRequest& v) {
    Buffer& b = buffer(v.buffer);
    if (v.offset > b.size || v.length > b.size - v.offset) throw CheckFailed("verify range outside the buffer");
    if (v.counterBuffer != ~0ull) {
      waitCounter(v);
      std::string bad = compare(v);
      if (!bad.empty()) throw CheckFailed("data not complete when the signal arrived: " + bad);
    } else {
      Deadline deadline(o_.timeoutSeconds);
      Pause pause;
      std::string bad;
      while (!(bad = compare(v)).empty()) {
        pump();
        if (!progressError_.empty()) throw CheckFailed(progressError_);
        if (deadline.expired()) throw CheckFailed("after " + std::to_string(int(o_.timeoutSeconds)) + " s: " + bad);
        pause();
      }
    }
    if (!progressError_.empty()) throw CheckFailed(progressError_);
    if (v.expectNotify) waitNotified();
    landedAtLastReply_ = host_.signalsLanded();
    channel_.send(Msg::Ok);
  }

  /// A PB_CAP_SIGNAL_NOTIFY plugin calls signal_landed right after the
  /// add; the counter may be seen before that call, so wait for it.
  void waitNotified() {
    Deadline deadline(o_.timeoutSeconds);
    Pause pause;
    while (host_.signalsLanded() <= landedAtLastReply_) {
      if (deadline.expired())
        throw CheckFailed("the plugin sets PB_CAP_SIGNAL_NOTIFY but did not call signal_landed in the process "
                          "a signal landed in");
      pause();
    }
    for (const auto& v : host_.violations()) throw CheckFailed("host services misused: " + v);
  }

  void freeConn() {
    if (conn_) {
      pb_status st = t_->free(conn_);
      conn_ = nullptr;
      connected_ = false;
      if (st != PB_OK) throw CheckFailed("free in the peer process returned " + statusName(st) + ": " + err());
    }
    channel_.send(Msg::Ok);
  }

  /// Deregisters, frees and finalizes; reports the first failure.
  void quit() {
    std::string problems;
    for (auto& [id, b] : buffers_) {
      pb_status st = t_->deregister_memory(ctx_, b.mr);
      if (st != PB_OK && problems.empty())
        problems = "deregister_memory in the peer process returned " + statusName(st) + ": " + err();
      free(b.data);
    }
    buffers_.clear();
    if (conn_) {
      pb_status st = t_->free(conn_);
      if (st != PB_OK && problems.empty()) problems = "free in the peer process returned " + statusName(st) + ": " + err();
      conn_ = nullptr;
    }
    pb_status st = t_->finalize(ctx_);
    if (st != PB_OK && problems.empty())
      problems = "finalize in the peer process returned " + statusName(st) + ": " + lastError(*t_, ctx_);
    ctx_ = nullptr;
    channel_.send(problems.empty() ? Msg::Ok : Msg::Error, problems);
  }

  const Options& o_;
  Channel& channel_;
  PluginLibrary lib_;
  const pb_transport_v1* t_;
  FakeHost host_;
  pb_plugin_ctx* ctx_ = nullptr;
  pb_conn* conn_ = nullptr;
  bool connected_ = false;
  std::string progressError_;
  std::map<uint64_t, Buffer> buffers_;
  uint64_t nextId_ = 1;
  uint64_t landedAtLastReply_ = 0;
};

}  // namespace

int runPeer(const Options& o) {
  Channel channel(o.peerFd);
  try {
    Peer peer(o, channel);
    channel.send(Msg::Ok);  // ready
    return peer.serve() ? 0 : 1;
  } catch (const std::exception& e) {
    try {
      channel.send(Msg::Error, e.what());
    } catch (...) {
    }
    return 1;
  }
}

}  // namespace plugboard::check
