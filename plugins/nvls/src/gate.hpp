// The safety gate: whether the user's switches forbid NVLink multicast.
// Both group entries ask it first, on every call, before the CUDA driver
// is touched, so a process with NCCL_NVLS_ENABLE=0 or
// PLUGBOARD_NVLS_ENABLE=0 never creates (nor even queries) a multicast
// object through this plugin.
#pragma once

#include <string>

namespace plugboard::nvls {

/// The environment variables that can forbid multicast, in the order they
/// are checked. NCCL's own comes first: a job tuned for NCCL keeps its word.
inline constexpr const char* kGateVariables[] = {"NCCL_NVLS_ENABLE", "PLUGBOARD_NVLS_ENABLE"};

/// How the text of a switch reads.
enum class SwitchValue {
  Unset,      ///< NULL or only blanks: says nothing.
  On,         ///< 1, true, yes, on, or another non-zero integer (NCCL's 2 is "auto").
  Off,        ///< 0, false, no, off (any case, blanks around ignored).
  Unreadable  ///< Anything else: treated as off, the safe reading.
};

/// Reads one switch's text (NULL allowed).
SwitchValue readSwitch(const char* text);

/// Why multicast is forbidden, or "" when nothing forbids it. Reads each of
/// kGateVariables with getenv at every call (a value set after init
/// counts), then enableSetting, the plugin's `enable` setting as the core
/// resolved it (YAML or env; "" when the core gave none). Returns e.g.
/// "disabled by NCCL_NVLS_ENABLE=0" or "disabled by nvls.enable=off", with
/// the value as written. Never touches CUDA.
std::string disabledBy(const std::string& enableSetting);

}  // namespace plugboard::nvls
