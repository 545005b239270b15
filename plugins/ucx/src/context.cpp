#include "context.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

#include "eager_rule.hpp"
#include "tls_list.hpp"
#include "error.hpp"
#include "wire.hpp"
#include "keep.hpp"
#include "worker.hpp"

namespace plugboard::ucx {

namespace {

/// Setting keys, plugin-relative (the core prefixes "ucx.").
constexpr const char* kTls = "tls";
constexpr const char* kOrdering = "ordering";
constexpr const char* kProtocol = "protocol";
constexpr const char* kAmEager = "am_eager";
constexpr const char* kProgressThread = "progress_thread";
constexpr const char* kLanes = "lanes";
constexpr const char* kLaneBytes = "lane_bytes";
constexpr const char* kTcpSegments = "tcp_segments";

/// Lanes `lanes=auto` opens over TCP on hosts with more than
/// kAutoLaneMinCores cores (measured: docs/perf, README "Lanes").
constexpr int kAutoLanes = 4;
constexpr unsigned kAutoLaneMinCores = 4;
/// Smallest lane_bytes accepted.
constexpr size_t kMinLaneBytes = 64 * 1024;

/// Control words per registered chunk (one 4 KiB page).
constexpr size_t kControlWordsPerChunk = 512;
/// Room left in max_address_size / max_rkey_size beyond what the probes
/// measured, for keys of other memory types and transports that pack
/// per-region data.
constexpr size_t kBlobSlack = 256;

/// Owns a ucp_config_t for the duration of initUcp().
struct ConfigHolder {
  ucp_config_t* config = nullptr;
  ~ConfigHolder() {
    if (config) ucp_config_release(config);
  }
};

/// UCX's TCP segment sizes that tcp_segments=auto asks for (UCX 1.13-1.16
/// defaults: 8 KiB sent, 64 KiB received per segment). Eager messages are
/// copied through these segments; larger ones took the 2-rank 16 MiB host
/// allreduce from 1.97-2.18x to 1.35-1.44x the ethernet plugin's time on 2
/// cores (docs/perf/2026-11-29-session38-doubling-in-place-and-ucx-segments.md).
/// The names are UCX's TCP transport's options (UCX_TCP_TX_SEG_SIZE in the
/// environment): ucp_config_modify hands them to every transport that has
/// them, which is TCP alone.
constexpr const char* kAutoTcpSegments[][2] = {{"TX_SEG_SIZE", "64k"}, {"RX_SEG_SIZE", "256k"}};

}  // namespace

Context::Context(const pb_host_services_v1* host) : host_(host, "ucx") {
  declareSettings();
  settings_ = readSettings();  // Fail at init, not at the first connection, on a bad value.
  try {
    initUcp();
    surveyResources();
    initWorker();
    initProtocol();
    openLanes();
    {
      std::lock_guard<std::mutex> lock(workerMu_);
      addControlChunk();
    }
    if (settings_.progressThread) startProgressThread();
  } catch (...) {
    teardown();
    throw;
  }
  summary_ = std::string("UCX ") + ucp_get_version_string() + ", transports " + tlsSource_ + ", resources " +
             resources_ + " (cost " + std::to_string(connectCost()) + ")" +
             (activeMessages() ? ", operations as active messages (ucx.protocol=" + settings_.protocolText +
                                     ", am_eager=" + settings_.amEager + ")"
                               : std::string(", operations as RMA (ucx.protocol=") + settings_.protocolText +
                                     "), signal ordering by " +
                                     (settings_.ordering == Ordering::Flush ? "ep flush" : "worker fence")) +
             ", progress " + (settings_.progressThread ? "thread + proxy" : "by proxy only") + ", memory types " +
             memoryTypesText();
  log(PB_LOG_INFO, summary_);
}

Context::~Context() { teardown(); }

void Context::teardown() noexcept {
  stopProgressThread();
  lanes_.clear();  // their threads take workerMu_: never held here
  std::lock_guard<std::mutex> lock(workerMu_);
  if (worker_ && unfinishedCloses_ > 0) {
    keepForeverLocked(unfinishedCloses_, "endpoint close(s) still unfinished at finalize");
    return;
  }
  if (worker_ && !drainReceivesLocked()) {
    keepForeverLocked(pendingReceives_, "rendezvous receive(s) still pending at finalize after 1 s");
    return;
  }
  if (ucp_) {
    regions_.clear(*this);
    for (auto& chunk : controlChunks_)
      if (chunk->memh) ucp_mem_unmap(ucp_, chunk->memh);
  }
  controlChunks_.clear();
  if (worker_) ucp_worker_destroy(worker_);
  worker_ = nullptr;
  // Endpoint handlers can only run inside worker calls: none are left.
  guards_.clear();
  if (ucp_) ucp_cleanup(ucp_);
  ucp_ = nullptr;
}

bool Context::drainReceivesLocked() noexcept {
  // A peer that closed while its rendezvous message was half fetched never
  // finishes it; UCX fails it once progress notices the closed endpoint.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (pendingReceives_ > 0 && std::chrono::steady_clock::now() < deadline) progressLocked();
  return pendingReceives_ == 0;
}

void Context::keepForeverLocked(int count, const char* what) noexcept {
  try {
    log(PB_LOG_WARN, "ucx: " + std::to_string(count) + " " + what + "; keeping the UCX worker (destroying it with requests on its endpoints "
                     "aborts inside UCX)");
  } catch (...) {
  }
  keepUntilExit(std::move(guards_));
  keepUntilExit(std::move(controlChunks_));
  guards_.clear();
  controlChunks_.clear();
  regions_.forget();
  worker_ = nullptr;
  ucp_ = nullptr;
}

void Context::declareSettings() const {
  const pb_setting_decl_v1 decls[] = {
      {sizeof(pb_setting_decl_v1), kTls, PB_SETTING_STRING, "",
       "UCX transports (UCX_TLS syntax, e.g. 'tcp' or 'rc,sm'); used only when the UCX_TLS "
       "environment variable is unset, which wins; empty: UCX's own default",
       0},
      {sizeof(pb_setting_decl_v1), kProtocol, PB_SETTING_STRING, "auto",
       "How operations travel: 'am' (one UCP active message per write/signal, stored and added by the "
       "target; host memory only), 'rma' (ucp_put_nbx + atomic add, ordered by ucx.ordering; GPU memory "
       "where UCX supports it) or 'auto' (am unless UCX can register CUDA memory)",
       0},
      {sizeof(pb_setting_decl_v1), kAmEager, PB_SETTING_STRING, "auto",
       "With ucx.protocol=am: '1' sends every message eagerly (UCP_AM_SEND_FLAG_EAGER), '0' lets UCX "
       "choose rendezvous for large ones (received straight into place), 'auto': where UCX's only way "
       "between processes is TCP, eager only below 256 KiB (its rendezvous measured slower below), "
       "0 otherwise; a byte count N: messages under N bytes eagerly, larger ones as UCX chooses",
       0},
      {sizeof(pb_setting_decl_v1), kOrdering, PB_SETTING_STRING, "flush",
       "With ucx.protocol=rma, how a signal waits for earlier writes: 'flush' (post the atomic after "
       "an ep flush completes; correct on every UCX) or 'fence' (ucp_worker_fence; faster, relies on "
       "UCX ordering across its lanes)",
       0},
      {sizeof(pb_setting_decl_v1), kProgressThread, PB_SETTING_BOOL, "1",
       "Progress the UCX worker from a plugin thread that sleeps on its event fd, so peers' "
       "writes and signals land without waiting for the core to poll; 0: only proxy_progress",
       1},
      {sizeof(pb_setting_decl_v1), kLanes, PB_SETTING_STRING, "auto",
       "Extra UCP workers, each with a context and thread of its own, that carry one piece each of "
       "writes of at least ucx.lane_bytes (ucx.protocol=am), so their copies through TCP run on several "
       "cores: 0-16, or 'auto' (4 where UCX's only way between processes is TCP on hosts with more than "
       "4 cores, else 0). A connection uses as many as both ends have",
       0},
      {sizeof(pb_setting_decl_v1), kLaneBytes, PB_SETTING_INT, "262144",
       "Writes of at least this many bytes (65536 or more) go as one piece per lane", 0},
      {sizeof(pb_setting_decl_v1), kTcpSegments, PB_SETTING_STRING, "auto",
       "UCX's TCP segment sizes: 'auto' asks for 64k sent and 256k received per segment (UCX's defaults "
       "8k and 64k) where UCX may use TCP, each unless the environment sets it (UCX_TCP_TX_SEG_SIZE, "
       "UCX_TCP_RX_SEG_SIZE, which win); 'ucx' leaves both to UCX",
       0},
  };
  host_.declare(decls, sizeof(decls) / sizeof(decls[0]));
}

Settings Context::readSettings() const {
  Settings s;
  s.tls = host_.setting(kTls);
  std::string ordering = host_.setting(kOrdering);
  if (ordering.empty() || ordering == "flush") {
    s.ordering = Ordering::Flush;
  } else if (ordering == "fence") {
    s.ordering = Ordering::Fence;
  } else {
    throw Error(PB_ERR_INVALID, "ucx.ordering = '" + ordering + "' is neither 'flush' nor 'fence'");
  }
  s.protocolText = host_.setting(kProtocol);
  if (s.protocolText.empty()) s.protocolText = "auto";
  if (s.protocolText != "auto" && s.protocolText != "am" && s.protocolText != "rma")
    throw Error(PB_ERR_INVALID, "ucx.protocol = '" + s.protocolText + "' is none of 'auto', 'am', 'rma'");
  s.amEager = host_.setting(kAmEager);
  if (s.amEager.empty()) s.amEager = "auto";
  size_t eagerBytes = 0;
  if (s.amEager != "auto" && s.amEager != "1" && s.amEager != "0" && !eagerByteCount(s.amEager, &eagerBytes))
    throw Error(PB_ERR_INVALID, "ucx.am_eager = '" + s.amEager +
                                    "' is none of 'auto', '1', '0' or a byte count (2 to 2^40)");
  std::string thread = host_.setting(kProgressThread);
  for (auto& ch : thread) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (thread.empty() || thread == "1" || thread == "true" || thread == "yes" || thread == "on") {
    s.progressThread = true;
  } else if (thread == "0" || thread == "false" || thread == "no" || thread == "off") {
    s.progressThread = false;
  } else {
    throw Error(PB_ERR_INVALID, "ucx.progress_thread = '" + thread + "' is not a boolean");
  }
  s.lanesText = host_.setting(kLanes);
  if (s.lanesText.empty()) s.lanesText = "auto";
  if (s.lanesText != "auto" &&
      (s.lanesText.size() > 2 || s.lanesText.find_first_not_of("0123456789") != std::string::npos ||
       std::stoul(s.lanesText) > wire::kMaxLanes))
    throw Error(PB_ERR_INVALID, "ucx.lanes = '" + s.lanesText + "' is neither 'auto' nor a count from 0 to " +
                                    std::to_string(wire::kMaxLanes));
  const std::string laneBytes = host_.setting(kLaneBytes);
  if (!laneBytes.empty()) {
    if (laneBytes.size() > 13 || laneBytes.find_first_not_of("0123456789") != std::string::npos ||
        std::stoull(laneBytes) < kMinLaneBytes)
      throw Error(PB_ERR_INVALID, "ucx.lane_bytes = '" + laneBytes + "' is not a byte count of at least " +
                                      std::to_string(kMinLaneBytes));
    s.laneBytes = static_cast<size_t>(std::stoull(laneBytes));
  }
  const std::string segments = host_.setting(kTcpSegments);
  if (!segments.empty() && segments != "auto" && segments != "ucx")
    throw Error(PB_ERR_INVALID, "ucx.tcp_segments = '" + segments + "' is neither 'auto' nor 'ucx'");
  s.tcpSegments = segments != "ucx";
  return s;
}

void Context::useTcpSegments(ucp_config_t* config, bool logChoice) const {
  if (!settings_.tcpSegments || !tlsMayUseTcp(effectiveTls_)) return;
  for (const auto& [name, value] : kAutoTcpSegments) {
    const char* tcpEnv = std::getenv((std::string("UCX_TCP_") + name).c_str());
    const char* anyEnv = std::getenv((std::string("UCX_") + name).c_str());
    if ((tcpEnv && *tcpEnv) || (anyEnv && *anyEnv)) continue;  // the user's choice
    const ucs_status_t st = ucp_config_modify(config, name, value);
    if (st != UCS_OK && logChoice)  // a UCX whose TCP transport lacks the option
      log(PB_LOG_INFO, ucsText(std::string("ucx: ") + name + "=" + value + " not accepted", st));
  }
}

void Context::useProtocolV1(ucp_config_t* config, bool logChoice) const {
  // UCX 1.16 (Ubuntu 24.04's) selects protocols v2 by default, which found
  // no protocol for a 64-bit atomic add posted to a host-memory peer on the
  // same node (UCX ERROR "cannot find remote protocol ... amo_post"): every
  // signal was cancelled. Protocols v1 emulate it over active messages.
  // Measured on the lent GPU machines (docs/perf, issue notes). A user who
  // sets UCX_PROTO_ENABLE keeps their choice.
  const char* env = std::getenv("UCX_PROTO_ENABLE");
  if (env && *env) {
    if (logChoice)
      log(PB_LOG_WARN, std::string("ucx: UCX_PROTO_ENABLE=") + env +
                         " from the environment is kept; with protocols v2, UCX 1.16 cancelled every intra-node "
                         "signal (atomic add) in our tests");
    return;
  }
  const ucs_status_t st = ucp_config_modify(config, "PROTO_ENABLE", "n");
  if (st != UCS_OK && logChoice)  // a UCX without the option has only protocols v1
    log(PB_LOG_INFO, ucsText("ucx: PROTO_ENABLE=n not accepted (older UCX)", st));
}

void Context::initUcp() {
  // The user's UCX_TLS wins: UCX users expect it to, and ucp_config_read
  // applies it.
  const char* env = std::getenv("UCX_TLS");
  if (env && *env) {
    effectiveTls_ = env;
    tlsSource_ = std::string("UCX_TLS=") + env + " (environment)";
    if (!settings_.tls.empty() && settings_.tls != env)
      log(PB_LOG_WARN, "ucx.tls = '" + settings_.tls + "' is ignored: the environment sets UCX_TLS=" + env);
  } else if (!settings_.tls.empty()) {
    effectiveTls_ = settings_.tls;
    tlsSource_ = "UCX_TLS=" + settings_.tls + " (ucx.tls setting)";
  } else {
    tlsSource_ = "UCX default (UCX_TLS unset)";
  }
  // RMA stays on with active messages: the close marker is a put.
  ucp_ = newUcpContext(UCP_FEATURE_RMA | UCP_FEATURE_AMO64 | UCP_FEATURE_AM |
                           (settings_.progressThread ? UCP_FEATURE_WAKEUP : 0),
                       "with RMA and 64-bit atomics", true);
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  ucs_status_t st = ucp_context_query(ucp_, &attr);
  PB_UCX_CHECK(st == UCS_OK, PB_ERR_SYSTEM, ucsText("ucx: ucp_context_query failed", st));
  memoryTypes_ = attr.memory_types;
}

ucp_context_h Context::newUcpContext(uint64_t features, const std::string& what, bool logChoice) const {
  ConfigHolder config;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config.config);
  PB_UCX_CHECK(st == UCS_OK, PB_ERR_SYSTEM, ucsText("ucx: ucp_config_read failed", st));
  const char* env = std::getenv("UCX_TLS");
  if (!(env && *env) && !settings_.tls.empty()) {
    st = ucp_config_modify(config.config, "TLS", settings_.tls.c_str());
    PB_UCX_CHECK(st == UCS_OK, PB_ERR_INVALID, ucsText("ucx.tls = '" + settings_.tls + "' was refused by UCX", st));
  }
  useProtocolV1(config.config, logChoice);
  useTcpSegments(config.config, logChoice);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
  params.features = features;
  params.estimated_num_eps = static_cast<size_t>(std::max(host_.nranks(), 1));
  ucp_context_h ucp = nullptr;
  st = ucp_init(&params, config.config, &ucp);
  PB_UCX_CHECK(st == UCS_OK, PB_ERR_SYSTEM,
               ucsText("ucx: ucp_init " + what + " (transports " + tlsSource_ + ") failed", st));
  return ucp;
}

