//===- Agreement.h - ranks agree before training ----------------*- C++ -*-===//
//
// Ranks that run different plans, seeds, learning rates or data would
// train silently to different (wrong) results, or deadlock in collectives
// that do not match. Before the first step every rank compares a list of
// named fields (the plan's checksum, every option that changes numbers,
// the data's identity) with rank 0's; on any difference every rank learns
// the same message and refuses to start.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_AGREEMENT_H
#define FSDP_RUNTIME_AGREEMENT_H

#include "fsdp/runtime/comm/Communicator.h"

#include <string>
#include <vector>

namespace fsdp::rt {

/// One thing every rank must have the same of: "plan checksum", "lr".
struct AgreedField {
  std::string name, value;
};

/// A collective: every rank calls it with its own fields. Returns an empty
/// string when all ranks agree with rank 0; otherwise one line, the same on
/// every rank, naming the first rank that differs and each field that
/// differs, with both values.
std::string checkRanksAgree(Communicator &comm,
                            const std::vector<AgreedField> &fields);

/// A collective: every rank says whether its own part of a setup step
/// (reading its checkpoint files, claiming the checkpoint directory)
/// succeeded. True on every rank when all did; otherwise false on every
/// rank with the same `error`: the lowest failing rank's, prefixed with
/// "rank K: " where there are several ranks. So every rank can refuse
/// with one message and exit on its own, none left waiting in a
/// collective for a rank that gave up.
bool allRanksSucceeded(Communicator &comm, bool ok, std::string &error);

/// A collective: `text` of rank `root`, on every rank.
std::string broadcastText(Communicator &comm, const std::string &text,
                          int root);

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_AGREEMENT_H
