//===- CollectivesAllToAll.cpp - expert parallelism's all-to-alls ---------===//
//
// fsdp-collectives-test's all-to-all checks (CollectivesTest.cpp runs
// them, and its two fault-injection forms) against AllToAllCheck.h's
// reference: allToAllCounts and allToAllV on a communicator, the same
// through the flight recorder's watched communicator (its records), a rank
// that stalls before the rows' all-to-all (the watchdog names it), and
// rows over MPI's int counts (the job ends with a message).
//
//===----------------------------------------------------------------------===//

#include "CollectivesAllToAll.h"
#include "AllToAllCheck.h"
#include "fsdp/runtime/PlanFormat.h"
#include "fsdp/runtime/comm/Communicator.h"
#include "fsdp/runtime/comm/FlightRecorder.h"
#include "fsdp/runtime/support/OutputFile.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace fsdp::rt::test {
namespace {
/// The test's own expect(), passed in by the entry points.
AllToAllExpect expect = nullptr;

/// The counts exchange: `perPeer` int64 values to each rank, each rank's
/// block received in rank order, nothing written past them.
void checkAllToAllCounts(Communicator &comm, int64_t perPeer,
                         const std::string &which) {
  int N = comm.size(), k = comm.rank();
  std::vector<int64_t> send(size_t(N * perPeer)),
      recv(size_t(N * perPeer + 2), int64_t(0x5A5A5A5A5A5A5A5A));
  for (int r = 0; r < N; ++r)
    for (int64_t v = 0; v < perPeer; ++v)
      send[size_t(r * perPeer + v)] = allToAllCount(k, r, v);
  std::vector<int64_t> sent = send;
  comm.allToAllCounts(send.data(), recv.data(), perPeer);
  std::string wrong;
  for (int r = 0; r < N && wrong.empty(); ++r)
    for (int64_t v = 0; v < perPeer && wrong.empty(); ++v)
      if (recv[size_t(r * perPeer + v)] != allToAllCount(r, k, v))
        wrong =
            "from rank " + std::to_string(r) + ", value " + std::to_string(v);
  std::string what =
      which + "allToAllCounts (" + std::to_string(perPeer) + " per peer): ";
  expect(wrong.empty(), what + "wrong value " + wrong);
  expect(recv[size_t(N * perPeer)] == int64_t(0x5A5A5A5A5A5A5A5A) &&
             recv[size_t(N * perPeer + 1)] == int64_t(0x5A5A5A5A5A5A5A5A),
         what + "wrote past the end");
  expect(send == sent, what + "changed its input");
}

/// Case `c` of AllToAllCheck.h in `type`: the row counts exchanged first
/// (allToAllCounts, as expert parallelism does), then the rows; every
/// received row bit for bit, nothing written past them.
void checkAllToAllV(Communicator &comm, int c, plan::DType type,
                    const std::string &which) {
  int N = comm.size(), k = comm.rank();
  AllToAllCase a = allToAllCase(c, N, k, type);
  std::string what = which + "allToAllV " +
                     std::string(plan::kDTypeNames[size_t(type)]) + " (" +
                     allToAllCaseName(c) + "): ";
  std::vector<int64_t> counts(size_t(N), -1);
  comm.allToAllCounts(a.sendRows.data(), counts.data(), 1);
  expect(counts == a.recvRows, what + "the row counts exchanged differ");
  const size_t bytes = plan::dtypeSize(type);
  const size_t received = size_t(a.receivedRows * a.rowElements) * bytes;
  const size_t pad = 3 * size_t(a.rowElements) * bytes + 1;
  std::vector<unsigned char> recv(received + pad, 0xA5), sent = a.send;
  comm.allToAllV(a.send.data(), a.sendRows.data(), recv.data(),
                 a.recvRows.data(), a.rowElements, type);
  std::string wrong = allToAllWrong(c, N, k, type, a, recv.data());
  expect(wrong.empty(), what + "wrong element " + wrong);
  bool past = false;
  for (size_t b = received; b < recv.size(); ++b)
    past |= recv[b] != 0xA5;
  expect(!past, what + "wrote past the received rows");
  expect(a.send == sent, what + "changed its input");
}

} // namespace

void checkAllToAll(Communicator &comm, const std::string &which,
                   AllToAllExpect check) {
  expect = check;
  for (int64_t perPeer : {1, 3})
    checkAllToAllCounts(comm, perPeer, which);
  for (int c = 0; c < kAllToAllCases; ++c)
    for (plan::DType type :
         {plan::DType::F32, plan::DType::BF16, plan::DType::I32})
      checkAllToAllV(comm, c, type, which);
}

