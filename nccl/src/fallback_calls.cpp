#include "fallback_calls.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "plugboard/error.hpp"

namespace plugboard::ncclapi {
namespace {

constexpr FallbackCall kAll[] = {FallbackCall::AllReduce,     FallbackCall::Broadcast, FallbackCall::Reduce,
                                 FallbackCall::AllGather,     FallbackCall::ReduceScatter,
                                 FallbackCall::AllToAll,      FallbackCall::SendRecv};

std::string normalized(std::string word) {
  word.erase(std::remove_if(word.begin(), word.end(), [](unsigned char c) { return std::isspace(c); }), word.end());
  std::transform(word.begin(), word.end(), word.begin(), [](unsigned char c) { return std::tolower(c); });
  return word;
}

}  // namespace

const char* fallbackCallName(FallbackCall call) {
  switch (call) {
    case FallbackCall::AllReduce: return "allreduce";
    case FallbackCall::Broadcast: return "broadcast";
    case FallbackCall::Reduce: return "reduce";
    case FallbackCall::AllGather: return "allgather";
    case FallbackCall::ReduceScatter: return "reducescatter";
    case FallbackCall::AllToAll: return "alltoall";
    case FallbackCall::SendRecv: return "sendrecv";
  }
  return "?";
}

FallbackCalls FallbackCalls::parse(const std::string& text) {
  FallbackCalls calls;
  std::stringstream in(text);
  std::string word;
  while (std::getline(in, word, ',')) {
    word = normalized(word);
    if (word.empty()) continue;
    if (word == "all") {
      calls.bits_ = (1u << (sizeof(kAll) / sizeof(kAll[0]))) - 1;
      continue;
    }
    auto it = std::find_if(std::begin(kAll), std::end(kAll), [&](FallbackCall c) { return word == fallbackCallName(c); });
    if (it == std::end(kAll))
      throw Error(ErrorCode::Config, "nccl_fallback_calls = '" + text + "': '" + word +
                                         "' is not one of allreduce, broadcast, reduce, allgather, reducescatter, "
                                         "alltoall, sendrecv, all");
    calls.bits_ |= 1u << static_cast<unsigned>(*it);
  }
  return calls;
}

std::string FallbackCalls::describe() const {
  std::string out;
  for (FallbackCall c : kAll)
    if (has(c)) out += (out.empty() ? "" : ", ") + std::string(fallbackCallName(c));
  return out.empty() ? "none" : out;
}

}  // namespace plugboard::ncclapi
