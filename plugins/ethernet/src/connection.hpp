// One ethernet connection to a peer (the core's pb_conn*): a TCP frame
// stream each way (plus, with ethernet.stripe_sockets, stripe sockets that
// carry the pieces of large writes: send_lane.hpp, receive_lane.hpp), a send
// queue that posting and polling callers push with non-blocking
// sends (a sender thread takes over when none polls; datapath.cpp), and a
// receive path that applies the peer's writes/signals to our registered
// memory, run by a receiver thread or by a caller of proxy_progress,
// whichever holds rxMu_ (receive.cpp).
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "context.hpp"
#include "handshake.hpp"
#include "memory.hpp"
#include "net/socket.hpp"
#include "receive_lane.hpp"
#include "send_lane.hpp"
#include "wire.hpp"

namespace plugboard::ethernet {

/// How long after a polling caller's last proxy_progress the data-path
/// threads keep out of the way (the caller sends and receives itself).
/// Once it stops polling, they take over within this time; each look costs
/// a wake-up that, with ranks on every core, preempts one.
constexpr std::chrono::microseconds kWaiterGrace{500};
/// While the caller keeps polling, the receiver thread's naps double from
/// kWaiterGrace up to this: on a host with more ranks than cores each look
/// is a context switch taken from a rank with work (12 receiver threads
/// looking every 500 us cost 4-rank 256 KiB - 1 MiB allreduces on 2 cores
/// 9-14%).
/// The price: a caller that stops polling after a long wait is taken over
/// up to this much later (its peers' bytes wait in the socket meanwhile).
constexpr std::chrono::microseconds kLongestWaiterNap{4000};
/// How long free() lets the sender finish its current frame and send CLOSE
/// before it shuts the sockets down under it.
constexpr std::chrono::milliseconds kCloseGrace{2000};

/// A connection. The core serializes calls on one connection (transport.h);
/// the two threads share state with those calls through mu_.
class Connection {
 public:
  /// setup(): listens for peer and writes our address blob into addr
  /// (*addrLen: room in, size used out). Throws Error.
  Connection(Context& ctx, const PeerInfo& peer, void* addr, size_t* addrLen);
  /// Closes (see close()); never throws.
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// proxy_connect(): one non-blocking step. True once connected (threads
  /// running). Throws Error for a bad blob or a failed handshake.
  bool connect(const void* peerAddr, size_t peerAddrLen);
  /// Posts a write of size bytes; returns its sequence number. Throws Error
  /// (PB_ERR_INVALID for a bad range, the connection's failure otherwise).
  uint64_t postWrite(const LocalRegion& src, size_t srcOffset, const RemoteRegion& dst, size_t dstOffset,
                     size_t size);
  /// Posts an atomic add of value to the u64 at dst + dstOffset. As postWrite.
  uint64_t postSignal(const RemoteRegion& dst, size_t dstOffset, uint64_t value);
  /// Posts a write and then a signal as one WriteSignal frame (one seq).
  uint64_t postWriteSignal(const LocalRegion& src, size_t srcOffset, const RemoteRegion& dst, size_t dstOffset,
                           size_t size, const RemoteRegion& signalDst, size_t signalOffset, uint64_t value);
  /// Applies whatever the peer's frames have delivered so far (unless the
  /// receiver thread is at it), sets *completed to the sequence number of
  /// the last completed operation, then throws the connection's failure if
  /// any (final).
  void progress(uint64_t* completed);
  /// Throws unless connected; everything is sent as soon as it is posted.
  void flush();
  /// The owning context.
  Context& context() { return ctx_; }

 private:
  /// A posted operation: its frame header and, for a write, the source bytes.
  struct Op {
    wire::FrameHeader header;
    const char* payload = nullptr;
    wire::SignalExt ext{};  ///< WriteSignal only: the signal that follows the write.
    size_t sent = 0;  ///< Bytes of header + ext + payload already sent inline by post().
    bool striped = false;  ///< The payload goes as pieces on the stripe sockets.
  };
  /// A final error and the status it maps to.
  struct Failure {
    pb_status status;
    std::string reason;
  };

