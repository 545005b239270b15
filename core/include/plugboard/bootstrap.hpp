/// @file bootstrap.hpp
/// Rank rendezvous and out-of-band messaging used during set-up.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace plugboard {

/// Opaque 128-byte token from which every rank finds the root. One rank
/// creates it (TcpBootstrap::createUniqueId) and hands it to the others out
/// of band (MPI_Bcast, a file, fork). Plain bytes: copy it freely.
struct UniqueId {
  std::array<uint8_t, 128> bytes{};
};

/// Collective out-of-band operations between the ranks of one job. Every
/// call is blocking and has a timeout; a timeout is an Error(Timeout) that
/// names the rank that did not answer. Calls come from one thread at a
/// time, except poll() and peerClosed(): a background thread of Plugboard's
/// (the GPU collectives' host relay) may call them while another thread is
/// in a call, so an implementation that overrides them must allow that
/// (TcpBootstrap's never wait: they say false while another call runs).
class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  /// This process's rank, 0 <= rank() < size().
  virtual int rank() const = 0;
  /// Number of ranks.
  virtual int size() const = 0;
  /// data holds size() slots of bytesPerRank; slot rank() is this rank's
  /// contribution; on return every slot holds that rank's contribution.
  virtual void allGather(void* data, size_t bytesPerRank) = 0;
  /// Sends a blob to peer under tag. Messages between two ranks with the
  /// same tag arrive in order.
  virtual void send(const void* data, size_t size, int peer, int tag) = 0;
  /// Receives the next blob peer sent under tag (blobs with other tags that
  /// arrive first are kept for later recv calls).
  virtual std::vector<char> recv(int peer, int tag) = 0;
  /// Returns when every rank has called barrier().
  virtual void barrier() = 0;
  /// True when a blob from peer under tag has arrived (recv would return it
  /// at once); never waits. The default cannot tell and says false: a
  /// bootstrap without it still works, but a failover (the "failover"
  /// setting) then starts on a rank only once it sees its own side fail.
  virtual bool poll(int peer, int tag) {
    (void)peer;
    (void)tag;
    return false;
  }
  /// True when poll() can tell (a bootstrap that overrides poll() says so
  /// here): waits that poll, such as closing host collectives, skip peers
  /// they could only wait for blindly.
  virtual bool canPoll() const { return false; }
  /// True when peer's connection to this rank has closed (its process
  /// ended, or it destroyed its bootstrap), as far as known without
  /// waiting; what it sent before stays readable. The default cannot tell
  /// and says false.
  virtual bool peerClosed(int peer) {
    (void)peer;
    return false;
  }
  /// From any thread: the call waiting in this bootstrap now, if any, ends
  /// with Error(Aborted). Calls begun later are not affected, so a job may
  /// go on using the bootstrap (a new communicator after an abort).
  /// Communicator::abort() calls it. The default does nothing: waits end by
  /// their timeout.
  virtual void abort() {}

  /// allGather of variable-size blobs: returns every rank's blob by rank.
  std::vector<std::vector<char>> allGatherBlobs(const std::vector<char>& mine);
};

/// Bootstrap over TCP sockets. Rank 0 runs the rendezvous on the unique id's
/// address; after it, ranks talk directly to each other.
class TcpBootstrap : public Bootstrap {
 public:
  /// Creates a unique id whose root listens on this host. The listening
  /// socket is opened now (and kept open by this process), so the id may be
  /// handed to a forked or remote rank 0. interfaceSpec selects the
  /// interface as PLUGBOARD_SOCKET_IFNAME does ("" = default choice).
  static UniqueId createUniqueId(const std::string& interfaceSpec = "");
  /// A unique id for a root at a known address "host:port" (torchrun's
  /// MASTER_ADDR/MASTER_PORT style); rank 0 must run on that host. Every
  /// rank derives it alone, so its job nonce comes from the address and
  /// jobKey (LaunchInfo::jobKey): the root refuses a rank whose id differs,
  /// such as one of an earlier or another job using the same address.
  static UniqueId uniqueIdFromAddress(const std::string& hostPort, const std::string& jobKey = "");
  /// The "host:port" the id points to, for messages.
  static std::string uniqueIdAddress(const UniqueId& id);

  /// Joins the job; returns when every rank has joined. Throws
  /// Error(Timeout) naming the missing ranks after timeout,
  /// Error(InvalidUsage) for a bad rank/size, Error(Remote) when ranks
  /// disagree on the size or the id.
  TcpBootstrap(int rank, int nranks, const UniqueId& id,
               std::chrono::milliseconds timeout = std::chrono::seconds(60),
               const std::string& interfaceSpec = "");
  ~TcpBootstrap() override;
  TcpBootstrap(const TcpBootstrap&) = delete;
  TcpBootstrap& operator=(const TcpBootstrap&) = delete;

  int rank() const override;
  int size() const override;
  void allGather(void* data, size_t bytesPerRank) override;
  void abort() override;
  void send(const void* data, size_t size, int peer, int tag) override;
  std::vector<char> recv(int peer, int tag) override;
  void barrier() override;
  bool poll(int peer, int tag) override;
  bool canPoll() const override { return true; }
  bool peerClosed(int peer) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Where the launcher put this process: rank, size and how to find rank 0.
struct LaunchInfo {
  int rank = -1;             ///< Global rank.
  int nranks = 0;            ///< World size.
  int localRank = -1;        ///< Rank within the host, -1 if unknown.
  std::string rootAddress;   ///< "host:port" of the bootstrap root.
  /// The job's identity, "VARIABLE=value" from the first of PLUGBOARD_JOB_ID,
  /// TORCHELASTIC_RUN_ID (unless "none"), SLURM_JOB_ID (with SLURM_STEP_ID),
  /// PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid; empty when none is set.
  std::string jobKey;
  std::string source;        ///< Which variables were used, for messages.
};

/// Reads the launcher's environment, in this order: PLUGBOARD_RANK /
/// PLUGBOARD_NRANKS; torchrun's RANK / WORLD_SIZE / LOCAL_RANK; Open MPI's
/// OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK; Slurm's SLURM_PROCID /
/// SLURM_NTASKS / SLURM_LOCALID. The root address is PLUGBOARD_BOOTSTRAP_ADDR
/// ("host:port") or else MASTER_ADDR with port MASTER_PORT + 1 (torchrun's
/// own store holds MASTER_PORT). Throws Error(Config) naming what is missing.
LaunchInfo launchInfoFromEnvironment();

}  // namespace plugboard