void Context::openLanes() {
  int count = 0;
  if (settings_.lanesText == "auto")
    count = activeMessages() && networkOnlyTcp_ && std::thread::hardware_concurrency() > kAutoLaneMinCores
                ? kAutoLanes
                : 0;
  else
    count = std::stoi(settings_.lanesText);
  PB_UCX_CHECK(count == 0 || activeMessages(), PB_ERR_INVALID,
               "ucx.lanes = " + settings_.lanesText + " needs ucx.protocol=am (lanes carry active messages), and "
               "operations travel as RMA here");
  for (int i = 0; i < count; ++i) {
    lanes_.emplace_back(nullptr);  // room first: from its constructor on, the Lane owns the UCP context
    lanes_.back() = std::make_unique<Lane>(
        *this, i, newUcpContext(UCP_FEATURE_AM | UCP_FEATURE_WAKEUP, "for lane " + std::to_string(i), false));
  }
  if (count)
    log(PB_LOG_INFO, "ucx: " + std::to_string(count) + " lane(s) for writes of at least " +
                         std::to_string(settings_.laneBytes) + " bytes (ucx.lanes=" + settings_.lanesText + ")");
}

void Context::surveyResources() {
  // UCX has no query for its transport resources; its context dump lists
  // them as "#      resource 1  :  md 1  dev 1  flags -- tcp/lo".
  char* text = nullptr;
  size_t size = 0;
  FILE* stream = open_memstream(&text, &size);
  if (!stream) return;
  ucp_context_print_info(ucp_, stream);
  std::fclose(stream);
  std::istringstream in(std::string(text, size));
  std::free(text);
  static const char* const kHostLocalOrTcp[] = {"self", "tcp", "sysv", "posix", "cma", "knem", "xpmem"};
  // Their memory domains register host memory without pinning it (ucp_mem_map
  // measured 1.7-5.2 us for 4 KiB - 16 MiB over tcp); knem and xpmem pin or attach.
  static const char* const kCheapRegistration[] = {"self", "tcp", "sysv", "posix", "cma"};
  std::vector<std::string> names;
  bool other = false;
  bool pins = false;
  std::string line;
  while (std::getline(in, line)) {
    auto at = line.find("flags -- ");
    if (line.find("resource") == std::string::npos || at == std::string::npos) continue;
    std::string tl = line.substr(at + 9);
    tl = tl.substr(0, tl.find('/'));
    if (tl.empty()) continue;
    if (std::find(names.begin(), names.end(), tl) == names.end()) names.push_back(tl);
    other = other || std::none_of(std::begin(kHostLocalOrTcp), std::end(kHostLocalOrTcp),
                                  [&](const char* n) { return tl == n; });
    pins = pins || std::none_of(std::begin(kCheapRegistration), std::end(kCheapRegistration),
                                [&](const char* n) { return tl == n; });
  }
  for (const auto& n : names) resources_ += (resources_.empty() ? "" : ", ") + n;
  if (resources_.empty()) resources_ = "(not listed)";
  // Unknown (nothing parsed) counts as "may have RDMA": keep the lower cost.
  networkOnlyTcp_ = !names.empty() && !other;
  registersCheaply_ = !names.empty() && !pins;
}

