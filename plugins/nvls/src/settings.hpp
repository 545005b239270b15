// The nvls transport's own settings (nvls.*, PLUGBOARD_NVLS_*): the enable
// switch and the handle type. The group buffer's size and chunking are the
// core's (it asks for a size in pb_group_desc_v1), not settings here.
#pragma once

#include <plugboard/transport.h>

#include <functional>
#include <string>
#include <vector>

#include "handle_kind.hpp"

namespace plugboard::nvls {

/// The resolved nvls.* settings.
struct NvlsSettings {
  /// nvls.enable as text, as the core resolved it; gate.hpp's disabledBy
  /// reads it (with the environment, at every call).
  std::string enable = "1";
  /// nvls.handle_type.
  HandlePreference handleType = HandlePreference::Auto;
};

/// The declarations init() hands the core, in plugboard-info's order
/// (static storage).
const std::vector<pb_setting_decl_v1>& settingDecls();

/// Reads a declared setting's text by key ("" when the core has none).
using SettingLookup = std::function<std::string(const char* key)>;

/// Every setting through lookup. Throws Error(PB_ERR_INVALID) naming a bad
/// handle_type.
NvlsSettings readSettings(const SettingLookup& lookup);

}  // namespace plugboard::nvls
