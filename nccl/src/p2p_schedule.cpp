#include "p2p_schedule.hpp"

#include <algorithm>

#include "plugboard/error.hpp"

namespace plugboard::ncclapi {

std::vector<P2PStep> scheduleP2P(int rank, int nranks, const std::vector<P2POp>& ops) {
  // Distance k of each op: sends (peer - rank), receives (rank - peer), mod nranks.
  auto distance = [&](const P2POp& op) { return ((op.isSend ? op.peer - rank : rank - op.peer) + nranks) % nranks; };
  for (const P2POp& op : ops)
    if (op.peer < 0 || op.peer >= nranks)
      throw Error(ErrorCode::InvalidUsage, "rank " + std::to_string(rank) + ": " + (op.isSend ? "ncclSend" : "ncclRecv") +
                                               " peer " + std::to_string(op.peer) + " is out of range [0, " +
                                               std::to_string(nranks) + ")");
  // Op indexes by distance, call order kept within one: one allocation
  // besides the steps (this runs for every send and receive of a program).
  std::vector<int> order(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return distance(ops[a]) < distance(ops[b]); });
  std::vector<P2PStep> steps;
  steps.reserve(ops.size());
  for (size_t begin = 0; begin < order.size();) {
    const int k = distance(ops[order[begin]]);
    size_t end = begin;
    while (end < order.size() && distance(ops[order[end]]) == k) ++end;
    // The j-th send and the j-th receive of distance k make step (k, j).
    size_t nextSend = begin, nextRecv = begin;
    auto next = [&](size_t& at, bool isSend) {
      while (at < end && ops[order[at]].isSend != isSend) ++at;
      return at < end ? order[at++] : -1;
    };
    if (k == 0) {
      const auto sends = std::count_if(order.begin() + begin, order.begin() + end, [&](int i) { return ops[i].isSend; });
      const auto recvs = static_cast<long>(end - begin) - sends;
      if (sends != recvs)
        throw Error(ErrorCode::InvalidUsage, "rank " + std::to_string(rank) + ": the group has " + std::to_string(sends) +
                                                 " sends to this rank itself but " + std::to_string(recvs) +
                                                 " receives from it");
    }
    for (;;) {
      P2PStep step;
      step.send = next(nextSend, true);
      step.recv = next(nextRecv, false);
      if (step.send < 0 && step.recv < 0) break;
      step.self = k == 0;
      steps.push_back(step);
    }
    begin = end;
  }
  return steps;
}

}  // namespace plugboard::ncclapi
