// How plugboard-perf gets its ranks: N forked local ranks (--nranks), the
// launcher's environment (mpirun, torchrun, Slurm), or a single rank.
#pragma once

#include <functional>
#include <memory>

#include "plugboard/bootstrap.hpp"

namespace plugboard::perf {

/// The benchmark body of one rank; returns its exit code.
using RankMain = std::function<int(std::shared_ptr<Bootstrap>)>;

/// Forks n ranks on loopback, runs body in each, waits for all. When one
/// fails, the others get a grace period and are then killed. Returns 0 only
/// if every rank returned 0.
int runLocalRanks(int n, const RankMain& body);

/// True when a launcher's variables (PLUGBOARD_RANK, RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID) are set.
bool launchedByLauncher();

/// This process's rank within its host: the launcher's local rank
/// (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, ...) when launched
/// by one and it says, else the global rank (forked local ranks).
int localRankOf(const Bootstrap& bootstrap);

/// A bootstrap from the launcher's environment.
std::shared_ptr<Bootstrap> bootstrapFromEnvironment();

}  // namespace plugboard::perf
