#include "p2p_schedule.hpp"

#include <algorithm>

#include "plugboard/error.hpp"

namespace plugboard::ncclapi {

std::vector<P2PStep> scheduleP2P(int rank, int nranks, const std::vector<P2POp>& ops) {
  // sendsTo[k] / recvsFrom[k]: op indexes in call order, by distance k.
  std::vector<std::vector<int>> sendsTo(nranks), recvsFrom(nranks);
  for (size_t i = 0; i < ops.size(); ++i) {
    const P2POp& op = ops[i];
    if (op.peer < 0 || op.peer >= nranks)
      throw Error(ErrorCode::InvalidUsage, "rank " + std::to_string(rank) + ": " + (op.isSend ? "ncclSend" : "ncclRecv") +
                                               " peer " + std::to_string(op.peer) + " is out of range [0, " +
                                               std::to_string(nranks) + ")");
    if (op.isSend) sendsTo[(op.peer - rank + nranks) % nranks].push_back(static_cast<int>(i));
    else recvsFrom[(rank - op.peer + nranks) % nranks].push_back(static_cast<int>(i));
  }
  if (sendsTo[0].size() != recvsFrom[0].size())
    throw Error(ErrorCode::InvalidUsage, "rank " + std::to_string(rank) + ": the group has " +
                                             std::to_string(sendsTo[0].size()) + " sends to this rank itself but " +
                                             std::to_string(recvsFrom[0].size()) + " receives from it");
  std::vector<P2PStep> steps;
  for (size_t j = 0; j < sendsTo[0].size(); ++j) steps.push_back({sendsTo[0][j], recvsFrom[0][j], true});
  for (int k = 1; k < nranks; ++k) {
    const size_t n = std::max(sendsTo[k].size(), recvsFrom[k].size());
    for (size_t j = 0; j < n; ++j) {
      P2PStep s;
      if (j < sendsTo[k].size()) s.send = sendsTo[k][j];
      if (j < recvsFrom[k].size()) s.recv = recvsFrom[k][j];
      steps.push_back(s);
    }
  }
  return steps;
}

}  // namespace plugboard::ncclapi
