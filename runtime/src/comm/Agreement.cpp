//===- Agreement.cpp - ranks agree on what changes numbers ----------------===//

#include "fsdp/runtime/comm/Agreement.h"

#include <algorithm>
#include <cstdint>

namespace fsdp::rt {
namespace {
// Separators that cannot occur in option text.
constexpr char kNameEnd = '\x1f', kFieldEnd = '\x1e';

std::string serialize(const std::vector<AgreedField> &fields) {
  std::string text;
  for (const AgreedField &f : fields)
    text += f.name + kNameEnd + f.value + kFieldEnd;
  return text;
}

std::vector<AgreedField> parse(const std::string &text) {
  std::vector<AgreedField> fields;
  size_t at = 0;
  while (at < text.size()) {
    size_t nameEnd = text.find(kNameEnd, at);
    size_t fieldEnd = text.find(kFieldEnd, at);
    if (nameEnd == std::string::npos || fieldEnd == std::string::npos ||
        nameEnd > fieldEnd)
      break;
    fields.push_back({text.substr(at, nameEnd - at),
                      text.substr(nameEnd + 1, fieldEnd - nameEnd - 1)});
    at = fieldEnd + 1;
  }
  return fields;
}

} // namespace

std::string broadcastText(Communicator &comm, const std::string &text,
                          int root) {
  uint64_t length = text.size();
  comm.broadcast(&length, sizeof(length), root);
  std::string result = comm.rank() == root ? text : std::string(length, '\0');
  if (length)
    comm.broadcast(result.data(), length, root);
  return result;
}

std::string checkRanksAgree(Communicator &comm,
                            const std::vector<AgreedField> &fields) {
  if (comm.size() == 1)
    return "";
  std::string mine = serialize(fields);
  std::string lead = broadcastText(comm, mine, 0);
  // The first rank that differs, as size - rank under a max (0: none).
  uint64_t differs = mine != lead ? uint64_t(comm.size() - comm.rank()) : 0;
  uint64_t first = comm.allReduceMax(differs);
  if (first == 0)
    return "";
  int other = comm.size() - int(first);
  std::vector<AgreedField> theirs = parse(broadcastText(comm, mine, other));
  std::vector<AgreedField> ours = parse(lead);
  std::string diff;
  for (size_t i = 0; i < std::max(ours.size(), theirs.size()); ++i) {
    const AgreedField *a = i < ours.size() ? &ours[i] : nullptr;
    const AgreedField *b = i < theirs.size() ? &theirs[i] : nullptr;
    if (a && b && a->name == b->name && a->value == b->value)
      continue;
    std::string name = a ? a->name : b->name;
    diff += (diff.empty() ? "" : ", ") + name + " '" +
            (b && (!a || b->name == a->name) ? b->value : "(none)") +
            "' (rank 0: '" + (a ? a->value : "(none)") + "')";
  }
  return "ranks disagree: rank " + std::to_string(other) +
         " differs from rank 0 in " + diff + "; every rank refuses to start";
}

bool allRanksSucceeded(Communicator &comm, bool ok, std::string &error) {
  if (comm.size() == 1)
    return ok;
  // The lowest failing rank, as size - rank under a max (0: none).
  uint64_t failing = ok ? 0 : uint64_t(comm.size() - comm.rank());
  uint64_t first = comm.allReduceMax(failing);
  if (first == 0)
    return true;
  int root = comm.size() - int(first);
  error =
      "rank " + std::to_string(root) + ": " + broadcastText(comm, error, root);
  return false;
}

} // namespace fsdp::rt
