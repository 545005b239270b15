// Turns the failure words the kernels leave in mapped host memory into
// Error(Timeout/Remote) naming rank, peer, transport and collective.
#include <cstdio>
#include <string>

#include "communicator/communicator_impl.hpp"
#include "gpu/collectives/collectives_impl.hpp"
#include "plugboard/error.hpp"
#include "plugboard/gpu/semaphore_device.hpp"
#include "plugboard/gpu/stream_wait.hpp"

namespace plugboard {
namespace gpucoll {

const char* collName(uint32_t coll) {
  switch (static_cast<Coll>(coll)) {
    case Coll::AllReduce: return "allreduce";
    case Coll::AllGather: return "allgather";
    case Coll::ReduceScatter: return "reducescatter";
    case Coll::Broadcast: return "broadcast";
    case Coll::Reduce: return "reduce";
    case Coll::AllToAll: return "alltoall";
    case Coll::Send: return "send";
    case Coll::Recv: return "recv";
    case Coll::SendRecv: return "sendrecv";
  }
  return "a collective";
}

}  // namespace gpucoll

using gpucoll::collName;

std::string formatSeconds(int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g s", static_cast<double>(ns) / 1e9);
  return text;
}

void GpuCollectives::Impl::throwIfPortProxyFailed() const {
  try {
    service->checkErrors();
  } catch (const Error& e) {
    throw Error(e.code(), "rank " + std::to_string(rank) + ": the PortChannel proxy of the GPU collectives failed: " +
                              e.what() + " The GPU collectives of this communicator cannot be used any more.");
  }
}

void GpuCollectives::Impl::throwSwitchFailure(uint32_t first) const {
  const uint32_t code = first & 0xff;
  const std::string backend = switchChannel ? switchBackendName(switchChannel->backend()) : "?";
  std::string msg = "rank " + std::to_string(rank) + " (" + comm.hostOf(rank) +
                    "): device wait at the SwitchChannel barrier of " + collName((first >> 8) & 0xff) +
                    " (backend " + backend + ", every rank of the communicator) ";
  if (code == kSemaphoreWaitTimeout)
    msg += "timed out (gpu_wait_timeout=" + formatSeconds(settings.waitTimeoutNs) +
           "): some rank did not reach it; did every rank make the same calls in the same order?";
  else
    msg += "was aborted";
  msg += " The GPU collectives of this communicator cannot be used any more.";
  throw Error(code == kSemaphoreWaitTimeout ? ErrorCode::Timeout : ErrorCode::Remote, msg);
}

std::optional<Error> GpuCollectives::Impl::pollNotices() const {
  std::lock_guard<std::mutex> lock(noticeMu);
  // Once the watcher has acted on a notice, read it now: the waits it ended
  // must not pass for this rank's own failure.
  std::optional<Error> notice = notices.poll(noticeTaken);
  if (!notice) notice = comm.impl_->notices->poll(noticeTaken);
  if (notice) actOnNotice();
  return notice;
}

void GpuCollectives::Impl::watchNotices() const {
  // The watcher polls only (the bootstrap's contract for a second thread):
  // the notice itself is read by the next pollNotices() of a calling thread.
  std::lock_guard<std::mutex> lock(noticeMu);
  actOnNotice();
}

void GpuCollectives::Impl::actOnNotice() const {
  if (noticeTaken) return;
  noticeTaken = true;
  // A failure this rank recorded before the notice came is its own news;
  // what fails after (the waits the notice ends) is the notice's doing.
  try {
    throwRecordedFailure();
  } catch (const Error&) {
    ownFailureFirst = true;
  }
  abortDeviceWaits();
}

void GpuCollectives::Impl::throwIfFailed() const {
  // An abort first: the device waits it ended are its consequence.
  if (comm.aborted())
    throw Error(ErrorCode::Aborted, "rank " + std::to_string(rank) + " (" + comm.hostOf(rank) +
                                        "): the communicator was aborted (Communicator::abort); its GPU collectives "
                                        "cannot be used any more");
  if (const auto notice = pollNotices(); notice && !ownFailureFirst) throw *notice;
  try {
    throwRecordedFailure();
  } catch (const Error& e) {
    std::lock_guard<std::mutex> lock(noticeMu);
    notices.sendOnce(e.what());  // nothing once a peer's notice came: it told everyone
    throw;
  }
}

void GpuCollectives::Impl::throwRecordedFailure() const {
  // A proxy failure first: device waits that it aborted are its consequence.
  if (service) throwIfPortProxyFailed();
  if (relay) relay->throwIfFailed(formatSeconds(settings.waitTimeoutNs));
  const uint32_t first = __atomic_load_n(&flags[1], __ATOMIC_ACQUIRE);
  if (!first) return;
  const int peer = static_cast<int>(first >> 16) - 1;
  const uint32_t code = first & 0xff;
  if (peer < 0) throwSwitchFailure(first);
  auto it = connections.find(peer);
  const std::string transport = it != connections.end() ? it->second->transport() : "?";
  std::string msg = "rank " + std::to_string(rank) + " (" + comm.hostOf(rank) + "): device wait for rank " +
                    std::to_string(peer) + " (" + (peer >= 0 && peer < nranks ? comm.hostOf(peer) : "?") + ")";
  if (code == kSemaphoreWaitTimeout)
    msg += " timed out in " + std::string(collName((first >> 8) & 0xff)) + " (transport " + transport +
           ", gpu_wait_timeout=" + formatSeconds(settings.waitTimeoutNs) +
           "); did every rank make the same calls in the same order?";
  else
    msg += " was aborted in " + std::string(collName((first >> 8) & 0xff)) + " (transport " + transport + ")";
  if (it != connections.end() && !it->second->mapsPeerMemory() && service)
    msg += ". The network path to rank " + std::to_string(peer) + ": " + service->describeState() + "; " +
           it->second->describeState() + ".";
  msg += " The GPU collectives of this communicator cannot be used any more.";
  throw Error(code == kSemaphoreWaitTimeout ? ErrorCode::Timeout : ErrorCode::Remote, msg);
}

void GpuCollectives::checkErrors() const {
  impl_->throwIfFailed();
  if (impl_->plans) impl_->plans->checkErrors();
  impl_->comm.checkErrors();
}

void GpuCollectives::synchronize(cudaStream_t stream) const {
  const Impl& m = *impl_;
  try {
    waitForStream(stream, 2 * static_cast<double>(m.settings.waitTimeoutNs) / 1e9,
                  "rank " + std::to_string(m.rank) + " (" + m.comm.hostOf(m.rank) + "): GpuCollectives::synchronize",
                  [&m] { m.pollNotices(); });
  } catch (const Error&) {
    checkErrors();  // a recorded device failure says more than the host's timeout
    throw;
  }
  checkErrors();
}

}  // namespace plugboard
