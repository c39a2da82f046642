//===- Options.h - fsdp-run's command line ----------------------*- C++ -*-===//
//
// Every option of fsdp-run in one type, parsed and checked against each
// other before any rank connects: a bad command line ends the run with
// exit code 2 and the usage, never a half-started job.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUN_OPTIONS_H
#define FSDP_RUN_OPTIONS_H

#include "fsdp/runtime/io/Data.h"
#include "fsdp/runtime/train/LrSchedule.h"

#include <cstdint>
#include <string>

// The tool's own namespace: not fsdp::, whose symbols fsdp-run exports to
// the CUDA module (exports.list).
namespace fsdprun {
using namespace fsdp;
using namespace fsdp::rt;

/// Every option of fsdp-run as given, the defaults otherwise.
struct Options {
  std::string planPath, dataPath, tracePath, reportPath, initFromPath,
      exportPath, exportNames, flightRecorderDir, checkpointDir, resumeDir,
      blas = "auto", backend = "cpu", collectiveThreads = "auto",
      dataFormatName = "auto";
  DataFormat dataFormat = DataFormat::Auto;
  /// --export-dtype (f32 or bf16) and --export-shard-size (a directory's
  /// largest shard, in bytes; 0: not given).
  std::string exportDType;
  uint64_t exportShardBytes = 0;
  int64_t device = -1;
  bool tf32 = true, skipCollectives = false, syncCollectives = false;
  bool printRanks = false; ///< every rank's line: rank, node-local rank, host
  int64_t steps = 20, logEvery = 1, threads = 0;
  int64_t checkpointEvery = 0, keepLast = 0;
  /// --val-data, --val-every (0: after the last step only), --val-steps
  /// (0: every whole batch of the file).
  std::string valDataPath;
  int64_t valEvery = 0, valSteps = 0;
  double collectiveTimeout = 300.0;
  int64_t stallRank = -1, stallStep = 1;
  double stallSeconds = 0.0;
  /// --debug-throw RANK[:STEP] (-1: none).
  int64_t throwRank = -1, throwStep = 0;
  uint64_t seed = 1;
  double lr = -1.0;
  /// --lr-schedule, --warmup-steps, --min-lr (-1: not given).
  std::string lrScheduleName = "constant";
  LrSchedule::Kind lrKind = LrSchedule::Kind::Constant;
  int64_t warmupSteps = 0;
  double minLr = -1.0;
  /// --peak-tflops: one rank's device peak, for MFU (0: detect).
  double peakTflops = 0.0;
  bool profile = false, describe = false, heapBreakdown = false;
  /// --resume-changed-hyperparameters: resume with other optimizer
  /// settings or schedule, each change printed.
  bool resumeChangedHyperparameters = false;
};

/// The command line parsed and checked (exit code 2 and the usage on any
/// error; --help and --list-devices print and exit 0).
Options parseOptions(int argc, char **argv);

/// The CPU backend's threads (OpenMP's and the BLAS's): --threads, or one
/// per hardware thread.
int runThreads(const Options &o);

/// The recorder's dumps go to --flight-recorder DIR, else next to the
/// trace, else only to stderr.
std::string flightRecorderDir(const Options &o);

} // namespace fsdprun

#endif // FSDP_RUN_OPTIONS_H
