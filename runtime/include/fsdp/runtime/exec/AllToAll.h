//===- AllToAll.h - an all_to_all's rows per peer, checked ------*- C++ -*-===//
//
// Both backends run all_to_all (kernel 57) the same way: the G x L send
// and recv counts come to the host, each peer's rows are a row of counts
// summed, and counts that do not fit the input's N rows or the result's
// M rows stop the step with an error naming the kernel (never a
// truncation). Rows past those received are zeroed by the backend.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_ALLTOALL_H
#define FSDP_RUNTIME_ALLTOALL_H

#include <cstdint>
#include <string>
#include <vector>

namespace fsdp::rt {

/// Rows to (send) and from (recv) each of the G peers, and their totals.
struct AllToAllRows {
  std::vector<int64_t> send, recv;
  int64_t sent = 0, received = 0;
};

/// Sums `counts` (G x L) row by row into `rows`; false on a negative count.
inline bool sumCountRows(const int32_t *counts, int64_t G, int64_t L,
                         std::vector<int64_t> &rows, int64_t &total) {
  rows.assign(size_t(G), 0);
  total = 0;
  for (int64_t g = 0; g < G; ++g)
    for (int64_t l = 0; l < L; ++l) {
      if (counts[g * L + l] < 0)
        return false;
      rows[size_t(g)] += counts[g * L + l];
    }
  for (int64_t r : rows)
    total += r; // G L int32 values: no overflow
  return true;
}

/// all_to_all kernel #`kernel`'s rows from its send and recv counts (G x
/// L each, on the host), for an input of N rows and a result of M. False,
/// with `why` naming the kernel, the counts' total and the bound, when a
/// count is negative or the rows sent exceed N or those received M.
inline bool allToAllRows(const int32_t *send, const int32_t *recv, int64_t G,
                         int64_t L, int64_t N, int64_t M, size_t kernel,
                         AllToAllRows &rows, std::string &why) {
  std::string at = "kernel #" + std::to_string(kernel) + " (all_to_all): ";
  if (!sumCountRows(send, G, L, rows.send, rows.sent) ||
      !sumCountRows(recv, G, L, rows.recv, rows.received)) {
    why = at + "a negative row count in its send or recv counts";
    return false;
  }
  if (rows.sent > N)
    why = at + "its send counts total " + std::to_string(rows.sent) +
          " rows, more than the input's " + std::to_string(N);
  else if (rows.received > M)
    why = at + "its recv counts total " + std::to_string(rows.received) +
          " rows, more than the result's " + std::to_string(M) +
          " (the capacity the plan was compiled for)";
  else
    return true;
  return false;
}

/// The bytes an all-to-all of `rows` moves to and from other ranks than
/// `self` (rows of `rowBytes`): what the run summary counts per step.
inline uint64_t allToAllWireBytes(const AllToAllRows &rows, int self,
                                  uint64_t rowBytes) {
  uint64_t moved = 0;
  for (size_t g = 0; g < rows.send.size(); ++g)
    if (int(g) != self)
      moved += uint64_t(rows.send[g] + rows.recv[g]) * rowBytes;
  return moved;
}

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_ALLTOALL_H
