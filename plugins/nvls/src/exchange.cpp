#include "exchange.hpp"

#include <cstdint>
#include <string>

#include "error.hpp"

namespace plugboard::nvls {

Exchange::Exchange(const pb_group_bootstrap_v1* bootstrap, int rank, int nranks)
    : bootstrap_(bootstrap), rank_(rank), nranks_(nranks) {
  NVLS_CHECK(bootstrap, PB_ERR_INVALID, "nvls group_create: desc->bootstrap must not be NULL");
  NVLS_CHECK(PB_HAS_FIELD(bootstrap, pb_group_bootstrap_v1, all_gather) && bootstrap->all_gather, PB_ERR_INVALID,
             "nvls group_create: the core's bootstrap has no all_gather");
}

std::vector<Report> Exchange::gather(const Report& mine) {
  std::vector<uint8_t> out(Report::kSize), all(Report::kSize * static_cast<size_t>(nranks_));
  mine.pack(out.data());
  const pb_status st = bootstrap_->all_gather(bootstrap_->core, out.data(), out.size(), all.data());
  NVLS_CHECK(st == PB_OK, st < 0 ? st : PB_ERR_INTERNAL,
             "nvls: group rank " + std::to_string(rank_) + ": the core's all_gather failed (status " +
                 std::to_string(st) + ") while " + phaseName(mine.phase));
  std::vector<Report> reports;
  reports.reserve(static_cast<size_t>(nranks_));
  for (int i = 0; i < nranks_; ++i) {
    Report r = Report::unpack(all.data() + Report::kSize * static_cast<size_t>(i));
    NVLS_CHECK(r.phase == mine.phase && r.groupRank == i, PB_ERR_REMOTE,
               "nvls: slot " + std::to_string(i) + " of the all_gather while " + phaseName(mine.phase) +
                   " holds group rank " + std::to_string(r.groupRank) + "'s record of phase " +
                   std::to_string(static_cast<uint32_t>(r.phase)) + " (ranks out of step)");
    reports.push_back(std::move(r));
  }
  return reports;
}

}  // namespace plugboard::nvls