/// The all-to-alls through the flight recorder's watched communicator (on
/// a communicator split from `comm` with every rank): right results, and
/// records of kind all_to_all with this rank's bytes sent and received.
void checkWatchedAllToAll(Communicator &comm, AllToAllExpect check) {
  expect = check;
  int N = comm.size(), k = comm.rank();
  std::string why;
  std::unique_ptr<Communicator> part = comm.split(0, k, "world", why);
  expect(part != nullptr, "split for the watched all-to-all: " + why);
  if (!part)
    return;
  FlightRecorder recorder(k, N);
  std::unique_ptr<Communicator> watched =
      createWatchedCommunicator(std::move(part), recorder);
  // Every row to rank 0: each rank's bytes sent and received differ.
  const int c = 4;
  AllToAllCase a = allToAllCase(c, N, k, plan::DType::BF16);
  {
    RecordScope scope(CollectiveLabel{7, -1, "token dispatch all-to-all"});
    checkAllToAllV(*watched, c, plan::DType::BF16, "watched ");
  }
  std::vector<FlightRecorder::Record> records = recorder.snapshot();
  expect(records.size() == 2,
         "watched all-to-all: " + std::to_string(records.size()) +
             " records, not 2");
  if (records.size() != 2)
    return;
  const FlightRecorder::Record &counts = records[0], &rows = records[1];
  uint64_t countBytes = uint64_t(N) * 8, row = uint64_t(a.rowElements) * 2;
  expect(counts.kind == "all_to_all" && counts.bytes == countBytes &&
             counts.received == countBytes &&
             counts.state == FlightRecorder::State::Finished,
         "watched allToAllCounts: record " + recorder.format(2));
  expect(
      rows.kind == "all_to_all" && rows.bytes == uint64_t(a.sentRows) * row &&
          rows.received == uint64_t(a.receivedRows) * row &&
          rows.label.what == "token dispatch all-to-all" &&
          rows.label.step == 7 && rows.state == FlightRecorder::State::Finished,
      "watched allToAllV: record " + recorder.format(1));
  std::string line = recorder.format(1);
  std::string want = "all_to_all, " + std::to_string(rows.bytes) +
                     " bytes sent, " + std::to_string(*rows.received) +
                     " received, token dispatch all-to-all at step 7";
  expect(line.find(want) != std::string::npos,
         "watched allToAllV: the dump says '" + line + "', not '" + want + "'");
}

/// --stall-in-all-to-all RANK [DIR]: the job's collectives watched, with a
/// 4 s timeout (a rank of a loaded machine may start seconds late); the counts
/// exchange, then RANK sleeps where the others enter the rows' all-to-all. The
/// watchdog ends the job (exit 3).
int stallInAllToAll(std::unique_ptr<Communicator> raw, int stalled,
                    const std::string &dir) {
  int N = raw->size(), k = raw->rank();
  FlightRecorder recorder(k, N);
  std::unique_ptr<Communicator> comm =
      createWatchedCommunicator(std::move(raw), recorder);
  std::unique_ptr<Watchdog> watchdog =
      startWatchdog(recorder, *comm, 4.0, dir, removeTemporaryFiles);
  // Every rank has attached to the progress board: its name can go.
  {
    RecordScope scope(CollectiveLabel{0, -1, "progress-board barrier"});
    comm->allReduceMax(0);
  }
  if (comm->localRank() == 0)
    recorder.unlinkBoard();
  const int c = 0;
  AllToAllCase a = allToAllCase(c, N, k, plan::DType::F32);
  std::vector<int64_t> counts(size_t(N), 0);
  {
    RecordScope scope(CollectiveLabel{1, -1, "expert counts all-to-all"});
    comm->allToAllCounts(a.sendRows.data(), counts.data(), 1);
  }
  if (k == stalled) {
    std::fprintf(stderr, "collectives: rank %d stalls 30 s\n", k);
    std::this_thread::sleep_for(std::chrono::seconds(30));
  }
  std::vector<unsigned char> recv(size_t(a.receivedRows * a.rowElements) * 4 +
                                  1);
  {
    RecordScope scope(CollectiveLabel{1, -1, "token dispatch all-to-all"});
    comm->allToAllV(a.send.data(), a.sendRows.data(), recv.data(),
                    counts.data(), a.rowElements, plan::DType::F32);
  }
  std::printf("collectives: rank %d: no stall seen\n", k);
  return 1;
}

/// --all-to-all-over-int: 2^31 rows to rank 0 (no buffers: the
/// communicator must refuse before it reads them).
int allToAllOverInt(Communicator &comm) {
  int N = comm.size();
  std::vector<int64_t> rows(size_t(N), 0);
  rows[0] = int64_t(1) << 31;
  comm.allToAllV(nullptr, rows.data(), nullptr, rows.data(), 1,
                 plan::DType::BF16);
  std::printf("collectives: rank %d: an all-to-all over MPI's int counts "
              "returned\n",
              comm.rank());
  return 1;
}

int allToAllLarge(Communicator &comm, int64_t rows, int64_t rowElements) {
  int N = comm.size(), k = comm.rank(), last = N - 1;
  std::vector<int64_t> sendRows(size_t(N), 0), recvRows(size_t(N), 0);
  if (k == 0)
    sendRows[size_t(last)] = rows;
  comm.allToAllCounts(sendRows.data(), recvRows.data(), 1);
  auto value = [&](int64_t row, int64_t e) {
    return int32_t(uint32_t(row) * 2654435761u ^ uint32_t(e));
  };
  const size_t elements = size_t(rows * rowElements);
  std::vector<int32_t> send(k == 0 ? elements : 0),
      recv(k == last ? elements : 0, -1);
  for (int64_t row = 0; row < (k == 0 ? rows : 0); ++row)
    for (int64_t e = 0; e < rowElements; ++e)
      send[size_t(row * rowElements + e)] = value(row, e);
  comm.allToAllV(send.data(), sendRows.data(), recv.data(), recvRows.data(),
                 rowElements, plan::DType::I32);
  int64_t wrong = 0;
  for (int64_t row = 0; row < (k == last ? rows : 0); ++row)
    for (int64_t e = 0; e < rowElements; ++e)
      wrong += recv[size_t(row * rowElements + e)] != value(row, e);
  if (k == last)
    std::printf("collectives: rank %d received %lld rows of %lld i32 "
                "(%.3f GiB) from rank 0: %lld wrong\n",
                k, (long long)recvRows[0], (long long)rowElements,
                double(elements) * 4 / (1 << 30), (long long)wrong);
  return comm.allReduceMax(
             uint64_t(wrong || recvRows[0] != (k == last ? rows : 0)))
             ? 1
             : 0;
}

} // namespace fsdp::rt::test
