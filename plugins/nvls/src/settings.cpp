#include "settings.hpp"

namespace plugboard::nvls {

const std::vector<pb_setting_decl_v1>& settingDecls() {
  static const std::vector<pb_setting_decl_v1> decls = {
      {sizeof(pb_setting_decl_v1), "enable", PB_SETTING_BOOL, "1",
       "0 forbids NVLink multicast: no multicast object is ever created or queried (NCCL_NVLS_ENABLE=0 does the "
       "same and is checked first, at every group set-up)",
       0},
      {sizeof(pb_setting_decl_v1), "handle_type", PB_SETTING_STRING, "auto",
       "how the multicast object reaches the other ranks: auto (fabric where every GPU supports it, else "
       "posix_fd), fabric, or posix_fd (pidfd_getfd, one machine)",
       0},
  };
  return decls;
}

NvlsSettings readSettings(const SettingLookup& lookup) {
  NvlsSettings s;
  s.enable = lookup("enable");
  s.handleType = parseHandlePreference(lookup("handle_type"));
  return s;
}

}  // namespace plugboard::nvls
