// The closing handshake of host collectives, checked over any transport
// (issue 13/15): a sender that leaves at once must not break the link of a
// receiver that consumes its message late.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm_fixture.hpp"
#include "plugboard/host_collectives.hpp"

namespace plugboard::test {

/// One rank's part: rank 0 sends 256 KiB (four 64 KiB chunks, all within
/// the slots, so its call ends at once) and destroys everything; rank 1
/// receives 500 ms later, checks the data and, after its slot returns have
/// gone out, that its link to rank 0 is whole. overrides: the transport's.
inline void senderLeavesAtOnce(int rank, int n, const UniqueId& id, std::map<std::string, std::string> overrides) {
  CommunicatorOptions o;
  o.overrides = std::move(overrides);
  o.overrides.insert({{"host_chunk_bytes", "65536"}, {"timeout", "10"}, {"close_timeout", "10"}});
  Communicator comm(loopbackBootstrap(rank, n, id), o);
  HostCollectives hc(comm);
  std::vector<float> data(4 * 16384);
  if (rank == 0) {
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i % 1000);
    hc.send(data.data(), data.size(), DataType::Float32, 1);
    return;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // rank 0 is closing meanwhile
  hc.recv(data.data(), data.size(), DataType::Float32, 0);
  for (size_t i = 0; i < data.size(); ++i)
    if (data[i] != static_cast<float>(i % 1000))
      throw std::runtime_error("element " + std::to_string(i) + " is " + std::to_string(data[i]));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a returned slot reaches rank 0
  comm.checkErrors();  // rank 0 waits for this rank to close before it does
}

}  // namespace plugboard::test