  /// Throws Error(PB_ERR_INVALID) until proxy_connect has returned PB_OK.
  void requireConnected() const;
  /// Numbers op and queues it for the sender; throws the connection's
  /// failure, or PB_ERR_REMOTE once the peer sent CLOSE.
  uint64_t post(Op op);
  /// Takes the handshake's sockets (frame streams first) and starts the
  /// threads: sender, receiver, and one per stripe socket.
  void startThreads(std::vector<net::Socket> outbound, std::vector<net::Socket> inbound);
  /// Op for a write of size bytes: striped when stripe sockets exist and it
  /// is at least ethernet.stripe_bytes.
  Op writeOp(wire::FrameType plain, wire::FrameType striped, const LocalRegion& src, size_t srcOffset,
             const RemoteRegion& dst, size_t dstOffset, size_t size) const;
  /// With mu_ held: queues a striped op's pieces, one per stripe socket.
  void postPieces(const Op& op);
  /// With mu_ held (lock): waits until every stripe socket has sent its
  /// piece of write seq. False when free() began meanwhile; throws a stripe
  /// socket's NetError.
  bool waitForPieces(std::unique_lock<std::mutex>& lock, uint64_t seq);
  /// A stripe sender's news (a piece sent, or its failure): wakes the
  /// sender thread waiting in waitForPieces.
  void pieceSent();
  /// Lets the sender finish its frame and send CLOSE (bounded wait), then
  /// shuts both sockets down and joins both threads. Never throws or hangs.
  void close() noexcept;

  /// Sender thread body: sends what no polling caller pushes, then CLOSE.
  void sendLoop();
  /// Waits until the queue needs the sender thread, then sends a piece of
  /// the front frame; false once free() began.
  bool senderStep();
  /// Finishes a frame cut short, then sends CLOSE (bounded by kCloseGrace).
  void sendCloseFrame();
  /// Sends the rest of op's frame, waiting for buffer space until deadline.
  void sendFrame(Op& op, net::Deadline deadline);
  /// One non-blocking sendmsg of op's unsent bytes; true when all went.
  bool sendPiece(Op& op);
  /// With mu_ held: publishes the front op's completion and drops it.
  void completeFront();
  /// With mu_ held: unless the sender thread is sending, sends what the
  /// socket takes now of the queued frames, in order, up to the first one
  /// the sender thread is to send (never blocks).
  void pushQueued();
  /// True when op is small enough for posting and polling threads to send.
  bool callerSends(const Op& op) const { return !op.striped && op.header.length <= callerSendBytes_; }
  /// iov for the unsent part of op's frame; header bytes go to headerBuf.
  /// Returns the number of iov entries used.
  size_t frameIov(const Op& op, uint8_t* headerBuf, iovec iov[2]) const;
  /// Throws PB_ERR_INVALID unless a write's ranges fit its regions.
  void checkWrite(const LocalRegion& src, size_t srcOffset, const RemoteRegion& dst, size_t dstOffset,
                  size_t size) const;
  /// Throws PB_ERR_INVALID unless the signal target is an aligned u64 inside dst.
  void checkSignalTarget(const RemoteRegion& dst, size_t dstOffset) const;
  /// Applies the signal of a Signal or WriteSignal frame.
  void applySignalTo(uint64_t region, uint64_t key, uint64_t offset, uint64_t value);
  /// Records the sender's error, worded by what the receiver learned.
  void senderFailed(pb_status status, const std::string& what, bool peerGone);
  /// Sets flag under mu_ and wakes every waiter.
  void markDone(bool& flag);

  /// Which part of a frame the receive path expects next.
  enum class RxPhase { Header, Ext, Payload, Pieces };
  /// What one receive step did.
  enum class RxStep { Waiting, Moved, Ended };
  /// The receive path's position in the stream (rxMu_ only). Bytes are read
  /// into buf (several small frames per recv); a large payload's remainder
  /// goes straight into its destination.
  struct RxState {
    RxPhase phase = RxPhase::Header;
    std::vector<uint8_t> buf;            // read-ahead: [begin, end) not yet parsed
    size_t begin = 0, end = 0;
    wire::FrameHeader header{};          // the frame being received
    wire::SignalExt ext{};               // its signal (WriteSignal)
    size_t done = 0;                     // payload bytes of the current write received
    uint64_t expectedSeq = 1;
    bool drained = false;  // this pass's last read came back short: the socket had no more then
    bool acksDelayed = false;  // delayAcks() since the last bulk read (receive.cpp)
    std::chrono::steady_clock::time_point acksDelayedAt;  // when delayAcks() last ran
  };

