// Loading a plugin in a short-lived child process first, so that one whose
// load or init crashes, exits or hangs costs a logged reason, not the job.
#pragma once

#include <chrono>
#include <string>

#include "plugboard/config.hpp"
#include "plugins/transport_plugin.hpp"

namespace plugboard {

/// Forks a child that loads and initialises the plugin at path (then
/// finalizes it and leaves by _exit) and waits at most `timeout` for it.
/// Returns "" when the child ended normally, or when the plugin merely
/// refused (an error it reported: the in-process load will report it the
/// same way, and a refusal may be the child's fault, e.g. CUDA after fork);
/// otherwise what the plugin did, e.g. "crashed with signal 11 (Segmentation
/// fault) while loading or initialising (in a probe process)". A child
/// still running at the timeout is killed.
std::string probePlugin(const std::string& path, Config& config, const LocalIdentity& self,
                        std::chrono::milliseconds timeout);

}  // namespace plugboard
