#include "premul_sum_ops.hpp"

namespace plugboard::ncclapi {

std::optional<int> PreMulSumOps::add(const PreMulSum& op) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ops_.size() >= kMaxOps) return std::nullopt;
  int id = kFirstId;
  for (const auto& entry : ops_) {  // the lowest free number: ids stay small
    if (entry.first != id) break;
    ++id;
  }
  ops_.emplace(id, op);
  return id;
}

std::optional<PreMulSum> PreMulSumOps::find(int id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ops_.find(id);
  if (it == ops_.end()) return std::nullopt;
  return it->second;
}

bool PreMulSumOps::remove(int id) {
  std::lock_guard<std::mutex> lock(mu_);
  return ops_.erase(id) > 0;
}

size_t PreMulSumOps::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ops_.size();
}

}  // namespace plugboard::ncclapi
