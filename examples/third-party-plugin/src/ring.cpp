#include "ring.hpp"

#include <cstring>

namespace shm {

void RingWriter::copyIn(uint64_t pos, const void* src, uint64_t n) {
  const uint64_t size = seg_.ringBytes();
  const uint64_t at = pos & (size - 1);
  const uint64_t first = n < size - at ? n : size - at;
  std::memcpy(seg_.ring() + at, src, first);
  std::memcpy(seg_.ring(), static_cast<const uint8_t*>(src) + first, n - first);
}

bool RingWriter::append(const RecordHeader& h, const void* payload) {
  const uint64_t need = recordBytes(h.type, h.length);
  if (seg_.ringBytes() - unconsumed() < need) return false;
  copyIn(head_, &h, sizeof(h));
  if (h.type == kRecordWrite && h.length) copyIn(head_ + sizeof(h), payload, h.length);
  head_ += need;
  return true;
}

void ringDoorbell(Segment& seg) {
  __atomic_fetch_add(&seg.header()->doorbell, 1, __ATOMIC_SEQ_CST);
  futexWakeAll(&seg.header()->doorbell);
}

void RingWriter::publish() {
  SegmentHeader* h = seg_.header();
  if (__atomic_load_n(&h->head, __ATOMIC_RELAXED) == head_) return;
  __atomic_store_n(&h->head, head_, __ATOMIC_RELEASE);
  // Pairs with the fence in RingReader::sleep: either the owner sees the
  // new head before it sleeps, or we see it sleeping and ring.
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (__atomic_load_n(&h->ownerSleeping, __ATOMIC_RELAXED)) ringDoorbell(seg_);
}

void RingReader::copyOut(uint64_t pos, void* dst, uint64_t n) const {
  const uint64_t size = seg_.ringBytes();
  const uint64_t at = pos & (size - 1);
  const uint64_t first = n < size - at ? n : size - at;
  std::memcpy(dst, seg_.ring() + at, first);
  std::memcpy(static_cast<uint8_t*>(dst) + first, seg_.ring(), n - first);
}

RecordHeader RingReader::peek() const {
  RecordHeader h;
  copyOut(tail_, &h, sizeof(h));
  return h;
}

void RingReader::copyPayload(void* dst, uint64_t from, uint64_t n) const {
  copyOut(tail_ + sizeof(RecordHeader) + from, dst, n);
}

void RingReader::consume(const RecordHeader& h) {
  tail_ += recordBytes(h.type, h.length);
  __atomic_store_n(&seg_.header()->tail, tail_, __ATOMIC_RELEASE);
}

void RingReader::sleep(const bool* stop, int timeoutMs) {
  SegmentHeader* h = seg_.header();
  const uint32_t bell = __atomic_load_n(&h->doorbell, __ATOMIC_ACQUIRE);
  __atomic_store_n(&h->ownerSleeping, 1, __ATOMIC_SEQ_CST);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (!hasRecord() && !__atomic_load_n(stop, __ATOMIC_ACQUIRE) &&
      !__atomic_load_n(&h->producerClosed, __ATOMIC_ACQUIRE))
    futexWait(&h->doorbell, bell, timeoutMs);
  __atomic_store_n(&h->ownerSleeping, 0, __ATOMIC_RELAXED);
}

}  // namespace shm
