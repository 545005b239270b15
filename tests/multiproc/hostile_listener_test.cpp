// Hostile bytes at every listening socket a rank has open: the bootstrap's,
// the transport plugin's own, and those of the library under it (UCX's and
// libfabric's tcp). After the communicator is up and an allreduce passed,
// each rank finds its own listening TCP ports in /proc, connects to each
// several times and sends random bytes, an all-0xFF "header" or nothing at
// all, and closes. The ranks must keep serving their real peers: more
// allreduces, results checked, within the time limit, no crash.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "comm_fixture.hpp"
#include "multiproc.hpp"
#include "plugboard/host_collectives.hpp"

using namespace plugboard;
using namespace plugboard::test;

namespace {

constexpr auto kTestTimeout = std::chrono::seconds(90);

/// Inodes of the sockets this process has open (/proc/self/fd -> "socket:[N]").
std::set<unsigned long> ownSocketInodes() {
  std::set<unsigned long> out;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    char target[64] = {};
    std::string link = std::string("/proc/self/fd/") + e->d_name;
    ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
    unsigned long inode = 0;
    if (n > 0 && std::sscanf(target, "socket:[%lu]", &inode) == 1) out.insert(inode);
  }
  closedir(d);
  return out;
}

/// TCP ports this process listens on (IPv4 and IPv6 tables of /proc/net).
std::vector<uint16_t> ownListeningPorts() {
  const std::set<unsigned long> mine = ownSocketInodes();
  std::set<uint16_t> ports;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string slot, local, remote, state, queues, timer, retr, uid, timeout;
      unsigned long inode = 0;
      f >> slot >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (state != "0A" || !mine.count(inode)) continue;  // 0A: LISTEN
      ports.insert(static_cast<uint16_t>(std::stoul(local.substr(local.find(':') + 1), nullptr, 16)));
    }
  }
  return {ports.begin(), ports.end()};
}

/// Connects to 127.0.0.1:port (1 s at most), sends bytes, closes. False
/// when nothing listens there on loopback.
bool knock(uint16_t port, const std::vector<uint8_t>& bytes) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  pollfd p{fd, POLLOUT, 0};
  int err = 0;
  socklen_t len = sizeof(err);
  bool connected = poll(&p, 1, 1000) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
  for (size_t off = 0; connected && off < bytes.size();) {
    ssize_t n = send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;  // the listener's owner closed on us: fine
    off += static_cast<size_t>(n);
  }
  close(fd);
  return connected;
}

/// Every kind of garbage, several times, at every listening port of this
/// process; returns how many ports answered on loopback.
int knockEverywhere(int rank) {
  std::mt19937 rng(static_cast<unsigned>(1234 + rank));
  int reached = 0;
  for (uint16_t port : ownListeningPorts()) {
    std::vector<uint8_t> random(4096);
    for (auto& b : random) b = static_cast<uint8_t>(rng());
    bool any = false;
    for (int round = 0; round < 3; ++round) {
      any |= knock(port, random);
      any |= knock(port, std::vector<uint8_t>(256, 0xFF));  // huge lengths and counts in any header
      any |= knock(port, {});                               // connect, then hang up
    }
    reached += any;
  }
  return reached;
}

void checkedAllReduce(HostCollectives& hc, int n, size_t count) {
  std::vector<float> in(count), out(count, -1.0f);
  const int r = hc.communicator().rank();
  for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>((r + 1) * (i % 7 + 1));
  hc.allReduce(in.data(), out.data(), count, DataType::Float32, ReduceOp::Sum);
  for (size_t i = 0; i < count; ++i)
    if (out[i] != static_cast<float>(n * (n + 1) / 2 * (i % 7 + 1)))
      throw std::runtime_error("allreduce element " + std::to_string(i) + " is " + std::to_string(out[i]));
}

bool pluginBuilt(const char* name) {
  struct stat st;
  return stat((std::string(PLUGBOARD_TEST_PLUGIN_DIR) + "/libplugboard-" + name + ".so").c_str(), &st) == 0;
}

/// Two ranks over `transport`: allreduce, garbage at every listener of
/// each rank, then allreduces again (small and chunked), all checked.
void survivesGarbage(const char* transport) {
  if (!pluginBuilt(transport)) GTEST_SKIP() << "the " << transport << " plugin was not built";
  expectAllPassed(runRanks(2, kTestTimeout, [transport](int rank, int n, const UniqueId& id) {
    setenv("PLUGBOARD_TRANSPORTS", transport, 1);
    if (std::string(transport) == "ucx") setenv("UCX_TLS", "tcp", 1);
    if (std::string(transport) == "libfabric") {
      setenv("PLUGBOARD_LIBFABRIC_PROVIDER", "tcp", 1);
      setenv("PLUGBOARD_LIBFABRIC_IFACE", "lo", 1);
    }
    auto boot = loopbackBootstrap(rank, n, id);
    Communicator comm(boot);
    HostCollectives hc(comm);
    checkedAllReduce(hc, n, 1000);
    boot->barrier();
    const int reached = knockEverywhere(rank);
    std::printf("rank %d (%s): garbage sent to %d listening port(s)\n", rank, transport, reached);
    if (reached == 0) throw std::runtime_error("no listening port of this rank was reached on loopback");
    boot->barrier();
    for (size_t count : {size_t(1), size_t(1000), size_t(1) << 20}) checkedAllReduce(hc, n, count);
    boot->barrier();
  }));
}

}  // namespace

TEST(HostileListeners, EthernetRanksKeepServingTheirPeers) { survivesGarbage("ethernet"); }

TEST(HostileListeners, LibfabricRanksKeepServingTheirPeers) { survivesGarbage("libfabric"); }

TEST(HostileListeners, UcxRanksKeepServingTheirPeers) { survivesGarbage("ucx"); }
