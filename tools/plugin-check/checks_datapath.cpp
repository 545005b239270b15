// The data path: sizes, signal ordering, many operations in flight, range
// checks, flush, and free with operations still queued. The peer process
// checks every byte.
#include <cstdint>
#include <algorithm>
#include <cstring>

#include "checks_datapath.hpp"
#include "loader.hpp"
#include "pattern.hpp"
#include "timing.hpp"

namespace plugboard::check {
namespace {

/// Where the peer's counters live inside their 64-byte buffer.
constexpr size_t kCounterOffset = 8;
/// Byte the peer fills destinations with before they are written.
constexpr uint8_t kFill = 0xEE;

bool hasWrite(const Session& s) { return s.props().flags & PB_CAP_ONE_SIDED_WRITE; }
bool hasSignal(const Session& s) { return s.props().flags & PB_CAP_ATOMIC_SIGNAL; }

/// Skips unless the session is usable and the plugin writes.
void requireWrite(const Session& s) {
  s.requireUsable();
  if (!hasWrite(s)) skip("the plugin does not set PB_CAP_ONE_SIDED_WRITE");
}

/// What the peer must find after a write of len bytes from pattern index
/// srcOffset (seed) to dstOffset of dst, announced by counter reaching value.
VerifyRequest expectation(const RemoteBuffer& dst, size_t dstOffset, size_t len, size_t srcOffset, uint64_t seed,
                          const RemoteBuffer* counter, uint64_t value) {
  VerifyRequest v;
  v.buffer = dst.id;
  v.offset = dstOffset;
  v.length = len;
  v.patternStart = srcOffset;
  v.seed = seed;
  v.fill = kFill;
  if (counter) {
    v.counterBuffer = counter->id;
    v.counterOffset = kCounterOffset;
    v.counterValue = value;
  }
  return v;
}

/// One write of size bytes at odd offsets, followed by a signal when the
/// plugin has them; the peer checks the bytes and their surroundings.
void checkWriteOfSize(Session& s, size_t size, uint64_t seed) {
  constexpr size_t kSrcOffset = 3, kDstOffset = 5, kSlack = 16;
  LocalBuffer& src = s.localBuffer(size + kSlack);
  fillPattern(src.bytes.data(), src.bytes.size(), 0, seed);
  RemoteBuffer& dst = s.remoteBuffer(size + kSlack, kFill);
  RemoteBuffer* counter = hasSignal(s) ? &s.remoteBuffer(64, 0) : nullptr;
  s.write(src, kSrcOffset, dst, kDstOffset, size);
  if (counter) s.signal(*counter, kCounterOffset, 1);
  s.waitCompleted(s.posted());
  s.verify(expectation(dst, kDstOffset, size, kSrcOffset, seed, counter, 1));
}

/// A signal must not overtake the write posted before it: the peer checks
/// the data the moment the counter moves, round after round.
void checkSignalAfterWrite(Session& s, int rounds, size_t size) {
  if (!hasSignal(s)) skip("the plugin does not set PB_CAP_ATOMIC_SIGNAL");
  LocalBuffer& src = s.localBuffer(size);
  RemoteBuffer& dst = s.remoteBuffer(size, kFill);
  RemoteBuffer& counter = s.remoteBuffer(64, 0);
  for (int round = 1; round <= rounds; ++round) {
    fillPattern(src.bytes.data(), size, 0, 1000 + round);
    s.write(src, 0, dst, 0, size);
    s.signal(counter, kCounterOffset, 3);
    try {
      s.verify(expectation(dst, 0, size, 0, 1000 + round, &counter, 3 * uint64_t(round)));
    } catch (const CheckFailed& e) {
      throw CheckFailed("round " + std::to_string(round) + ": " + e.what());
    }
    s.waitCompleted(s.posted());  // only now may the source be refilled
  }
}

/// count writes posted back to back, in reverse offset order so that a
/// reordering shows in the data; completion must reach the last one.
void checkManyInFlight(Session& s, size_t count, size_t chunk) {
  LocalBuffer& src = s.localBuffer(count * chunk);
  fillPattern(src.bytes.data(), src.bytes.size(), 0, 77);
  RemoteBuffer& dst = s.remoteBuffer(count * chunk, kFill);
  RemoteBuffer* counter = hasSignal(s) ? &s.remoteBuffer(64, 0) : nullptr;
  for (size_t i = 0; i < count; ++i) {
    size_t off = (count - 1 - i) * chunk;
    s.write(src, off, dst, off, chunk);
  }
  s.waitCompleted(s.posted());
  if (counter) s.signal(*counter, kCounterOffset, 1);
  s.waitCompleted(s.posted());
  s.verify(expectation(dst, 0, count * chunk, 0, 77, counter, 1));
}

/// Every out-of-range post is refused with PB_ERR_INVALID and takes no
/// sequence number; the connection still works afterwards.
void checkRangeChecks(Session& s) {
  const pb_transport_v1& t = s.api();
  LocalBuffer& src = s.localBuffer(64);
  fillPattern(src.bytes.data(), 64, 0, 5);
  RemoteBuffer& dst = s.remoteBuffer(64, kFill);
  const size_t huge = SIZE_MAX;
  struct Case {
    size_t srcOff, dstOff, size;
    const char* what;
  };
  const Case cases[] = {{0, 0, 65, "65 bytes from a 64-byte source"},
                        {65, 0, 0, "source offset past the end"},
                        {0, 60, 8, "8 bytes at destination offset 60 of 64"},
                        {8, 0, huge, "size SIZE_MAX (overflow)"},
                        {huge, 0, 2, "source offset SIZE_MAX (overflow)"},
                        {0, huge - 1, 4, "destination offset SIZE_MAX-1 (overflow)"}};
  for (const auto& c : cases) {
    pb_status st = t.write(s.conn(), src.mr, c.srcOff, dst.rkey, c.dstOff, c.size);
    expect(st == PB_ERR_INVALID, std::string("write of ") + c.what + " returned " + statusName(st) +
                                     ", expected PB_ERR_INVALID");
  }
  RemoteBuffer* counter = nullptr;
  if (hasSignal(s)) {
    counter = &s.remoteBuffer(64, 0);
    const std::pair<size_t, const char*> bad[] = {{12, "an unaligned offset (12)"}, {64, "offset 64 of 64 bytes"},
                                                  {huge - 3, "offset SIZE_MAX-3 (overflow)"}};
    for (const auto& [off, what] : bad) {
      pb_status st = t.signal(s.conn(), counter->rkey, off, 1);
      expect(st == PB_ERR_INVALID, std::string("signal at ") + what + " returned " + statusName(st) +
                                       ", expected PB_ERR_INVALID");
    }
  }
  s.write(src, 0, dst, 0, 64);
  if (counter) s.signal(*counter, kCounterOffset, 1);
  s.waitCompleted(s.posted());
  s.verify(expectation(dst, 0, 64, 0, 5, counter, 1));
}

/// flush() is accepted with and without work queued, returns at once, and
/// the queued work completes.
void checkFlush(Session& s) {
  const pb_transport_v1& t = s.api();
  auto timedFlush = [&](const char* when) {
    auto t0 = Clock::now();
    pb_status st = t.flush(s.conn());
    double took = secondsSince(t0);
    expect(st == PB_OK, std::string("flush ") + when + " returned " + statusName(st) + ": " + s.error());
    expect(took < 1.0, std::string("flush ") + when + " took " + std::to_string(took) + " s; it must not block");
  };
  timedFlush("with nothing posted");
  constexpr size_t kChunk = 64 << 10, kCount = 16;
  LocalBuffer& src = s.localBuffer(kChunk * kCount);
  fillPattern(src.bytes.data(), src.bytes.size(), 0, 9);
  RemoteBuffer& dst = s.remoteBuffer(kChunk * kCount, kFill);
  for (size_t i = 0; i < kCount; ++i) s.write(src, i * kChunk, dst, i * kChunk, kChunk);
  timedFlush("with writes posted");
  s.waitCompleted(s.posted());
  s.verify(expectation(dst, 0, kChunk * kCount, 0, 9, nullptr, 0));
}

/// PB_CAP_SIGNAL_NOTIFY: signal_landed is called in the receiving process
/// for a signal, and in the sending process when an operation completes
/// after its post returned (a large write; what completes inside the post
/// call has no other thread waiting for it).
void checkNotify(Session& s, double timeoutSeconds) {
  if (!(s.props().flags & PB_CAP_SIGNAL_NOTIFY)) skip("the plugin does not set PB_CAP_SIGNAL_NOTIFY");
  if (!hasSignal(s)) skip("PB_CAP_SIGNAL_NOTIFY without PB_CAP_ATOMIC_SIGNAL: nothing to check");
  constexpr size_t kBig = 16 << 20;
  LocalBuffer& src = s.localBuffer(kBig);
  fillPattern(src.bytes.data(), src.bytes.size(), 0, 31);
  RemoteBuffer& dst = s.remoteBuffer(kBig, kFill);
  RemoteBuffer& counter = s.remoteBuffer(64, 0);
  s.write(src, 0, dst, 0, 4096);
  s.signal(counter, kCounterOffset, 1);
  VerifyRequest v = expectation(dst, 0, 4096, 0, 31, &counter, 1);
  v.expectNotify = 1;
  s.verify(v);
  s.waitCompleted(s.posted());
  const uint64_t before = s.signalsLanded();
  s.write(src, 0, dst, 0, kBig);
  s.waitCompleted(s.posted());
  Deadline deadline(timeoutSeconds);
  while (s.signalsLanded() == before && !deadline.expired()) Pause()();
  expect(s.signalsLanded() > before, "the plugin sets PB_CAP_SIGNAL_NOTIFY but did not call signal_landed in the "
                                     "sending process when a 16 MiB write completed");
}

/// PB_CAP_MAPPED: remote_pointer gives an address in this process through
/// which stores reach the peer's host region.
void checkRemotePointer(Session& s) {
  if (!(s.props().flags & PB_CAP_MAPPED)) skip("the plugin does not set PB_CAP_MAPPED");
  RemoteBuffer& dst = s.remoteBuffer(4096, kFill);
  void* p = nullptr;
  pb_status st = s.remotePointer(dst, &p);
  if (st == PB_ERR_UNSUPPORTED) skip("remote_pointer does not map host regions (" + s.error() + ")");
  expect(st == PB_OK, "remote_pointer returned " + statusName(st) + ": " + s.error());
  expect(p != nullptr, "remote_pointer returned PB_OK and a NULL address");
  fillPattern(static_cast<uint8_t*>(p) + 8, 1000, 0, 41);
  // verify() asks the peer over a socket: that system call orders the
  // stores above before the peer reads them.
  s.verify(expectation(dst, 8, 1000, 0, 41, nullptr, 0));
}

}  // namespace

void runDataPathChecks(const Options& o, Report& r, Session& s) {
  const std::pair<size_t, const char*> sizes[] = {
      {0, "write.size_0"}, {1, "write.size_1"}, {4097, "write.size_4KiB_plus_1"}, {size_t(64) << 20, "write.size_64MiB"}};
  uint64_t seed = 1;
  for (const auto& [size, name] : sizes) {
    r.run(name, [&] {
      requireWrite(s);
      checkWriteOfSize(s, size, seed++);
    });
  }
  r.run("write.range_checks", [&] {
    requireWrite(s);
    checkRangeChecks(s);
  });
  r.run("signal.after_write", [&] {
    requireWrite(s);
    checkSignalAfterWrite(s, 50, 1 << 20);
  });
  r.run("write.many_in_flight", [&] {
    requireWrite(s);
    checkManyInFlight(s, 1000, 1000);
  });
  r.run("flush", [&] {
    requireWrite(s);
    checkFlush(s);
  });
  r.run("signal.notify", [&] {
    requireWrite(s);
    checkNotify(s, o.timeoutSeconds);
  });
  r.run("memory.remote_pointer", [&] {
    s.requireUsable();
    checkRemotePointer(s);
  });
}

void runCloseChecks(const Options& o, Report& r, Session& s) {
  r.run("free.in_flight", [&] {
    requireWrite(s);
    constexpr size_t kSize = 16 << 20;
    constexpr int kWrites = 8;
    LocalBuffer& src = s.localBuffer(kSize);
    RemoteBuffer& dst = s.remoteBuffer(kSize, kFill);
    for (int i = 0; i < kWrites; ++i) s.write(src, 0, dst, 0, kSize);
    double bound = std::min(10.0, o.timeoutSeconds);
    double took = s.freeConnection();
    expect(took < bound, "free with " + std::to_string(kWrites) + " writes of 16 MiB in flight took " +
                             std::to_string(took) + " s (bound " + std::to_string(bound) + " s)");
    s.peerFreeConnection();
  });
}

}  // namespace plugboard::check
