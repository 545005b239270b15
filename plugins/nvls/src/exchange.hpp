// The core's bootstrap for one group_create (pb_group_bootstrap_v1),
// checked once and used only to all_gather Reports.
#pragma once

#include <plugboard/transport.h>

#include <vector>

#include "wire.hpp"

namespace plugboard::nvls {

/// All_gathers one Report per rank per phase.
class Exchange {
 public:
  /// Throws Error(PB_ERR_INVALID) when bootstrap is NULL, too short or has
  /// no all_gather. rank/nranks: this rank's place in the group.
  Exchange(const pb_group_bootstrap_v1* bootstrap, int rank, int nranks);

  /// Every rank's report for mine.phase, indexed by group rank (mine
  /// included). Throws Error with the core's status when the all_gather
  /// fails, and Error(PB_ERR_REMOTE) when a rank's record is unreadable or
  /// belongs to another phase or rank (ranks out of step).
  std::vector<Report> gather(const Report& mine);

 private:
  const pb_group_bootstrap_v1* bootstrap_;
  int rank_;
  int nranks_;
};

}  // namespace plugboard::nvls
