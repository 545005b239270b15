// Records in a segment's ring, and the two ends that move them: the
// producer (the sending process) appends, the owner (the receiving process)
// consumes in order. Order in the ring is the order of posting, which is
// all the signal-after-write guarantee needs.
#pragma once

#include <cstdint>

#include "segment.hpp"

namespace shm {

/// Record types.
enum RecordType : uint32_t {
  kRecordWrite = 1,  ///< `length` payload bytes follow, for (region, key, offset).
  kRecordSignal = 2  ///< Add `length` (the value) to the uint64_t at (region, key, offset).
};

/// Header of every record; a WRITE's payload follows, padded to 8 bytes.
struct RecordHeader {
  uint32_t type;     ///< RecordType.
  uint32_t reserved; ///< 0.
  uint64_t seq;      ///< Sequence number of the operation (chunks of one write share it).
  uint64_t region;   ///< Target region id (from the packed key).
  uint64_t key;      ///< Target region's secret (from the packed key).
  uint64_t offset;   ///< Byte offset in the target region.
  uint64_t length;   ///< WRITE: payload bytes. SIGNAL: value to add.
};
static_assert(sizeof(RecordHeader) == 48, "record header layout is part of the shared format");

/// Bytes a record occupies in the ring.
inline uint64_t recordBytes(uint32_t type, uint64_t length) {
  return sizeof(RecordHeader) + (type == kRecordWrite ? (length + 7) & ~uint64_t(7) : 0);
}

/// The producer's end of a ring (in the peer's segment).
class RingWriter {
 public:
  /// Writes into seg, which must outlive this object.
  explicit RingWriter(Segment& seg) : seg_(seg), head_(__atomic_load_n(&seg.header()->head, __ATOMIC_RELAXED)) {}
  /// Appends one record if it fits now; false (nothing written) if not.
  /// Invisible to the owner until publish().
  bool append(const RecordHeader& h, const void* payload);
  /// Makes appended records visible and wakes the owner if it sleeps.
  void publish();
  /// Bytes the owner has not consumed yet.
  uint64_t unconsumed() const { return head_ - __atomic_load_n(&seg_.header()->tail, __ATOMIC_ACQUIRE); }

 private:
  void copyIn(uint64_t pos, const void* src, uint64_t n);
  Segment& seg_;
  uint64_t head_;  ///< Our copy of head, ahead of the shared one until publish().
};

/// The owner's end of a ring (in its own segment).
class RingReader {
 public:
  /// Reads from seg, which must outlive this object.
  explicit RingReader(Segment& seg) : seg_(seg), tail_(__atomic_load_n(&seg.header()->tail, __ATOMIC_RELAXED)) {}
  /// True when a published record is waiting.
  bool hasRecord() const { return __atomic_load_n(&seg_.header()->head, __ATOMIC_ACQUIRE) != tail_; }
  /// Copies the next record's header (call only when hasRecord()).
  RecordHeader peek() const;
  /// Published bytes not consumed yet (a whole record is never less than its size).
  uint64_t available() const { return __atomic_load_n(&seg_.header()->head, __ATOMIC_ACQUIRE) - tail_; }
  /// Copies n payload bytes of the current record, from byte `from` of its payload.
  void copyPayload(void* dst, uint64_t from, uint64_t n) const;
  /// Frees the current record's bytes for the producer.
  void consume(const RecordHeader& h);
  /// Sleeps until the producer publishes, stop is set, or timeoutMs pass.
  void sleep(const bool* stop, int timeoutMs);

 private:
  void copyOut(uint64_t pos, void* dst, uint64_t n) const;
  Segment& seg_;
  uint64_t tail_;
};

/// Wakes the owner of seg whatever it is waiting for (close, stop).
void ringDoorbell(Segment& seg);

}  // namespace shm
