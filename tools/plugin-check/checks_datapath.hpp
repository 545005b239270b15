// Data-path checks over a connected Session (internal to the connection group).
#pragma once

#include "options.hpp"
#include "report.hpp"
#include "session.hpp"

namespace plugboard::check {

/// write.*, signal.*, flush: every byte checked by the peer process.
void runDataPathChecks(const Options& o, Report& r, Session& s);
/// free.in_flight: free() with writes still queued returns, bounded.
void runCloseChecks(const Options& o, Report& r, Session& s);

}  // namespace plugboard::check
