// Declarations of the core's settings and of the environment variables the
// launcher reads outside the registry.
#pragma once

#include <string>
#include <vector>

#include "plugboard/config.hpp"

namespace plugboard {

/// Every core setting with its default and documentation.
const std::vector<SettingDecl>& coreSettingDecls();

/// PLUGBOARD_* variables that are not settings (launch and safety switches).
const std::vector<std::string>& launchVariables();

}  // namespace plugboard
