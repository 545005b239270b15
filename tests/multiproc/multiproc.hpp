// Runs a test body in N forked rank processes, Gloo multiproc_test style.
// Fork happens before any CUDA call. Each child's failure (exception, gtest
// assertion, signal, exit code) is reported to the parent, and the whole run
// is killed after its own timeout so no test can hang CI.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "plugboard/bootstrap.hpp"

namespace plugboard::test {

/// What one rank process did.
struct RankResult {
  int rank = -1;
  int exitCode = -1;      ///< 0: passed.
  int signal = 0;         ///< Non-zero: killed by this signal.
  bool timedOut = false;  ///< Killed by the harness after the timeout.
  std::string message;    ///< First failure text the rank reported.
};

/// Body run by each rank: rank, number of ranks, a unique id whose root was
/// created by the parent before fork.
using RankBody = std::function<void(int rank, int nranks, const UniqueId& id)>;

/// Forks nranks processes running body; waits at most scaledTestTimeout(timeout), then kills
/// the rest. Returns one result per rank. A body fails by throwing or by a
/// failed gtest assertion (checked after it returns).
std::vector<RankResult> runRanks(int nranks, std::chrono::milliseconds timeout, const RankBody& body);

/// Same with a body per rank: bodies[r] runs as rank r (for ranks that
/// misbehave on purpose). A null body means "this rank never starts".
std::vector<RankResult> runRanksEach(const std::vector<RankBody>& bodies, std::chrono::milliseconds timeout);

/// timeout times PB_TEST_TIMEOUT_SCALE (1-100; unset: 1), for runs under a
/// tool that slows every rank (compute-sanitizer, valgrind). Throws on a
/// malformed value.
std::chrono::milliseconds scaledTestTimeout(std::chrono::milliseconds timeout);

/// gtest helper: EXPECTs every rank passed, printing each failure.
void expectAllPassed(const std::vector<RankResult>& results);

}  // namespace plugboard::test
