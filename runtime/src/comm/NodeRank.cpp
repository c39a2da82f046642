//===- NodeRank.cpp - a rank's index among the ranks of its node ----------===//

#include "fsdp/runtime/comm/NodeRank.h"
#include "fsdp/runtime/comm/Communicator.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <unistd.h>

namespace fsdp::rt {

std::optional<NodeRank> nodeLocalRank(const Communicator &comm,
                                      std::string &error) {
  // The launcher's word first: it placed the ranks, and it is what a
  // cluster's GPU binding (CUDA_VISIBLE_DEVICES per rank, or none) is
  // written against. The MPI split agrees with it on a real cluster.
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}) {
    const char *text = std::getenv(name);
    if (!text)
      continue;
    char *end = nullptr;
    errno = 0;
    long value = std::strtol(text, &end, 10);
    if (*text < '0' || *text > '9' || *end != '\0' || errno != 0 ||
        value > INT_MAX) {
      error = std::string(name) + " is '" + text +
              "', not a node-local rank (a non-negative integer)";
      return std::nullopt;
    }
    return NodeRank{int(value), name};
  }
  return NodeRank{comm.localRank(), "MPI_COMM_TYPE_SHARED"};
}

std::string hostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0')
    return "?";
  return name;
}

} // namespace fsdp::rt
