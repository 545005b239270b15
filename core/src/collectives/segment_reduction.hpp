// Reducing every peer's bytes of one segment into an accumulator.
#pragma once

#include <cstddef>

#include "collectives/exchange.hpp"
#include "plugboard/datatype.hpp"

namespace plugboard {

/// The receives of one segment, reducing every peer's bytes into acc, which
/// starts as this rank's own bytes (mine). Rather than copying mine into acc
/// first (a pass over the segment before anything arrives, on the critical
/// path), the first bytes to arrive at an offset are combined with mine into
/// acc and later ones reduce into acc: the same bits as copy-then-reduce.
///
/// Invariant: each peer's bytes arrive in order (a receive job consumes its
/// chunks in order), so what has been combined is a prefix [0, combined) and
/// every arrival starts inside it or at its end.
class SegmentReduction {
 public:
  /// acc may be mine (in place); no other overlap.
  SegmentReduction(const char* mine, char* acc, size_t bytes, DataType type, ReduceOp op);

  /// A consumer for one peer's receive job; valid while this object lives.
  ChunkConsumer consumer();

  /// After every receive: where nothing arrived (no peers), acc gets mine.
  void finish();

 private:
  void take(size_t offset, const char* data, size_t bytes);

  const char* mine_;
  char* acc_;
  size_t bytes_, elementBytes_;
  DataType type_;
  ReduceOp op_;
  size_t combined_ = 0;
};

}  // namespace plugboard
