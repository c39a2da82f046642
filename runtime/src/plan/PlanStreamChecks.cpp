//===- PlanStreamChecks.cpp - the plan's collectives and their waits ------===//
//
// Each started collective (stream >= 1) has a unique token and exactly one
// later wait naming its buffers; until that wait no kernel writes what it
// reads or touches what it writes.
//
//===----------------------------------------------------------------------===//

#include "plan/PlanChecks.h"

#include <map>
#include <optional>
#include <set>

namespace fsdp::rt {
namespace {
/// A started collective, until its wait.
struct Started {
  size_t at;
  uint32_t source, result;
};
using InFlight = std::map<int64_t, Started>;

bool isCount(double v, double limit) {
  return v >= 0 && v < limit && v == double(int64_t(v));
}
} // namespace

/// No kernel writes the input or touches the output of a collective in
/// flight (a wait reads them both: that is what it is for).
static bool checkInFlightUses(const KernelCheck &k, const InFlight &inFlight) {
  const Plan &plan = k.plan;
  for (const auto &[token, started] : inFlight) {
    const BufferDesc &source = plan.buffers[started.source],
                     &result = plan.buffers[started.result];
    bool writesSource = false, touchesResult = false;
    for (uint32_t id : k.inst.outs) {
      writesSource |= overlap(plan.buffers[id], source);
      touchesResult |= overlap(plan.buffers[id], result);
    }
    if (k.info().opcode != plan::Opcode::Wait)
      for (uint32_t id : k.inst.ins)
        touchesResult |= overlap(plan.buffers[id], result);
    if (writesSource || touchesResult)
      return k.bad(std::string(writesSource ? "overwrites the input"
                                            : "uses the output") +
                   " of " + std::string(plan.program[started.at].kernel->name) +
                   " #" + std::to_string(started.at) + " (token " +
                   std::to_string(token) + ") before its wait");
  }
  return true;
}

/// A collective's stream, token and group; a started one (stream >= 1)
/// goes in flight under its token, which must be new.
static bool checkCollective(const KernelCheck &k, InFlight &inFlight,
                            std::set<int64_t> &used) {
  plan::CollectiveParams p = plan::collectiveParams(k.inst.params.data());
  if (!isCount(p.stream, plan::kNumStreams))
    return k.bad("invalid stream " + paramText(p.stream));
  if (!isCount(p.token, 4294967296.0) || (p.stream == 0) != (p.token == 0))
    return k.bad("invalid token " + paramText(p.token) + " on stream " +
                 paramText(p.stream));
  if (p.group != 0 && p.group != 1)
    return k.bad("invalid group " + paramText(p.group));
  // Stream 4 is the row all-to-alls' own, and they are never bucketed.
  bool exchange = k.info().opcode == plan::Opcode::AllToAll;
  if (p.stream != 0 && (p.stream == plan::kExpertStream) != exchange)
    return k.bad(exchange ? "starts on stream " + paramText(p.stream) +
                                "; an all_to_all starts on stream 4 or runs "
                                "in place (stream 0)"
                          : "starts on stream 4, the all-to-alls' own");
  if (exchange && p.group != 0)
    return k.bad("is grouped; all-to-alls are never bucketed");
  // The sharding collectives run over the shard group (an expert-parallel
  // unit's over the ranks of its slice), the replica all-reduce over the
  // replica group, the all-to-all over the expert group.
  plan::CommAxis expected = exchange ? plan::CommAxis::Expert
                            : k.info().opcode == plan::Opcode::AllReduceMean
                                ? plan::CommAxis::Replicate
                            : isExpertCollective(k)
                                ? plan::CommAxis::ExpertShard
                                : plan::CommAxis::Shard;
  if (p.axis != double(uint32_t(expected)))
    return k.bad("runs over axis " + paramText(p.axis) + ", not " +
                 std::to_string(uint32_t(expected)) + " (" +
                 std::string(plan::kCommAxisNames[uint32_t(expected)]) +
                 "), the axis of " + std::string(k.info().name));
  if (p.group == 1) {
    const Instruction *previous =
        k.index > 0 ? &k.plan.program[k.index - 1] : nullptr;
    if (p.stream == 0 || !previous ||
        previous->kernel->opcode != k.info().opcode ||
        plan::collectiveParams(previous->params.data()).stream != p.stream)
      return k.bad("is grouped but does not follow a started " +
                   std::string(k.info().name) + " on its stream");
  }
  if (p.stream == 0)
    return true;
  if (!used.insert(int64_t(p.token)).second)
    return k.bad("token " + std::to_string(int64_t(p.token)) +
                 " is started twice");
  inFlight[int64_t(p.token)] = {k.index, k.inst.ins[0], k.inst.outs[0]};
  return true;
}

/// An all-to-all (all_to_all_counts, all_to_all): over the expert group
/// (axis 3), which only a plan with expert groups (expert_size > 1) has.
static bool checkAllToAll(const KernelCheck &k) {
  double axis = k.inst.params[plan::paramIndex(k.info().opcode, "axis")];
  if (k.plan.expertSize == 1)
    return k.bad("needs expert groups, and the plan's expert_size is 1");
  if (axis != double(uint32_t(plan::CommAxis::Expert)))
    return k.bad("runs over axis " + paramText(axis) +
                 ", not 3 (expert), the axis of " + std::string(k.info().name));
  return true;
}

/// A wait: its token is in flight and it names that collective's buffers.
static bool checkWait(const KernelCheck &k, InFlight &inFlight) {
  double token = plan::waitToken(k.inst.params.data());
  auto found = isCount(token, 4294967296.0) ? inFlight.find(int64_t(token))
                                            : inFlight.end();
  if (found == inFlight.end())
    return k.bad("waits for token " + paramText(token) +
                 ", which is not in flight");
  if (k.inst.ins[0] != found->second.source ||
      k.inst.ins[1] != found->second.result)
    return k.bad("does not name the buffers of the collective it waits for");
  inFlight.erase(found);
  return true;
}

/// The asynchronous collectives: each started one (stream >= 1) has a
/// unique token and exactly one later wait naming its buffers, and until
/// that wait no kernel writes what it reads or touches what it writes (a
/// corrupt plan would otherwise race with the collective's thread or
/// stream, silently).
bool validateStreams(Plan &plan, std::string &why) {
  using plan::Opcode;
  InFlight inFlight;
  std::set<int64_t> used;
  // A CUDA rank runs every row all-to-all on one NCCL communicator, which
  // two streams must not share: all of them start, or none.
  std::optional<double> exchangeStream;
  for (size_t i = 0; i < plan.program.size(); ++i) {
    KernelCheck k{plan, plan.program[i], i, why};
    Opcode opcode = k.info().opcode;
    if (!checkInFlightUses(k, inFlight))
      return false;
    if ((opcode == Opcode::AllGather || opcode == Opcode::ReduceScatter ||
         opcode == Opcode::AllReduceMean) &&
        !checkCollective(k, inFlight, used))
      return false;
    if (opcode == Opcode::Wait && !checkWait(k, inFlight))
      return false;
    if ((opcode == Opcode::AllToAllCounts || opcode == Opcode::AllToAll) &&
        !checkAllToAll(k))
      return false;
    if (opcode != Opcode::AllToAll)
      continue;
    double stream = plan::collectiveParams(k.inst.params.data()).stream;
    if (exchangeStream && *exchangeStream != stream)
      return k.bad("runs on stream " + paramText(stream) +
                   ", but an earlier all_to_all on stream " +
                   paramText(*exchangeStream) +
                   ": a plan's all-to-alls all start or all run in place");
    exchangeStream = stream;
    if (!checkCollective(k, inFlight, used))
      return false;
  }
  if (!inFlight.empty()) {
    const auto &[token, started] = *inFlight.begin();
    why = "kernel #" + std::to_string(started.at) + " (" +
          std::string(plan.program[started.at].kernel->name) + "): token " +
          std::to_string(token) + " is never awaited";
    return false;
  }
  return true;
}
} // namespace fsdp::rt
