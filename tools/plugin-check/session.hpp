// The checker's side of a connection to the peer process: its plugin
// context, its connection, its registered buffers and the keys it imported,
// with the sequence-number bookkeeping every data-path check relies on.
#pragma once

#include <plugboard/transport.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "channel.hpp"
#include "fake_host.hpp"
#include "options.hpp"
#include "peer_process.hpp"

namespace plugboard::check {

/// A registered buffer of the checker.
struct LocalBuffer {
  std::vector<uint8_t> bytes;  ///< The memory (registered as a whole).
  pb_mr* mr = nullptr;         ///< Its registration.
};

/// A buffer of the peer process, imported on the checker's connection.
struct RemoteBuffer {
  uint64_t id = 0;         ///< The peer's id for Verify.
  size_t size = 0;         ///< Its size.
  std::string packed;      ///< The packed key as the peer sent it.
  pb_rkey* rkey = nullptr; ///< The imported key (nullptr once released).
};

/// Rank 0 of a two-process connection (rank 1 is the peer process).
class Session {
 public:
  /// Starts the peer process and initialises rank 0's context. Throws
  /// CheckFailed when either fails.
  Session(const Options& o, const pb_transport_v1& t, const pb_transport_properties_v1& props);
  /// Best-effort clean-up of whatever the checks left behind.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Sets up and connects both sides (connect.loopback). Returns the
  /// slowest single proxy_connect call, in seconds.
  double connect();
  /// Skips the running check unless connected and nothing broke the session.
  void requireUsable() const;

  /// The function table.
  const pb_transport_v1& api() const { return t_; }
  /// The plugin's properties.
  const pb_transport_properties_v1& props() const { return props_; }
  /// Rank 0's context.
  pb_plugin_ctx* ctx() const { return ctx_; }
  /// Rank 0's connection (nullptr after freeConnection).
  pb_conn* conn() const { return conn_; }
  /// last_error of rank 0's context.
  std::string error() const;

  /// A registered local buffer of size bytes (owned by the session).
  LocalBuffer& localBuffer(size_t size);
  /// Has the peer allocate, fill and register a buffer; imports its key.
  RemoteBuffer& remoteBuffer(size_t size, uint8_t fill);

  /// write() that must succeed; counts its sequence number.
  void write(LocalBuffer& src, size_t srcOffset, RemoteBuffer& dst, size_t dstOffset, size_t size);
  /// signal() that must succeed; counts its sequence number.
  void signal(RemoteBuffer& dst, size_t offset, uint64_t value);
  /// Operations posted so far (the last sequence number handed out).
  uint64_t posted() const { return posted_; }
  /// Polls proxy_progress until seq has completed. Fails on an error, a
  /// timeout, a completion beyond what was posted or one that goes back.
  void waitCompleted(uint64_t seq);
  /// Asks the peer to check a buffer; progresses rank 0 while it waits.
  void verify(const VerifyRequest& v);
  /// Times rank 0's host services saw signal_landed.
  uint64_t signalsLanded() const { return host_.signalsLanded(); }
  /// Imported key's address in this process (remote_pointer); the status
  /// is returned, the pointer stored in *ptr.
  pb_status remotePointer(RemoteBuffer& b, void** ptr);

  /// Releases every imported key, then frees the connection; returns the
  /// seconds free() took.
  double freeConnection();
  /// Asks the peer to free its side.
  void peerFreeConnection();
  /// Deregisters the local buffers and finalizes rank 0's context, then
  /// has the peer do the same and exit. Fails with every problem found.
  void finish();

 private:
  /// One proxy_progress call; records the first error instead of throwing.
  void pump();
  /// Sends a request and waits for the reply of type want, progressing.
  Message request(Msg type, const std::string& body, Msg want, const std::string& what);
  void releaseKeys();

  const Options& o_;
  const pb_transport_v1& t_;
  pb_transport_properties_v1 props_;
  std::unique_ptr<PeerProcess> peer_;
  FakeHost host_;
  pb_plugin_ctx* ctx_ = nullptr;
  pb_conn* conn_ = nullptr;
  bool connected_ = false;
  std::string broken_;         ///< Why the session cannot be used any more.
  std::string progressError_;  ///< First failed proxy_progress.
  uint64_t posted_ = 0;
  uint64_t completed_ = 0;
  std::vector<std::unique_ptr<LocalBuffer>> locals_;
  std::vector<std::unique_ptr<RemoteBuffer>> remotes_;
};

}  // namespace plugboard::check
