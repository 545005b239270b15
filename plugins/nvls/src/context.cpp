#include "context.hpp"

#include "cuda_api.hpp"
#include "gate.hpp"

namespace plugboard::nvls {

Context::Context(const pb_host_services_v1* host)
    : host_(host, "nvls"), driver_([]() -> const NvlsDriver& { return realDriver(); }) {
  const auto& decls = settingDecls();
  host_.declare(decls.data(), decls.size());
  settings_ = readSettings([this](const char* key) { return host_.setting(key); });
  const std::string gate = disabledBy(settings_.enable);
  if (!gate.empty()) host_.log(PB_LOG_INFO, "nvls: multicast " + gate + "; every group set-up will be refused");
}

}  // namespace plugboard::nvls
