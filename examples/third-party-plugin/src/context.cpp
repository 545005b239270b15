#include "context.hpp"

#include <cstdlib>
#include <vector>

#include "error.hpp"

namespace shm {

Context::Context(const pb_host_services_v1* host) : host_(host) {
  SHM_CHECK(host, PB_ERR_INVALID, "shm init: host services must not be NULL");
  SHM_CHECK(host->abi_major == PB_TRANSPORT_ABI_MAJOR, PB_ERR_VERSION,
            "shm: the core speaks ABI " + std::to_string(host->abi_major) + "." + std::to_string(host->abi_minor) +
                ", this plugin speaks ABI " + std::to_string(PB_TRANSPORT_ABI_MAJOR) + "." +
                std::to_string(PB_TRANSPORT_ABI_MINOR));
  SHM_CHECK(PB_HAS_FIELD(host, pb_host_services_v1, hostname), PB_ERR_VERSION,
            "shm: the core's host services table is too small (" + std::to_string(host->struct_size) + " bytes)");
  declareSettings();
  settings_.ringBytes = readInt("ring_bytes", 64 << 10, uint64_t(1) << 30);
  SHM_CHECK((settings_.ringBytes & (settings_.ringBytes - 1)) == 0, PB_ERR_INVALID,
            "shm setting ring_bytes = " + std::to_string(settings_.ringBytes) + " is not a power of two");
  settings_.spinUs = readInt("spin_us", 0, 1000000);
}

void Context::declareSettings() {
  struct Decl {
    const char* key;
    const char* value;
    const char* doc;
  };
  const Decl decls[] = {
      {"ring_bytes", "4194304", "Bytes of each receiving ring in /dev/shm (power of two, 64 KiB..1 GiB)"},
      {"spin_us", "20", "Microseconds a receiver polls its ring before it sleeps on a futex"}};
  for (const auto& d : decls) {
    pb_setting_decl_v1 decl{};
    decl.struct_size = sizeof(decl);
    decl.key = d.key;
    decl.type = PB_SETTING_INT;
    decl.default_value = d.value;
    decl.doc = d.doc;
    decl.rank_local = 1;  // each rank sizes its own rings
    pb_status st = host_->declare_setting(host_->core, &decl);
    SHM_CHECK(st == PB_OK, PB_ERR_INVALID, std::string("shm: the core refused setting '") + d.key + "'");
  }
}

uint64_t Context::readInt(const char* key, uint64_t lo, uint64_t hi) const {
  std::vector<char> buf(64);
  size_t needed = 0;
  pb_status st = host_->get_setting(host_->core, key, buf.data(), buf.size(), &needed);
  if (st == PB_ERR_NOMEM) {
    buf.resize(needed);
    st = host_->get_setting(host_->core, key, buf.data(), buf.size(), &needed);
  }
  SHM_CHECK(st == PB_OK, PB_ERR_INVALID, std::string("shm: cannot read setting '") + key + "'");
  char* end = nullptr;
  unsigned long long v = std::strtoull(buf.data(), &end, 10);
  SHM_CHECK(buf[0] && !*end && v >= lo && v <= hi, PB_ERR_INVALID,
            std::string("shm setting ") + key + " = '" + buf.data() + "' is not an integer in " + std::to_string(lo) +
                ".." + std::to_string(hi));
  return v;
}

void Context::log(pb_log_level level, const std::string& message) const {
  if (host_->log) host_->log(host_->core, level, message.c_str());
}

void Context::signalLanded() const {
  if (PB_HAS_FIELD(host_, pb_host_services_v1, signal_landed) && host_->signal_landed)
    host_->signal_landed(host_->core);
}

void Context::setError(const std::string& reason) {
  std::lock_guard<std::mutex> lock(errorMu_);
  error_ = reason;
}

std::string Context::lastError() const {
  std::lock_guard<std::mutex> lock(errorMu_);
  return error_;
}

}  // namespace shm
