#include "fault_plan.hpp"

#include <cstdlib>
#include <sstream>
#include <utility>

#include "error.hpp"

namespace plugboard::faulty {

namespace {

const std::pair<const char*, Fault> kFaults[] = {
    {"none", Fault::None},           {"delay", Fault::Delay},
    {"drop", Fault::Drop},           {"duplicate", Fault::Duplicate},
    {"reorder", Fault::Reorder},     {"corrupt", Fault::Corrupt},
    {"truncate", Fault::Truncate},   {"fail_op", Fault::FailOp},
    {"fail_register", Fault::FailRegister}, {"fail_connect", Fault::FailConnect},
    {"exit", Fault::Exit},
};

}  // namespace

Fault FaultPlan::parseFault(const std::string& text) {
  std::string names;
  for (const auto& [name, f] : kFaults) {
    if (text == name) return f;
    names += names.empty() ? name : std::string(", ") + name;
  }
  throw Error(PB_ERR_INVALID, "faulty: setting fault='" + text + "' is not one of " + names);
}

const char* faultName(Fault f) {
  for (const auto& [name, k] : kFaults)
    if (k == f) return name;
  return "?";
}

OpFilter FaultPlan::parseOps(const std::string& text) {
  if (text == "all") return OpFilter::All;
  if (text == "write") return OpFilter::Write;
  if (text == "signal") return OpFilter::Signal;
  throw Error(PB_ERR_INVALID, "faulty: setting ops='" + text + "' is not one of all, write, signal");
}

void FaultPlan::parseRanks(const std::string& text) {
  ranks.clear();
  allRanks = text == "all";
  if (allRanks) return;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long r = std::strtol(item.c_str(), &end, 10);
    FAULTY_CHECK(!item.empty() && end && *end == '\0' && r >= 0 && r < (1L << 30), PB_ERR_INVALID,
                 "faulty: setting ranks='" + text + "': '" + item + "' is not a rank (use all or e.g. 1,3)");
    ranks.insert(static_cast<int>(r));
  }
  FAULTY_CHECK(!ranks.empty(), PB_ERR_INVALID, "faulty: setting ranks='" + text + "' names no rank");
}

bool FaultPlan::eligible(OpKind kind) const {
  switch (ops) {
    case OpFilter::Write: return kind != OpKind::Signal;
    case OpFilter::Signal: return kind != OpKind::Write;
    default: return true;
  }
}

bool FaultPlan::onDataPath() const {
  return fault != Fault::None && fault != Fault::FailRegister && fault != Fault::FailConnect;
}

}  // namespace plugboard::faulty
