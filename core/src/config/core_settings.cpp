// The core's own settings: the single place they are declared.
#include "config/core_settings.hpp"

namespace plugboard {

const std::vector<SettingDecl>& coreSettingDecls() {
  static const std::vector<SettingDecl> decls = {
      {"transports", SettingType::String, "auto",
       "Transports that may load, in preference order (comma list); 'auto' loads every plugin found", false},
      {"plugin_path", SettingType::String, "",
       "Extra directories searched for libplugboard-<name>.so (colon or comma list)", true},
      {"plugin_probe_timeout", SettingType::Double, "10",
       "Seconds a plugin found outside Plugboard's own plugin directory may take to load and initialise in a probe "
       "child process before the job uses it; one that crashes, exits or hangs there is skipped ('auto') or "
       "named in an error; 0: no probe", true},
      {"timeout", SettingType::Double, "60",
       "Seconds any wait (bootstrap, connect, flush, semaphore) may take before it fails", false},
      {"close_timeout", SettingType::Double, "10",
       "Seconds destroying host collectives waits for every peer to finish its last call and close too (until "
       "then a peer may still write to this rank's slots); skipped after an abort or a failed call",
       false},
      {"wait_yield_polls", SettingType::Int, "300",
       "Host waits: polls that yield the CPU before a waiter sleeps (process-wide; 0 sleeps after 20 busy polls). "
       "Yielding lets a transport's receiver thread on the same core run while the waiter stays awake",
       false},
      {"host_id", SettingType::String, "",
       "Host identity for same-host decisions (default: the host name)", true},
      {"socket_ifname", SettingType::String, "",
       "Interfaces for the bootstrap sockets (NCCL_SOCKET_IFNAME syntax: ^ excludes, = exact)", true},
      {"failover", SettingType::Bool, "false",
       "A pair whose transport fails mid-job reconnects over the next transport its rule lists (or the next "
       "cheapest) and resends what had not landed, so the call goes on: host collectives (direct transfers "
       "off), and GPU collectives on a communicator with a pair through the proxy, which then run every "
       "call through the host relay (large ones in pieces of a 4 MiB area; needs gpu_host_relay_bytes > 0)",
       false},
      {"host_chunk_bytes", SettingType::Int, "524288",
       "Host collectives: pipeline chunk in bytes (multiple of 64, at least 4096)", false},
      {"host_slots", SettingType::Int, "4", "Host collectives: chunks in flight per peer (1-64)", false},
      {"host_direct_bytes", SettingType::Int, "262144",
       "Host collectives: a message of at least this many bytes that the receiver only copies travels as one "
       "write straight from the sender's buffer into the receiver's, where the pair's transport registers memory "
       "cheaply (ethernet; ucx over TCP and shared memory); in an exchange with every peer at once (allgather, "
       "alltoall, the halves of a large allreduce) between ranks where a host of the pair has no more cores than "
       "ranks, from this many bytes divided by the peers, but at least 64 KiB; "
       "0: always in chunks through the slots",
       false},
      {"host_direct_piece_bytes", SettingType::Int, "1048576",
       "Host collectives: a direct transfer goes as writes of at most this many bytes, each announced as it is "
       "posted, so the receiver reduces what has landed while the rest is on the wire (rounded down to a "
       "multiple of 4096, at least 4096; the sender's alone decides)",
       true},
      {"allreduce_small_bytes", SettingType::Int, "65536",
       "Host collectives: at or below this many bytes (allgather: gathered bytes) use the latency algorithms "
       "(one step, Bruck, recursive doubling on 2 ranks); on 4, 8, 16... ranks allreduce_doubling_bytes and "
       "allgather_doubling_bytes draw the line",
       false},
      {"allreduce_halving_bytes", SettingType::Int, "262144",
       "Host collectives: an allreduce above allreduce_doubling_bytes (or allreduce_small_bytes, if lower) and up "
       "to this many bytes, on a power-of-two rank count of at least 4, reduce-scatters by recursive halving and "
       "allgathers by recursive doubling instead of recursive doubling or the direct two-step exchange; 0: never",
       false},
      {"allgather_doubling_bytes", SettingType::Int, "262144",
       "Host collectives: on a power-of-two rank count above 2, the largest allgather (gathered bytes) that takes "
       "recursive doubling (log2(n) exchanges, each block received in place); larger ones the direct exchange "
       "with every peer at once",
       false},
      {"allreduce_doubling_bytes", SettingType::Int, "32768",
       "Host collectives: on a power-of-two rank count of at least 4, the largest allreduce that takes recursive "
       "doubling (log2(n) exchanges of the whole vector); larger ones, up to allreduce_halving_bytes, take "
       "recursive halving and doubling",
       false},
      {"staging_chunk_bytes", SettingType::Int, "1048576",
       "CUDA memory over host-only transports: bytes per staging slot (multiple of 64, 4096 to 1 GiB)", false},
      {"staging_slots", SettingType::Int, "8",
       "CUDA memory over host-only transports: staging slots per direction and connection (1-64)", false},
      {"proxy_numa_bind", SettingType::Bool, "true",
       "Bind each GPU's proxy thread to the CPUs of the GPU's NUMA node (within the process's affinity)", false},
      // LL and one-shot thresholds measured on 2 x H200 (tests/gpu/tune.sh,
      // docs/perf/2026-11-22-gpu-collectives-2xh200.md, run 6).
      {"gpu_allreduce_small_bytes", SettingType::Int, "4194304",
       "GPU collectives: allreduce and reduce calls whose bytes times (ranks - 1) are fewer use the one-shot "
       "LL-packet kernel when every pair is peer-mapped (0-16777216)", false},
      {"gpu_broadcast_small_bytes", SettingType::Int, "1048576",
       "GPU collectives: broadcast calls whose bytes times (ranks - 1) are fewer use the one-shot LL-packet kernel "
       "when every pair is peer-mapped (0-16777216)", false},
      {"gpu_blocks_small_bytes", SettingType::Int, "4194304",
       "GPU collectives: allgather, alltoall and reducescatter calls whose bytes per rank block times (ranks - 1) "
       "are fewer use the one-shot LL-packet kernel when every pair is peer-mapped (0-16777216)", false},
      {"gpu_p2p_small_bytes", SettingType::Int, "1048576",
       "GPU collectives: each direction of a send, recv or sendrecv of fewer bytes uses the LL-packet kernel "
       "when every pair is peer-mapped (0-16777216; 0: always the pipeline)", false},
      {"gpu_host_relay_bytes", SettingType::Int, "65536",
       "GPU collectives on a communicator where some pair goes through the proxy (a network transport): "
       "collective calls (not send/recv) whose larger side on a rank (input or output) is at most this many bytes "
       "run on the host (the kernel copies the input to pinned memory, a host thread runs the host collective, "
       "the kernel copies the result back); 0: never (0-16777216; pinned memory of this size per rank; every "
       "rank must agree)", false},
      {"gpu_allreduce_oneshot_bytes", SettingType::Int, "33554432",
       "GPU collectives: allreduce and reduce calls (not LL) whose bytes times (ranks - 1) are fewer send the whole "
       "buffer to every receiver (one hop) instead of the two-shot reduce-scatter + all-gather; beyond 2 ranks "
       "only while one-shot sends less than 1 MiB more than two-shot would", false},
      // Defaults measured on 2 x H200 (tests/gpu/tune.sh, docs/perf/gpu-collectives-2xh200.md):
      // 16 blocks x 128 KiB reached 93 GB/s allreduce busbw at 256 MiB, 128 x 512 KiB 333 GB/s.
      {"gpu_scratch_bytes", SettingType::Int, "268435456",
       "GPU collectives: device scratch per peer for the pipelined kernels; holds at least 2 chunks per block", false},
      {"gpu_blocks", SettingType::Int, "128", "GPU collectives: thread blocks per kernel (1-128)", false},
      {"gpu_switch", SettingType::String, "auto",
       "GPU collectives: SwitchChannel algorithms (allreduce of float32 sum, float16/bfloat16 sum/min/max, and "
       "allgather, above the LL sizes, every pair on one host): auto (where the nvls transport can create a "
       "multicast group on every rank), multicast (required: an error names each rank's reason otherwise), peers "
       "(the same algorithms over cudaipc mappings, never multicast), off", false},
      {"gpu_switch_chunk_bytes", SettingType::Int, "0",
       "GPU collectives: bytes each (rank, thread block) cell of the SwitchChannel buffer takes per round (NCCL's "
       "NVLS chunk); 0 or more than gpu_switch_bytes / (ranks x gpu_blocks): all of that (a multiple of 16)", false},
      {"gpu_switch_bytes", SettingType::Int, "33554432",
       "GPU collectives: SwitchChannel buffer per rank when gpu_switch takes it; larger calls run in rounds of it "
       "(65536-17179869184)", false},
      {"gpu_port_blocks", SettingType::Int, "4",
       "GPU collectives: thread blocks per kernel when some pair goes through the proxy (a network transport); "
       "each block's chunks are proxy requests, so fewer blocks make fewer, larger messages (1-128)", false},
      {"gpu_port_slots", SettingType::Int, "8",
       "GPU collectives: pipeline slots per (peer, block) when some pair goes through the proxy; sizes the pinned "
       "host port area (2 x ranks x gpu_port_blocks x slots x gpu_chunk_bytes) (2-1024)", false},
      {"gpu_threads", SettingType::Int, "512", "GPU collectives: threads per block (multiple of 32, 64-512)", false},
      {"gpu_chunk_bytes", SettingType::Int, "524288",
       "GPU collectives: largest pipeline chunk (one scratch slot) in bytes (multiple of 16, at least 1024); over "
       "mappings a step that sends to k peers sends each at most this over k, rounded down to a power of two", false},
      {"gpu_plan_slices", SettingType::Int, "0",
       "GPU plan executor: CUDA blocks per plan thread block, each moving one slice of every chunk (0: fill the "
       "GPU's SMs, at most 64, or gpu_port_blocks for plans whose buffers are in host memory; 1-1024)", false},
      {"gpu_plan_max_bytes", SettingType::Int, "67108864",
       "GPU collectives: each plan that a YAML plans: rule chooses for GPU buffers gets an executor made at "
       "start-up for inputs of up to min(the rule's max_bytes, this) bytes; larger calls take the built-in "
       "algorithms", false},
      {"gpu_wait_timeout", SettingType::Double, "30",
       "GPU collectives: seconds (GPU global timer) a device wait may last before it records a timeout and ends "
       "the kernel; GpuCollectives::synchronize gives up on a stream after twice this (0.001-86400)",
       false},
      {"nccl_fallback_library", SettingType::String, "",
       "NCCL API library: a real NCCL (path to its libnccl.so.2, or 'auto' for the default search, which skips "
       "this library) that every communicator also joins, for the calls named by nccl_fallback_calls and the "
       "entry points Plugboard does not serve (symmetric windows); empty: none",
       true},
      {"nccl_fallback_calls", SettingType::String, "",
       "NCCL API library: calls handed to nccl_fallback_library instead of Plugboard (comma list of allreduce, "
       "broadcast, reduce, allgather, reducescatter, alltoall, sendrecv; or all); empty: none",
       false},
      {"debug", SettingType::String, "WARN", "Log level: NONE, WARN, INFO or TRACE", true},
      {"debug_subsys", SettingType::String, "", "Subsystems to log (comma list; ^ excludes)", true},
      {"debug_file", SettingType::String, "", "Log file instead of stderr (%h host, %p pid)", true},
      {"debug_timestamps", SettingType::Bool, "false",
       "Start every log line with the local wall-clock time to the microsecond (as NCCL_DEBUG_TIMESTAMP_FORMAT "
       "does)", true},
  };
  return decls;
}

const std::vector<std::string>& launchVariables() {
  static const std::vector<std::string> names = {
      "PLUGBOARD_CONFIG", "PLUGBOARD_RANK", "PLUGBOARD_NRANKS", "PLUGBOARD_LOCAL_RANK",
      "PLUGBOARD_BOOTSTRAP_ADDR", "PLUGBOARD_NVLS_ENABLE"};
  return names;
}

}  // namespace plugboard
