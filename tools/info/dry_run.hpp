// plugboard-info's dry run of the per-pair transport selection for a
// rank-to-host map, using this process's transports for every rank.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "communicator/local_setup.hpp"

namespace plugboard::info {

/// Prints "rank a -> rank b via t (why)" for every pair of hosts.size()
/// ranks placed on those hosts. Throws Error exactly as set-up would.
void printSelection(const LocalSetup& setup, const std::vector<std::string>& hosts, std::ostream& out);

}  // namespace plugboard::info
