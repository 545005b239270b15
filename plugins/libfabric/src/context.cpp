// Context set-up: settings, provider choice and the libfabric objects.
// Completion-queue handling is in progress.cpp.
#include "context.hpp"

#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <type_traits>

#include "connection.hpp"
#include "endpoint.hpp"
#include "error.hpp"
#include "fabric_library.hpp"

namespace plugboard::libfabric {

namespace {

/// Setting keys, plugin-relative (the core prefixes "libfabric.").
constexpr const char* kProvider = "provider";
constexpr const char* kIface = "iface";
constexpr const char* kSignal = "signal";
constexpr const char* kFragmentBytes = "fragment_bytes";
constexpr const char* kMessageWriteBytes = "message_write_bytes";
constexpr const char* kLanes = "lanes";
constexpr const char* kLaneBytes = "lane_bytes";

/// libfabric API version asked for: the one of the headers built against.
constexpr uint32_t kApiVersion = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
/// Writes larger than this are split even where the provider allows more.
constexpr uint64_t kMaxFragmentCap = 1ull << 30;
/// Control-message slots (signal operands, outgoing messages) and receive
/// buffers per context.
constexpr size_t kSlots = 128;
constexpr size_t kReceives = 128;

/// The capabilities every provider must have: one-sided writes into
/// registered memory and messages (hellos, and signals without atomics).
void baseHints(fi_info* h) {
  h->ep_attr->type = FI_EP_RDM;
  h->caps = FI_RMA | FI_WRITE | FI_REMOTE_WRITE | FI_MSG | FI_SEND | FI_RECV;
  // A write's completion must mean its data is at the target: a signal is
  // only sent after every earlier write completed (see README.md).
  h->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->domain_attr->mr_mode =
      FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT | FI_MR_HMEM;
  h->domain_attr->threading = FI_THREAD_DOMAIN;  // every call is under Context::mutex()
}

/// Environment variables ofi_rxm reads once per process, when libfabric
/// initialises its providers (the first fi_getinfo): the largest message it
/// sends eagerly, one packet into a bounce buffer the target posted (16 KiB
/// when unset; larger ones take its rendezvous round trip), and how many of
/// those buffers it posts per connection (128 when unset).
constexpr const char* kRxmBufferSize = "FI_OFI_RXM_BUFFER_SIZE";
constexpr const char* kRxmMsgRxSize = "FI_OFI_RXM_MSG_RX_SIZE";
/// Bounce buffers per connection asked for with kMessageBytes-sized buffers:
/// with rxm's default of 128 a 4-rank job grew from 112 to 195 MB a rank,
/// with 32 it takes 97 MB.
constexpr const char* kRxmMsgRxWanted = "32";

/// Sets name to value unless the environment has it; says which.
std::string defaultEnv(const char* name, const std::string& value) {
  const char* have = std::getenv(name);
  if (have && *have) return std::string(name) + "=" + have + " (environment)";
  setenv(name, value.c_str(), 0);
  return std::string(name) + "=" + value + " (set by the plugin)";
}

/// Before the first fi_getinfo: asks ofi_rxm for eager messages of
/// wire::kMessageBytes, and fewer bounce buffers per connection to pay for
/// their size, where the environment leaves either unset (a user's value
/// always wins). Returns the eager size rxm will use, at most kMessageBytes,
/// and where it came from. If libfabric was initialised earlier in the
/// process rxm keeps its defaults: larger messages then cost a round trip,
/// nothing worse.
const RxmEager& askRxmForWholeMessages() {
  static std::once_flag once;
  static RxmEager eager;
  std::call_once(once, [] {
    eager.bytes = wire::kMessageBytes;
    if (const char* v = std::getenv(kRxmBufferSize); v && *v) {
      char* end = nullptr;
      errno = 0;
      unsigned long long n = std::strtoull(v, &end, 10);
      eager.bytes = std::min<uint64_t>(errno == 0 && *end == '\0' ? n : 16384, wire::kMessageBytes);
    }
    eager.source = defaultEnv(kRxmBufferSize, std::to_string(wire::kMessageBytes)) + ", " +
                   defaultEnv(kRxmMsgRxSize, kRxmMsgRxWanted);
  });
  return eager;
}

/// fi_allocinfo as a unique_ptr.
std::unique_ptr<fi_info, void (*)(fi_info*)> allocInfo() {
  std::unique_ptr<fi_info, void (*)(fi_info*)> h(fi_allocinfo(), fi_freeinfo);
  OFI_CHECK(h, PB_ERR_NOMEM, "libfabric: fi_allocinfo failed");
  return h;
}

}  // namespace

Context::Context(const pb_host_services_v1* host) : host_(host, "libfabric") {
  declareSettings();
  settings_ = readSettings();
  if (const std::string why = reasonToDecline(); !why.empty()) throw Error(PB_ERR_UNSUPPORTED, why);
  loadFabricLibrary();
  const RxmEager& eager = askRxmForWholeMessages();

  // Every provider that can do the basics, then the one the settings pick.
  auto hints = allocInfo();
  baseHints(hints.get());
  fi_info* offered = nullptr;
  int rc = fi_getinfo(kApiVersion, nullptr, nullptr, 0, hints.get(), &offered);
  std::unique_ptr<fi_info, void (*)(fi_info*)> offer(offered, fi_freeinfo);
  OFI_CHECK(rc != -FI_ENODATA, PB_ERR_UNSUPPORTED,
            "libfabric: fi_getinfo finds no provider with reliable datagram endpoints (FI_EP_RDM), RMA writes, "
            "messages and delivery-complete writes on this host" +
                std::string(std::getenv("FI_PROVIDER") ? std::string(" (FI_PROVIDER=") + std::getenv("FI_PROVIDER") + ")"
                                                       : ""));
  fiCheck(rc, "libfabric: fi_getinfo");
  std::string why;
  const fi_info* chosen = chooseInfo(offer.get(), settings_.provider, settings_.iface, &why);
  OFI_CHECK(chosen, PB_ERR_UNSUPPORTED, "libfabric: " + why);

  // The same provider, domain and fabric again, with the optional
  // capabilities it has: atomics for signals, FI_HMEM for CUDA memory.
  bool wantAtomic = settings_.signal != "message";
  const uint64_t extras[] = {FI_ATOMIC | FI_HMEM, FI_ATOMIC, FI_HMEM, 0};
  for (uint64_t extra : extras) {
    if ((extra & FI_ATOMIC) && !wantAtomic) continue;
    auto refined = allocInfo();
    baseHints(refined.get());
    refined->caps |= extra;
    refined->addr_format = chosen->addr_format;
    refined->fabric_attr->prov_name = strdup(chosen->fabric_attr->prov_name);
    refined->fabric_attr->name = strdup(chosen->fabric_attr->name);
    refined->domain_attr->name = strdup(chosen->domain_attr->name);
    fi_info* got = nullptr;
    if (fi_getinfo(kApiVersion, nullptr, nullptr, 0, refined.get(), &got) != 0) continue;
    std::unique_ptr<fi_info, void (*)(fi_info*)> list(got, fi_freeinfo);
    // Layered providers may ignore the name hints: keep only the same one.
    for (const fi_info* i = list.get(); i && !info_; i = i->next)
      if (std::strcmp(i->fabric_attr->prov_name, chosen->fabric_attr->prov_name) == 0 &&
          std::strcmp(i->fabric_attr->name, chosen->fabric_attr->name) == 0 &&
          std::strcmp(i->domain_attr->name, chosen->domain_attr->name) == 0 && i->addr_format == chosen->addr_format)
        info_.reset(fi_dupinfo(i));
    if (info_) break;
  }
  if (!info_) info_.reset(fi_dupinfo(chosen));
  OFI_CHECK(info_, PB_ERR_NOMEM, "libfabric: fi_dupinfo failed");
  choice_ = ProviderChoice{info_->fabric_attr->prov_name, info_->fabric_attr->name, info_->domain_attr->name};
  hmem_ = (info_->caps & FI_HMEM) != 0;
  mrMode_ = info_->domain_attr->mr_mode;
  addrFormat_ = info_->addr_format;
  maxFragment_ = std::min<uint64_t>(info_->ep_attr->max_msg_size, kMaxFragmentCap);
  if (settings_.fragmentBytes) maxFragment_ = std::min(maxFragment_, settings_.fragmentBytes);
  uint64_t message = std::min<uint64_t>(info_->ep_attr->max_msg_size, wire::kMessageBytes);
  const bool rxm = choice_.name.find("ofi_rxm") != std::string::npos;
  if (rxm) message = std::min(message, eager.bytes);
  const uint64_t header = wire::Message::kSize + wire::WriteExt::kSize;
  inlineWriteMax_ = message > header ? message - header : 0;
  messageWriteMax_ = inlineWriteMax_ ? std::max(inlineWriteMax_, settings_.messageWriteBytes) : 0;

  openEndpoint(info_.get());
  chooseSignalMode();
  setUpMessages();
  openLanes();
  bool manual = info_->domain_attr->data_progress == FI_PROGRESS_MANUAL;
  summary_ = "provider " + choice_.name + ", fabric " + choice_.fabric + ", domain " + choice_.domain +
             "; signals by " + (signalMode_ == SignalMode::Atomic ? "fi_atomic FI_SUM" : "control message") +
             " after delivery-complete writes; " + (hmem_ ? "FI_HMEM" : "no FI_HMEM") + "; " +
             (manual ? "manual" : "auto") + " data progress; messages of up to " + std::to_string(message) +
             " bytes" + (rxm ? ", rxm settings " + eager.source : "") + "; " + std::to_string(lanes_.size()) +
             " lane(s) for writes of at least " + std::to_string(settings_.laneBytes) + " bytes";
  log(PB_LOG_INFO, "rank " + std::to_string(host_.rank()) + ": libfabric " + summary_);
}

std::string Context::describe() const {
  std::string out = summary_;
  for (size_t at = out.find("; "); at != std::string::npos; at = out.find("; ", at)) out.replace(at, 2, "\n");
  return out;
}

Context::~Context() {
  // Reverse order of creation; records and registrations before the domain.
  // The lanes' threads first: they call back into this context.
  for (auto& lane : lanes_) lane->stop();
  endpoint_.ep.reset();
  sendSlab_.mr.reset();
  recvSlab_.mr.reset();
  regions_ = RegionRegistry();
  lanes_.clear();
  endpoint_.av.reset();
  endpoint_.cq.reset();
  endpoint_.domain.reset();
  endpoint_.fabric.reset();
  for (OpRecord* op : ops_) delete op;
}

std::string Context::reasonToDecline() const {
  if (!host_.loadedByAuto() || !settings_.provider.empty()) return "";
  if (const char* p = std::getenv("FI_PROVIDER"); p && *p) return "";
  if (!fabricDevice().empty()) return "";
  return "libfabric: no fabric device on this host (none in /sys/class/infiniband or /sys/class/cxi, no "
         "/dev/hfi1_*), so only software providers (tcp, sockets) could serve, which cost more than the ethernet "
         "transport: auto would never choose it, and loading libfabric takes about 0.3 s; name libfabric in "
         "transports or a rule, or set libfabric.provider, to use it anyway";
}

void Context::declareSettings() const {
  const pb_setting_decl_v1 decls[] = {
      {sizeof(pb_setting_decl_v1), kProvider, PB_SETTING_STRING, "",
       "libfabric providers in preference order, FI_PROVIDER syntax (^ excludes; tcp also matches tcp;ofi_rxm, "
       "=tcp only tcp); empty: the first available of efa, verbs;ofi_rxm, tcp;ofi_rxm, tcp, sockets",
       0},
      {sizeof(pb_setting_decl_v1), kIface, PB_SETTING_STRING, "",
       "libfabric domains (NICs or interfaces, e.g. lo, eth0, mlx5_0), NCCL_SOCKET_IFNAME syntax (^ excludes, "
       "= exact, else prefix); empty: the provider's first domain",
       1},
      {sizeof(pb_setting_decl_v1), kSignal, PB_SETTING_STRING, "auto",
       "How signals reach the peer: atomic (fi_atomic FI_SUM), message (a control message the peer's plugin "
       "applies), auto (atomic where the provider validates FI_SUM on FI_UINT64)",
       0},
      {sizeof(pb_setting_decl_v1), kFragmentBytes, PB_SETTING_INT, "0",
       "Largest single libfabric write a write() is split into, bytes; 0: the provider's max_msg_size, at most "
       "1 GiB",
       1},
      {sizeof(pb_setting_decl_v1), kMessageWriteBytes, PB_SETTING_INT, "131136",
       "A write_signal into host memory whose write is at most this many bytes travels as WRITE_SIGNAL "
       "messages (one per 32 KiB, the signal on the last) instead of an RMA write whose delivery the signal "
       "waits for; 0: only writes that fit one message",
       1},
      {sizeof(pb_setting_decl_v1), kLanes, PB_SETTING_STRING, "auto",
       "Extra endpoints (each on its own domain, with a thread) that large writes are cut across, 0-8; auto: 4 "
       "over the tcp provider on more than 4 cores, else 0",
       1},
      {sizeof(pb_setting_decl_v1), kLaneBytes, PB_SETTING_INT, "1048576",
       "Smallest write cut into one piece per lane, bytes",
       1},
  };
  host_.declare(decls, sizeof(decls) / sizeof(decls[0]));
}

Settings Context::readSettings() const {
  Settings s;
  s.provider = host_.setting(kProvider);
  ProviderSpec::parse(s.provider);  // reject a malformed list here, with its text
  s.iface = host_.setting(kIface);
  std::string signal = host_.setting(kSignal);
  if (!signal.empty()) s.signal = signal;
  OFI_CHECK(s.signal == "auto" || s.signal == "atomic" || s.signal == "message", PB_ERR_INVALID,
            "libfabric.signal = '" + s.signal + "' is not one of auto, atomic, message");
  // An integer setting's value when set and within [lo, hi] (or 0 where
  // zeroOk); throws naming the setting and the rule otherwise.
  const auto integer = [&](const char* key, long long lo, long long hi, bool zeroOk, const std::string& rule,
                           auto* out) {
    std::string text = host_.setting(key);
    if (text.empty()) return;
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(text.c_str(), &end, 10);
    OFI_CHECK(errno == 0 && *end == '\0' && ((zeroOk && v == 0) || (v >= lo && v <= hi)), PB_ERR_INVALID,
              std::string("libfabric.") + key + " = '" + text + "' is not " + rule);
    *out = static_cast<std::remove_pointer_t<decltype(out)>>(v);
  };
  integer(kMessageWriteBytes, 0, 1LL << 30, false, "a byte count in [0, 2^30]", &s.messageWriteBytes);
  integer(kFragmentBytes, 64, 1LL << 40, true, "0 or a byte count in [64, 2^40]", &s.fragmentBytes);
  if (host_.setting(kLanes) != "auto")
    integer(kLanes, 0, wire::kMaxLanes, false, "auto or a count in [0, " + std::to_string(wire::kMaxLanes) + "]",
            &s.lanes);
  integer(kLaneBytes, 4096, 1LL << 40, false, "a byte count in [4096, 2^40]", &s.laneBytes);
  return s;
}

void Context::openEndpoint(const fi_info* info) {
  endpoint_ = openRdmEndpoint(info, kReceives,
                               "libfabric provider " + choice_.name + " (domain " + choice_.domain + ")");
}

void Context::openLanes() {
  int n = settings_.lanes;
  if (n < 0) n = choice_.core() == "tcp" && std::thread::hardware_concurrency() > 4 ? 4 : 0;
  for (int i = 0; i < n; ++i)
    lanes_.push_back(std::make_unique<Lane>(i, info_.get(),
                                            [this](std::vector<LaneEvent>& events) { onLaneEvents(events); }));
}

wire::AddressBlob Context::addressBlob(uint64_t conn) const {
  wire::AddressBlob blob;
  blob.rank = rank();
  blob.addrFormat = addrFormat_;
  blob.provider = choice_.name;
  blob.name = endpoint_.name;
  blob.conn = conn;
  for (const auto& lane : lanes_) blob.laneNames.push_back(lane->name());
  return blob;
}

void Context::wakeLanes(uint64_t bytes) {
  if (lanes_.empty()) return;
  // Each lane carries bytes / lanes at well over 1 GB/s; the slack covers
  // the sender's start.
  const auto hot = std::chrono::microseconds(2000 + bytes / lanes_.size() / 1000);
  for (auto& lane : lanes_) lane->touch(hot);
}

void Context::onLaneEvents(std::vector<LaneEvent>& events) {
  std::lock_guard<std::mutex> lock(mu_);
  std::unordered_set<Connection*> touched;
  for (LaneEvent& e : events) {
    if (!e.op) {  // the lane itself broke: every connection may have writes on it
      for (auto& [id, conn] : connections_) conn->fail(e.status, e.what);
      continue;
    }
    if (Connection* c = findConnection(e.op->conn)) {
      if (e.failed)
        c->onError(*e.op, e.status, e.what);
      else
        c->onComplete(*e.op);
      touched.insert(c);
    }
    dropOp(e.op);
  }
  // Signals held for these writes may go now, without waiting for a caller.
  for (Connection* c : touched) c->postWaiting();
}

void Context::chooseSignalMode() {
  bool atomic = false;
  std::string why = "the provider has no FI_ATOMIC";
  if (info_->caps & FI_ATOMIC) {
    size_t count = 0;
    int rc = fi_atomicvalid(endpoint_.ep.get(), FI_UINT64, FI_SUM, &count);
    atomic = rc == 0 && count >= 1;
    if (!atomic) why = "fi_atomicvalid(FI_UINT64, FI_SUM) says " + (rc ? fiErrorText(rc) : std::string("count 0"));
  }
  if (settings_.signal == "atomic")
    OFI_CHECK(atomic, PB_ERR_UNSUPPORTED,
              "libfabric.signal = atomic, but provider " + choice_.name + " cannot add to a remote uint64 (" + why +
                  "); use signal = message or auto");
  signalMode_ = atomic && settings_.signal != "message" ? SignalMode::Atomic : SignalMode::Message;
}

void Context::setUpMessages() {
  MrTarget target{endpoint_.domain.get(), endpoint_.ep.get(), mrMode_};
  sendBytes_.assign(kSlots * wire::kMessageBytes, 0);
  recvBytes_.assign(kReceives * wire::kMessageBytes, 0);
  // The slots are the source of atomics (FI_WRITE) and of sends.
  sendSlab_ = registerBuffer(target, sendBytes_.data(), sendBytes_.size(), FI_SEND | FI_WRITE | FI_READ,
                             FI_HMEM_SYSTEM, 0, nextKey_++, "libfabric: control-message slots");
  recvSlab_ = registerBuffer(target, recvBytes_.data(), recvBytes_.size(), FI_RECV, FI_HMEM_SYSTEM, 0, nextKey_++,
                             "libfabric: receive buffers");
  for (int i = int(kSlots) - 1; i >= 0; --i) freeSlots_.push_back(i);
  receives_.resize(kReceives);
  for (size_t i = 0; i < kReceives; ++i) {
    receives_[i].kind = OpRecord::Kind::Recv;
    receives_[i].slot = static_cast<int>(i);
    if (!postReceive(i)) unpostedReceives_.push_back(i);
  }
}

bool Context::postReceive(size_t i) {
  ssize_t rc = fi_recv(endpoint_.ep.get(), recvBytes_.data() + i * wire::kMessageBytes, wire::kMessageBytes,
                       recvSlab_.desc, FI_ADDR_UNSPEC, &receives_[i].fiCtx);
  if (rc == -FI_EAGAIN) return false;
  fiCheck(rc, "libfabric: posting a receive buffer (fi_recv)");
  return true;
}

void Context::repostReceives() {
  while (!unpostedReceives_.empty()) {
    if (!postReceive(unpostedReceives_.back())) return;
    unpostedReceives_.pop_back();
  }
}

std::string Context::describeSelf() const {
  return "rank " + std::to_string(host_.rank()) + " (host " + host_.hostname() + ")";
}

std::string Context::whyUnreachable(const PeerInfo& peer) const {
  if (peer.sameHost || !choice_.hostLocal()) return "";
  std::string where = choice_.core() == "shm" ? "shared memory" : "loopback domain " + choice_.domain;
  return "libfabric " + choice_.name + " endpoint on " + where + " reaches only this host, but rank " +
         std::to_string(peer.rank) + " is on host " + peer.host + " (this is host " + host_.hostname() + ")";
}

LocalRegion* Context::registerMemory(void* ptr, size_t size, pb_mem_type type) {
  std::string what = "libfabric register_memory of " + std::to_string(size) + " bytes";
  OFI_CHECK(type == PB_MEM_HOST || type == PB_MEM_CUDA, PB_ERR_UNSUPPORTED,
            what + ": memory type " + std::to_string(int(type)) + " is unknown to this plugin");
  OFI_CHECK(type != PB_MEM_CUDA || hmem_, PB_ERR_UNSUPPORTED,
            "libfabric provider " + choice_.name + " lacks FI_HMEM, so it cannot register CUDA memory (GPU buffers "
            "are staged through host memory by the core)");
  OFI_CHECK(ptr || size == 0, PB_ERR_INVALID, what + ": NULL pointer");
  auto region = std::make_unique<LocalRegion>();
  region->base = static_cast<char*>(ptr);
  region->size = size;
  region->type = type;
  if (size > 0) {
    fi_hmem_iface iface = type == PB_MEM_CUDA ? FI_HMEM_CUDA : FI_HMEM_SYSTEM;
    int device = type == PB_MEM_CUDA ? cudaDeviceOf(ptr) : 0;
    region->reg = registerBuffer(MrTarget{endpoint_.domain.get(), endpoint_.ep.get(), mrMode_}, ptr, size,
                                 FI_WRITE | FI_REMOTE_WRITE | FI_READ | FI_REMOTE_READ, iface, device,
                                 nextKey_++, what);
    region->rmaBase = (mrMode_ & FI_MR_VIRT_ADDR) ? reinterpret_cast<uintptr_t>(ptr) : 0;
    try {
      for (auto& lane : lanes_)
        region->lanes.push_back(lane->registerBuffer(ptr, size, FI_WRITE | FI_REMOTE_WRITE | FI_READ |
                                                     FI_REMOTE_READ, iface, device, nextKey_++, what));
    } catch (...) {  // close those made, each under its lane's lock
      for (size_t i = 0; i < region->lanes.size(); ++i) lanes_[i]->release(region.get(), region->lanes[i]);
      throw;
    }
  }
  return regions_.add(std::move(region));
}

void Context::deregisterMemory(LocalRegion* region) {
  OFI_CHECK(regions_.contains(region), PB_ERR_INVALID,
            "libfabric deregister_memory: not a region registered with this context (already deregistered?)");
  for (auto& [id, conn] : connections_) conn->forgetSource(region);
  for (size_t i = 0; i < region->lanes.size(); ++i)
    for (OpRecord* op : lanes_[i]->release(region, region->lanes[i])) {
      if (Connection* c = findConnection(op->conn))
        c->onError(*op, PB_ERR_INVALID,
                   "a region was deregistered while queued operation(s) still had to read it (dropped from lane " +
                       std::to_string(i) + ")");
      dropOp(op);
    }
  regions_.remove(region);
}

uint64_t Context::addConnection(Connection* conn) {
  uint64_t id = nextConnection_++;
  connections_.emplace(id, conn);
  return id;
}

void Context::removeConnection(uint64_t id) { connections_.erase(id); }

Connection* Context::findConnection(uint64_t id) const {
  auto it = connections_.find(id);
  return it == connections_.end() ? nullptr : it->second;
}

fi_addr_t Context::insertAddress(const std::vector<uint8_t>& name, const std::string& who) {
  fi_addr_t addr = FI_ADDR_NOTAVAIL;
  int rc = fi_av_insert(endpoint_.av.get(), name.data(), 1, &addr, 0, nullptr);
  OFI_CHECK(rc == 1 && addr != FI_ADDR_NOTAVAIL, rc < 0 ? statusForFiError(-rc) : PB_ERR_INVALID,
            "libfabric: cannot insert the endpoint address of " + who + " into the address vector (fi_av_insert: " +
                (rc < 0 ? fiErrorText(rc) : std::to_string(rc) + " of 1 inserted") + ")");
  ++addressRefs_[addr];
  return addr;
}

void Context::removeAddress(fi_addr_t addr) noexcept {
  auto it = addressRefs_.find(addr);
  if (it == addressRefs_.end() || --it->second > 0) return;
  addressRefs_.erase(it);
  fi_av_remove(endpoint_.av.get(), &addr, 1, 0);
}

OpRecord* Context::newOp(OpRecord::Kind kind, uint64_t conn, uint64_t seq, int slot) {
  auto* op = new OpRecord;
  op->kind = kind;
  op->conn = conn;
  op->seq = seq;
  op->slot = slot;
  ops_.insert(op);
  return op;
}

void Context::dropOp(OpRecord* op) {
  if (op->slot >= 0) releaseSlot(op->slot);
  ops_.erase(op);
  delete op;
}

int Context::takeSlot() {
  if (freeSlots_.empty()) return -1;
  int s = freeSlots_.back();
  freeSlots_.pop_back();
  return s;
}

void Context::releaseSlot(int slot) { freeSlots_.push_back(slot); }

uint8_t* Context::slot(int slot) { return sendBytes_.data() + size_t(slot) * wire::kMessageBytes; }

}  // namespace plugboard::libfabric
