// One shared-memory segment: a header page, then a single-producer /
// single-consumer byte ring. The process that receives on a connection
// creates the segment (setup); its peer maps it (proxy_connect) and writes
// records into it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace shm {

/// Identifies a segment and its layout version.
constexpr uint32_t kSegmentMagic = 0x53534250;  // "PBSS"
/// Layout version of SegmentHeader and of the records in the ring.
constexpr uint32_t kLayoutVersion = 1;
/// Bytes before the ring (the header, padded to a page).
constexpr size_t kHeaderBytes = 4096;

/// The shared header. Fields below `head` change while both processes run
/// and are only touched with __atomic builtins; each group has its own
/// cache line so producer and consumer do not share one.
struct SegmentHeader {
  uint32_t magic;          ///< kSegmentMagic.
  uint32_t version;        ///< kLayoutVersion.
  int32_t ownerRank;       ///< Rank that created the segment and receives on it.
  int32_t producerRank;    ///< Rank allowed to write into it.
  uint64_t ringBytes;      ///< Ring size, a power of two.
  int64_t ownerPid;        ///< Process id of the owner.

  alignas(64) uint64_t head;     ///< Bytes the producer has published (grows forever).
  uint32_t producerAttached;     ///< 1 once the producer mapped the segment.
  uint32_t producerClosed;       ///< 1 once the producer freed its connection.
  alignas(64) uint64_t tail;     ///< Bytes the owner has consumed (grows forever).
  uint32_t ownerClosed;          ///< 1 once the owner freed its connection.
  alignas(64) uint32_t doorbell; ///< Futex word: bumped to wake the owner.
  uint32_t ownerSleeping;        ///< 1 while the owner may be waiting on doorbell.
};
static_assert(sizeof(SegmentHeader) <= kHeaderBytes, "header must fit its page");

/// A mapped segment; unmapped (and unlinked, if still linked) on destruction.
class Segment {
 public:
  /// Creates name (O_EXCL) with a ring of ringBytes for owner/producer.
  /// Throws Error(PB_ERR_SYSTEM) on failure.
  static std::unique_ptr<Segment> create(const std::string& name, size_t ringBytes, int ownerRank, int producerRank);
  /// Maps the existing segment name and checks its header. Throws
  /// Error(PB_ERR_REMOTE) when it is missing or not a valid segment.
  static std::unique_ptr<Segment> open(const std::string& name);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  /// Removes the name (the mapping stays); idempotent.
  void unlink();
  /// The shared header.
  SegmentHeader* header() const { return reinterpret_cast<SegmentHeader*>(base_); }
  /// First byte of the ring.
  uint8_t* ring() const { return static_cast<uint8_t*>(base_) + kHeaderBytes; }
  /// Ring size in bytes (a power of two).
  size_t ringBytes() const { return ringBytes_; }
  /// The name it was created or opened with.
  const std::string& name() const { return name_; }

 private:
  Segment(std::string name, void* base, size_t mapped, size_t ringBytes, bool linked)
      : name_(std::move(name)), base_(base), mapped_(mapped), ringBytes_(ringBytes), linked_(linked) {}
  std::string name_;
  void* base_;
  size_t mapped_;
  size_t ringBytes_;
  bool linked_;  ///< This process created the name and has not unlinked it.
};

/// Blocks while *word == expected, at most timeoutMs (futex across processes).
void futexWait(uint32_t* word, uint32_t expected, int timeoutMs);
/// Wakes every waiter on word.
void futexWakeAll(uint32_t* word);

}  // namespace shm