void Context::initWorker() {
  // workerMu_ serializes every call.
  worker_ = createWorker(ucp_, &workerAddress_, "ucx (transports " + tlsSource_ + ")");
}

size_t Context::eagerBelow() const {
  return ucx::eagerBelow(settings_.amEager, networkOnlyTcp_);
}

void Context::initProtocol() {
  const bool am = settings_.protocolText == "am" || (settings_.protocolText == "auto" && !supportsCuda());
  settings_.protocol = am ? Protocol::ActiveMessage : Protocol::Rma;
  if (!am) return;
  setAmHandler(worker_, wire::kAmId, &Context::onAm, this, "ucx");
}

uint32_t Context::addAmTarget(Connection* conn) {
  uint32_t token = nextToken_++;
  if (nextToken_ == 0) nextToken_ = 1;  // 0 never names a connection
  amTargets_[token] = conn;
  return token;
}

void Context::removeAmTarget(uint32_t token) { amTargets_.erase(token); }

void Context::addControlChunk() {
  auto chunk = std::make_unique<ControlChunk>();
  chunk->words.reset(new uint64_t[kControlWordsPerChunk]());
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  params.address = chunk->words.get();
  params.length = kControlWordsPerChunk * sizeof(uint64_t);
  ucs_status_t st = ucp_mem_map(ucp_, &params, &chunk->memh);
  PB_UCX_CHECK(st == UCS_OK, PB_ERR_SYSTEM, ucsText("ucx: ucp_mem_map of the control words failed", st));
  void* packed = nullptr;
  size_t packedLen = 0;
  st = ucp_rkey_pack(ucp_, chunk->memh, &packed, &packedLen);
  if (st != UCS_OK) {
    ucp_mem_unmap(ucp_, chunk->memh);
    throw Error(PB_ERR_SYSTEM, ucsText("ucx: ucp_rkey_pack of the control words failed", st));
  }
  chunk->rkey.assign(static_cast<uint8_t*>(packed), static_cast<uint8_t*>(packed) + packedLen);
  ucp_rkey_buffer_release(packed);
  controlChunks_.push_back(std::move(chunk));
}

