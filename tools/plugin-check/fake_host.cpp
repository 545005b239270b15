#include "fake_host.hpp"

#include <cstdio>
#include <cstring>

#include <unistd.h>

namespace plugboard::check {

std::string localHostName() {
  char name[256] = "";
  if (gethostname(name, sizeof(name) - 1) != 0 || !name[0]) return "localhost";
  return name;
}

PeerDescription::PeerDescription(int local, int peer, bool sameHost)
    : localHost(localHostName()), peerHost(sameHost ? localHost : localHost + "-elsewhere") {
  info.struct_size = sizeof(info);
  info.local_rank = local;
  info.peer_rank = peer;
  info.local_host = localHost.c_str();
  info.peer_host = peerHost.c_str();
  info.same_host = sameHost ? 1 : 0;
}

FakeHost::FakeHost(int rank, int nranks, std::string hostname, std::map<std::string, std::string> values,
                   bool verbose)
    : hostname_(std::move(hostname)), values_(std::move(values)), verbose_(verbose) {
  services_.struct_size = sizeof(services_);
  services_.abi_major = PB_TRANSPORT_ABI_MAJOR;
  services_.abi_minor = PB_TRANSPORT_ABI_MINOR;
  services_.core = this;
  services_.log = &FakeHost::log;
  services_.declare_setting = &FakeHost::declare;
  services_.get_setting = &FakeHost::get;
  services_.rank = rank;
  services_.nranks = nranks;
  services_.hostname = hostname_.c_str();
  services_.signal_landed = &FakeHost::signalLanded;
}

void FakeHost::actAsMinor0() {
  services_.abi_minor = 0;
  services_.struct_size = offsetof(pb_host_services_v1, signal_landed);
}

std::vector<DeclaredSetting> FakeHost::declared() const {
  std::lock_guard<std::mutex> lock(mu_);
  return declared_;
}

std::vector<std::string> FakeHost::violations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return violations_;
}

void FakeHost::violation(const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  violations_.push_back(what);
}

void FakeHost::log(void* core, pb_log_level level, const char* message) {
  auto* self = static_cast<FakeHost*>(core);
  if (!self->verbose_) return;
  const char* name = level == PB_LOG_WARN ? "WARN" : level == PB_LOG_INFO ? "INFO" : "TRACE";
  std::fprintf(stderr, "  [plugin rank %d %s] %s\n", self->services_.rank, name, message ? message : "(NULL)");
}

pb_status FakeHost::declare(void* core, const pb_setting_decl_v1* d) {
  auto* self = static_cast<FakeHost*>(core);
  if (!d || !d->key) {
    self->violation("declare_setting called with a NULL declaration or key");
    return PB_ERR_INVALID;
  }
  DeclaredSetting s;
  s.key = d->key;
  s.type = int(d->type);
  s.defaultWasNull = d->default_value == nullptr;
  s.defaultValue = d->default_value ? d->default_value : "";
  s.doc = d->doc ? d->doc : "";
  s.rankLocal = PB_HAS_FIELD(d, pb_setting_decl_v1, rank_local) ? d->rank_local : 0;
  std::lock_guard<std::mutex> lock(self->mu_);
  for (const auto& prior : self->declared_) {
    if (prior.key == s.key) {
      self->violations_.push_back("setting '" + s.key + "' declared twice");
      return PB_ERR_INVALID;
    }
  }
  self->declared_.push_back(std::move(s));
  return PB_OK;
}

pb_status FakeHost::get(void* core, const char* key, char* buf, size_t len, size_t* needed) {
  auto* self = static_cast<FakeHost*>(core);
  if (!key || !needed) {
    self->violation("get_setting called with a NULL key or NULL needed");
    return PB_ERR_INVALID;
  }
  std::string value;
  {
    std::lock_guard<std::mutex> lock(self->mu_);
    const DeclaredSetting* decl = nullptr;
    for (const auto& s : self->declared_)
      if (s.key == key) decl = &s;
    if (!decl) {
      self->violations_.push_back(std::string("get_setting('") + key + "') for a key the plugin never declared");
      return PB_ERR_INVALID;
    }
    auto it = self->values_.find(key);
    value = it != self->values_.end() ? it->second : decl->defaultValue;
  }
  *needed = value.size() + 1;
  if (!buf || len < *needed) return PB_ERR_NOMEM;
  std::memcpy(buf, value.c_str(), value.size() + 1);
  return PB_OK;
}

void FakeHost::signalLanded(void* core) {
  auto* self = static_cast<FakeHost*>(core);
  if (!PB_HAS_FIELD(&self->services_, pb_host_services_v1, signal_landed))
    self->violation("signal_landed called although the host's struct_size does not include it");
  self->landed_.fetch_add(1);
}

}  // namespace plugboard::check
