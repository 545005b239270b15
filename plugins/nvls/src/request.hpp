// What the core asks of a group buffer (pb_group_desc_v1), copied and
// checked once so nothing later reads the caller's struct.
#pragma once

#include <plugboard/transport.h>

#include <cstddef>
#include <string>
#include <vector>

namespace plugboard::nvls {

/// One rank's request for a group buffer.
struct GroupRequest {
  int rank = 0;                ///< This rank's index in the group.
  int nranks = 0;              ///< Ranks in the group.
  std::vector<int> commRanks;  ///< Communicator rank of each group rank (the group rank when the core gave none).
  int device = -1;             ///< CUDA device ordinal of this rank.
  size_t bytes = 0;            ///< Bytes asked for per rank.

  /// Copies *desc. Throws Error(PB_ERR_INVALID) for a struct too short, a
  /// rank outside 0 .. nranks - 1, nranks < 1, a negative device or 0 bytes.
  /// nranks == 1 passes here; the support check refuses it with a reason.
  static GroupRequest from(const pb_group_desc_v1* desc);

  /// "group rank 1 (communicator rank 5)".
  std::string describe(int groupRank) const;
  /// describe(rank).
  std::string describeSelf() const { return describe(rank); }
};

}  // namespace plugboard::nvls