  /// Receiver thread body: waits for bytes and applies them until the end,
  /// keeping out of the way while callers of proxy_progress receive; also
  /// watches the outbound sockets, whose error (data unacknowledged past
  /// ack_timeout) no send may be there to meet.
  void receiveLoop();
  /// Receiver thread: fails the connection with the pending error of
  /// outbound socket watched_[i] (the frame stream or a stripe socket),
  /// unless the peer merely closed (the frame stream says how); then stops
  /// watching that socket.
  void reportOutboundError(size_t i);
  /// Polls the inbound socket and the watched outbound ones until the
  /// deadline, reports a failed outbound socket, and says whether the
  /// inbound one is readable (true too when poll() itself failed, so that
  /// the receive reports the socket's state). Receiver thread only.
  bool pollSockets(net::Deadline deadline);
  /// Records that a caller of proxy_progress is receiving now, if it polls.
  void noteWaiter();
  /// True while a polling caller of proxy_progress called within kWaiterGrace.
  bool waiterActive() const;
  /// Under rxMu_ (only if free with tryOnly): applies every complete part
  /// that has arrived, without blocking. Records a failure (final) instead
  /// of throwing. True when anything moved.
  bool receiveAvailable(bool tryOnly);
  /// Parses what the read-ahead holds, or reads once; what it completed.
  RxStep receiveStep();
  /// Moves payload bytes of the current write from the read-ahead, or reads
  /// them (straight into the destination when large).
  RxStep receivePayload();
  /// One non-blocking read into the read-ahead; false when nothing came.
  bool fillReadAhead();
  /// Asks the kernel to delay acknowledgements on the inbound stream, at
  /// most once per kReassertDelayedAcks while no bulk read turned them on.
  void delayAcksNow(RxState& r);
  /// Checks and dispatches the frame header in bytes; false after CLOSE.
  bool headerReceived(const uint8_t* bytes);
  /// Checks the destination of the current frame's payload.
  void startWrite();
  /// Checks the destination of a striped write; its pieces come next.
  void startStriped();
  /// True once every stripe socket delivered its piece of the current
  /// striped write (checked against its header; throws on a mismatch).
  bool piecesLanded();
  /// Throws a bad message unless the current frame's destination region
  /// holds its whole write.
  void checkDestination();
  /// The payload is in: applies a WriteSignal's signal.
  void finishWrite();
  /// Throws Error(PB_ERR_REMOTE, "bad message from <peer>: what").
  [[noreturn]] void badMessage(const std::string& what) const;

  /// Records the connection's final failure (first one wins; ignored once
  /// free() began) and logs it.
  void fail(pb_status status, const std::string& reason);

  Context& ctx_;
  PeerInfo peer_;
  std::string route_;  // "lo 127.0.0.1:port", for logs.
  std::unique_ptr<Handshake> handshake_;
  std::optional<net::SockAddr> peerListen_;

  net::Socket outbound_;
  net::Socket inbound_;
  std::vector<std::unique_ptr<SendLane>> sendLanes_;        // our stripe sockets
  std::vector<std::unique_ptr<ReceiveLane>> receiveLanes_;  // the peer's
  /// Set once every receive lane exists: a lane's thread starts in its
  /// constructor and may land a piece (the peer can post at once, as a
  /// failover's resend does) while later lanes are still being made; until
  /// then the receive path stays shut, or a striped write would complete
  /// on the lanes made so far and the late lanes' pieces would lag forever.
  std::atomic<bool> lanesMade_{false};
  uint32_t stripeSockets_ = 0;                               // ethernet.stripe_sockets
  size_t stripeBytes_ = SIZE_MAX;                            // ethernet.stripe_bytes
  std::chrono::milliseconds ackTimeout_{0};                  // ethernet.ack_timeout
  std::vector<const net::Socket*> watched_;  // outbound sockets the receiver thread watches for errors
  std::thread sender_;
  std::thread receiver_;
  bool connected_ = false;

  std::atomic<uint64_t> completed_{0};  // Written by the sender, in order.

  std::mutex rxMu_;  // held by whichever thread runs the receive path
  RxState rx_;       // guarded by rxMu_
  std::atomic<bool> rxEnded_{false};  // CLOSE or an error: nothing more is read (set under rxMu_)
  std::atomic<int64_t> lastWaiterNs_{0};  // steady clock of the last proxy_progress

  // Everything below is guarded by mu_; cv_ signals any change of it.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;
  bool senderBusy_ = false;    // the sender thread sends the front op outside the lock
  bool senderParked_ = false;  // the sender thread waits for post() with no timeout
  std::optional<net::NetError> pushError_;  // a push met it: the sender thread reports it
  size_t callerSendBytes_ = SIZE_MAX;  // ethernet.caller_send_bytes
  uint64_t posted_ = 0;
  bool closing_ = false;       // free() began: stop, drop queued ops, send CLOSE.
  bool peerClosed_ = false;    // The peer's CLOSE arrived.
  bool senderDone_ = false;
  bool receiverDone_ = false;
  std::optional<Failure> failure_;  // First error of either thread; final.
  std::atomic<bool> failed_{false};  // failure_ is set: progress() needs mu_ only then
};

}  // namespace plugboard::ethernet
