// What plugboard-perf needs to know about each collective: buffer sizes for
// a message size (nccl-tests conventions), the bus-bandwidth factor, how to
// call it in and out of place, and how to fill and check its buffers.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "plugboard/host_collectives.hpp"
#include "plugboard/host_plan.hpp"

namespace plugboard::perf {

/// The collectives plugboard-perf runs.
enum class Collective { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll, SendRecv };

/// Parses a -C value; throws Error(InvalidUsage) listing the choices.
Collective parseCollective(const std::string& name);
/// The -C name.
const char* collectiveName(Collective c);
/// True for allreduce, reducescatter and reduce (the redop column).
bool collectiveReduces(Collective c);
/// True for broadcast and reduce (the root column).
bool collectiveRooted(Collective c);

/// Throws Error(InvalidUsage) when c has a root and -r is not a rank of 0..nranks-1.
void checkRoot(int root, Collective c, int nranks);

/// Sizes of one benchmark row, as nccl-tests counts them.
struct Shape {
  size_t totalElements = 0;  ///< The "count" column: total elements of the message.
  size_t callCount = 0;      ///< The count passed to the call (per rank or per block).
  size_t sendElements = 0;   ///< Elements in the send buffer.
  size_t recvElements = 0;   ///< Elements in the receive buffer.
};

/// Shape for a message of about `bytes` (rounded down to whole elements per rank).
Shape shapeFor(Collective c, size_t bytes, size_t elementSize, int nranks);

/// busbw = algbw * this (nccl-tests' formulas).
double busBandwidthFactor(Collective c, int nranks);

/// One benchmark's buffers and arguments on this rank.
struct Call {
  Collective collective;
  DataType type;
  ReduceOp op;
  int root;
  int rank, nranks;
  Shape shape;
  bool inPlace;
  std::vector<char>* send;  ///< Host send buffer (max(send, recv) elements: in-place results land in it).
  std::vector<char>* recv;  ///< Host receive buffer.
  HostPlanExecutor* plan = nullptr;  ///< --plan: run through it instead of HostCollectives.
  bool preMul = false;               ///< GPU: the reducing call is a PreMulSum of scalar 1 (op is Sum).
};

/// Where a call reads its input and writes its result.
struct CallPointers {
  char* send;    ///< Input: the send buffer, or the rank's block of recv for in-place allgather.
  char* result;  ///< Output: recv, or inside the send buffer when in place (NCCL's in-place layouts).
};
/// The pointers of `call` given the bases of its send and receive buffers
/// (host or device; only arithmetic is done on them).
CallPointers callPointers(const Call& call, char* sendBase, char* recvBase);

/// Runs the collective once.
void runOnce(HostCollectives& hc, const Call& call);
/// Fills the inputs the check expects.
void fillInputs(const Call& call);
/// Elements of the result that differ from the reference.
size_t countWrong(const Call& call);

}  // namespace plugboard::perf
