// Which HCAs and ports to use, in NCCL_IB_HCA's syntax: a comma-separated
// list of "device[:port]"; a leading '^' makes it a list to exclude, a
// leading '=' (after '^' if both) makes names match exactly instead of as
// prefixes ("mlx5" matches mlx5_0 and mlx5_1; "=mlx5_1" only mlx5_1). An
// entry without a port matches every port of the device. The empty spec
// matches everything.
#pragma once

#include <string>
#include <vector>

namespace plugboard::ibverbs {

/// A parsed ib-verbs.hca / PLUGBOARD_IB_VERBS_HCA value.
class HcaFilter {
 public:
  /// Matches every device and port.
  HcaFilter() = default;
  /// Parses spec; where names its source for errors ("ib-verbs.hca from
  /// PLUGBOARD_IB_VERBS_HCA"). Throws Error(PB_ERR_INVALID) naming the
  /// entry for an empty name, a port that is not a number from 1 to 255,
  /// or more than kMaxEntries entries.
  static HcaFilter parse(const std::string& spec, const std::string& where);

  /// True when port of device (ports count from 1) is to be used.
  bool matches(const std::string& device, int port) const;
  /// One line for plugboard-info: "all", "only mlx5_0 port 1, mlx5_1", ...
  std::string describe() const;

  /// NCCL's limit on entries.
  static constexpr size_t kMaxEntries = 32;

 private:
  struct Entry {
    std::string name;
    int port = -1;  ///< -1: every port
  };
  bool listed(const std::string& device, int port) const;

  std::vector<Entry> entries_;
  bool exclude_ = false;
  bool exact_ = false;
};

}  // namespace plugboard::ibverbs
