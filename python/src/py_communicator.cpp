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

void PyCommunicator::allReduce(const Buffer& send, const Buffer& recv, ReduceOp op) {
  requireSameType(at("all_reduce"), send, recv);
  requireCount(at("all_reduce"), "the output", recv, send.count);
  host_->allReduce(send.data(), recv.data(), send.count, send.type, op);
}

void PyCommunicator::allGather(const Buffer& send, const Buffer& recv) {
  requireSameType(at("all_gather"), send, recv);
  requireCount(at("all_gather"), "the output", recv, send.count * size());
  host_->allGather(send.data(), recv.data(), send.count, send.type);
}

void PyCommunicator::reduceScatter(const Buffer& send, const Buffer& recv, ReduceOp op) {
  requireSameType(at("reduce_scatter"), send, recv);
  requireCount(at("reduce_scatter"), "the input", send, recv.count * size());
  host_->reduceScatter(send.data(), recv.data(), recv.count, recv.type, op);
}

void PyCommunicator::broadcast(const Buffer& send, const Buffer& recv, int root) {
  requirePeer(at("broadcast"), "root", root);
  requireSameType(at("broadcast"), send, recv);
  requireCount(at("broadcast"), "the output", recv, send.count);
  host_->broadcast(send.data(), recv.data(), recv.count, recv.type, root);
}

void PyCommunicator::reduce(const Buffer& send, const Buffer& recv, ReduceOp op, int root) {
  requirePeer(at("reduce"), "root", root);
  requireSameType(at("reduce"), send, recv);
  requireCount(at("reduce"), "the output", recv, send.count);
  host_->reduce(send.data(), recv.data(), send.count, send.type, op, root);
}

void PyCommunicator::allToAll(const Buffer& send, const Buffer& recv) {
  requireSameType(at("all_to_all"), send, recv);
  requireCount(at("all_to_all"), "the output", recv, send.count);
  requireBlocks(at("all_to_all"), send);
  host_->allToAll(send.data(), recv.data(), send.count / size(), send.type);
}

void PyCommunicator::send(const Buffer& buf, int peer) {
  requirePeer(at("send"), "peer", peer);
  host_->send(buf.data(), buf.count, buf.type, peer);
}

void PyCommunicator::recv(const Buffer& buf, int peer) {
  requirePeer(at("recv"), "peer", peer);
  host_->recv(buf.data(), buf.count, buf.type, peer);
}

void PyCommunicator::sendRecv(const Buffer& sendBuf, int sendPeer, const Buffer& recvBuf, int recvPeer) {
  requirePeer(at("send_recv"), "send peer", sendPeer);
  requirePeer(at("send_recv"), "receive peer", recvPeer);
  requireSameType(at("send_recv"), sendBuf, recvBuf);
  host_->sendRecv(sendBuf.data(), sendBuf.count, sendPeer, recvBuf.data(), recvBuf.count, recvPeer, sendBuf.type);
}

void PyCommunicator::barrier() {
  uint8_t in = 0, out = 0;
  host_->allReduce(&in, &out, 1, DataType::Uint8, ReduceOp::Max);
}

}  // namespace plugboard::python
