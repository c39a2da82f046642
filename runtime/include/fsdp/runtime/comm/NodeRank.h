//===- NodeRank.h - a rank's index among the ranks of its node --*- C++ -*-===//
//
// Which GPU a rank takes on a node of several: the launcher says (Open
// MPI's mpirun, SLURM's srun); without one that does, the MPI library's
// own split of the ranks by shared memory. Read once, at start-up.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_NODERANK_H
#define FSDP_RUNTIME_NODERANK_H

#include <optional>
#include <string>

namespace fsdp::rt {

class Communicator;

struct NodeRank {
  int rank = 0;       ///< this rank's index among its node's ranks
  std::string source; ///< the variable it came from, or the MPI split
};

/// OMPI_COMM_WORLD_LOCAL_RANK (mpirun), else SLURM_LOCALID (srun), else
/// `comm`'s localRank() (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)).
/// nullopt with `error` naming the variable when it is set but not a
/// rank (a non-negative decimal integer).
std::optional<NodeRank> nodeLocalRank(const Communicator &comm,
                                      std::string &error);

/// This machine's host name (gethostname), "?" when it has none.
std::string hostName();

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_NODERANK_H
