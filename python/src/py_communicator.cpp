#include "py_communicator.hpp"

#include <cstdint>

#include "plugboard/error.hpp"

namespace plugboard::python {

PyCommunicator::PyCommunicator(int rank, int nranks, const UniqueId& id, std::chrono::milliseconds timeout,
                               const std::map<std::string, std::string>& settings) {
  bootstrap_ = std::make_shared<TcpBootstrap>(rank, nranks, id, timeout);
  CommunicatorOptions options;
  options.overrides = settings;
  comm_ = std::make_unique<Communicator>(bootstrap_, options);
  host_ = std::make_unique<HostCollectives>(*comm_);
}

// The collectives go before the communicator, the communicator before the
// bootstrap it was built on.
PyCommunicator::~PyCommunicator() {
  host_.reset();
  comm_.reset();
}

void PyCommunicator::requireSameType(const char* call, const HostBuffer& send, const HostBuffer& recv) const {
  if (send.type == recv.type) return;
  throw Error(ErrorCode::InvalidUsage, std::string(call) + " on rank " + std::to_string(rank()) + ": input is " +
                                           dataTypeName(send.type) + " but output is " + dataTypeName(recv.type));
}

void PyCommunicator::requireCount(const char* call, const char* which, const HostBuffer& buf, size_t expected) const {
  if (buf.count == expected) return;
  throw Error(ErrorCode::InvalidUsage, std::string(call) + " on rank " + std::to_string(rank()) + " of " +
                                           std::to_string(size()) + ": " + which + " has " + std::to_string(buf.count) +
                                           " elements, expected " + std::to_string(expected));
}

void PyCommunicator::requirePeer(const char* call, const char* what, int peer) const {
  if (peer >= 0 && peer < size()) return;
  throw Error(ErrorCode::InvalidUsage, std::string(call) + " on rank " + std::to_string(rank()) + ": " + what + " " +
                                           std::to_string(peer) + " is not a rank of this communicator (0-" +
                                           std::to_string(size() - 1) + ")");
}

void PyCommunicator::allReduce(const HostBuffer& send, const HostBuffer& recv, ReduceOp op) {
  requireSameType("all_reduce", send, recv);
  requireCount("all_reduce", "the output", recv, send.count);
  host_->allReduce(send.data(), recv.data(), send.count, send.type, op);
}

void PyCommunicator::allGather(const HostBuffer& send, const HostBuffer& recv) {
  requireSameType("all_gather", send, recv);
  requireCount("all_gather", "the output", recv, send.count * size());
  host_->allGather(send.data(), recv.data(), send.count, send.type);
}

void PyCommunicator::reduceScatter(const HostBuffer& send, const HostBuffer& recv, ReduceOp op) {
  requireSameType("reduce_scatter", send, recv);
  requireCount("reduce_scatter", "the input", send, recv.count * size());
  host_->reduceScatter(send.data(), recv.data(), recv.count, recv.type, op);
}

void PyCommunicator::broadcast(const HostBuffer& send, const HostBuffer& recv, int root) {
  requirePeer("broadcast", "root", root);
  requireSameType("broadcast", send, recv);
  requireCount("broadcast", "the output", recv, send.count);
  host_->broadcast(send.data(), recv.data(), recv.count, recv.type, root);
}

void PyCommunicator::reduce(const HostBuffer& send, const HostBuffer& recv, ReduceOp op, int root) {
  requirePeer("reduce", "root", root);
  requireSameType("reduce", send, recv);
  requireCount("reduce", "the output", recv, send.count);
  host_->reduce(send.data(), recv.data(), send.count, send.type, op, root);
}

void PyCommunicator::allToAll(const HostBuffer& send, const HostBuffer& recv) {
  requireSameType("all_to_all", send, recv);
  requireCount("all_to_all", "the output", recv, send.count);
  if (send.count % size() != 0)
    throw Error(ErrorCode::InvalidUsage, "all_to_all on rank " + std::to_string(rank()) + ": " +
                                             std::to_string(send.count) + " elements do not split into " +
                                             std::to_string(size()) + " equal blocks");
  host_->allToAll(send.data(), recv.data(), send.count / size(), send.type);
}

void PyCommunicator::send(const HostBuffer& buf, int peer) {
  requirePeer("send", "peer", peer);
  host_->send(buf.data(), buf.count, buf.type, peer);
}

void PyCommunicator::recv(const HostBuffer& buf, int peer) {
  requirePeer("recv", "peer", peer);
  host_->recv(buf.data(), buf.count, buf.type, peer);
}

void PyCommunicator::sendRecv(const HostBuffer& sendBuf, int sendPeer, const HostBuffer& recvBuf, int recvPeer) {
  requirePeer("send_recv", "send peer", sendPeer);
  requirePeer("send_recv", "receive peer", recvPeer);
  requireSameType("send_recv", sendBuf, recvBuf);
  host_->sendRecv(sendBuf.data(), sendBuf.count, sendPeer, recvBuf.data(), recvBuf.count, recvPeer, sendBuf.type);
}

void PyCommunicator::barrier() {
  uint8_t in = 0, out = 0;
  host_->allReduce(&in, &out, 1, DataType::Uint8, ReduceOp::Max);
}

}  // namespace plugboard::python