ControlSlot Context::newControlSlot() {
  if (controlChunks_.empty() || controlChunks_.back()->used == kControlWordsPerChunk) addControlChunk();
  ControlChunk& chunk = *controlChunks_.back();
  return ControlSlot{&chunk.words[chunk.used++], &chunk.rkey};
}

EndpointGuard* Context::newEndpointGuard(void* owner) {
  guards_.push_back(std::make_unique<EndpointGuard>());
  guards_.back()->owner = owner;
  return guards_.back().get();
}

unsigned Context::progressLocked() {
  unsigned total = 0;
  // Drain what is ready, bounded so one busy peer cannot starve the caller.
  for (int i = 0; i < 64; ++i) {
    unsigned n = ucp_worker_progress(worker_);
    if (n == 0) break;
    total += n;
  }
  return total;
}

void Context::attach(Connection* conn) { attached_.push_back(conn); }

void Context::detach(Connection* conn) {
  attached_.erase(std::remove(attached_.begin(), attached_.end(), conn), attached_.end());
}

void Context::startProgressThread() {
  int workerFd = -1;
  ucs_status_t st = ucp_worker_get_efd(worker_, &workerFd);
  PB_UCX_CHECK(st == UCS_OK, PB_ERR_SYSTEM,
               ucsText("ucx: ucp_worker_get_efd failed (set ucx.progress_thread=0 to poll instead)", st));
  epollFd_ = epoll_create1(EPOLL_CLOEXEC);
  stopFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  PB_UCX_CHECK(epollFd_ >= 0 && stopFd_ >= 0, PB_ERR_SYSTEM,
               std::string("ucx: cannot create the progress thread's epoll/eventfd: ") + std::strerror(errno));
  for (int fd : {workerFd, stopFd_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    PB_UCX_CHECK(epoll_ctl(epollFd_, EPOLL_CTL_ADD, fd, &ev) == 0, PB_ERR_SYSTEM,
                 std::string("ucx: epoll_ctl for the progress thread: ") + std::strerror(errno));
  }
  progressThread_ = std::thread(&Context::progressLoop, this);
}

void Context::stopProgressThread() noexcept {
  stopping_ = true;
  if (progressThread_.joinable()) {
    uint64_t one = 1;
    ssize_t ignored = ::write(stopFd_, &one, sizeof(one));
    (void)ignored;
    progressThread_.join();
  }
  for (int* fd : {&epollFd_, &stopFd_})
    if (*fd >= 0) {
      ::close(*fd);
      *fd = -1;
    }
}

void Context::notifyLanded() const {
  host_.signalLanded();
}

bool Context::supportsCuda() const { return (memoryTypes_ & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0; }

std::string Context::memoryTypesText() const {
  static const std::pair<ucs_memory_type_t, const char*> names[] = {
      {UCS_MEMORY_TYPE_HOST, "host"},         {UCS_MEMORY_TYPE_CUDA, "cuda"},
      {UCS_MEMORY_TYPE_CUDA_MANAGED, "cuda-managed"}, {UCS_MEMORY_TYPE_ROCM, "rocm"},
      {UCS_MEMORY_TYPE_ROCM_MANAGED, "rocm-managed"}};
  std::string out;
  for (const auto& [type, name] : names)
    if (memoryTypes_ & UCS_BIT(type)) out += (out.empty() ? "" : ", ") + std::string(name);
  return out.empty() ? "none" : out;
}

size_t Context::addressSize() const {
  size_t lanes = 0;
  for (const auto& lane : lanes_) lanes += 4 + lane->address().size();
  return wire::AddressBlob::kHeaderSize + workerAddress_.size() + controlChunks_.front()->rkey.size() + lanes;
}

size_t Context::maxAddressSize() const { return addressSize() + kBlobSlack; }

size_t Context::maxRkeySize() const {
  // Host regions pack like the control words; other memory types may carry more.
  return wire::PackedRkey::kHeaderSize + controlChunks_.front()->rkey.size() + kBlobSlack;
}

std::string Context::unreachableReason(const PeerInfo& peer) const {
  if (peer.sameHost || effectiveTls_.empty()) return "";
  // Only shared-memory and loopback transports listed: nothing leaves the host.
  static const char* const kHostOnly[] = {"self", "sm", "shm", "posix", "sysv", "cma", "knem", "xpmem",
                                          "cuda_ipc", "cuda_copy", "cuda", "rocm_ipc", "rocm_copy", "rocm"};
  auto items = splitList(effectiveTls_);
  for (const auto& item : items) {
    if (item[0] == '^') return "";  // an exclusion list leaves UCX's network transports in
    bool hostOnly = std::any_of(std::begin(kHostOnly), std::end(kHostOnly),
                                [&](const char* name) { return item == name; });
    if (!hostOnly) return "";
  }
  return "UCX_TLS=" + effectiveTls_ + " has no transport that leaves the host, but " + peer.describe() +
         " is on another host (this is host " + host_.hostname() + ")";
}

}  // namespace plugboard::ucx
