//===- fsdp-run.cpp - train a compiled plan -------------------------------===//
//
//   fsdp-run model.plan [--steps N] [--data FILE] [--seed N] [--lr X]
//            [--log-every N] [--backend cpu|cuda] [--threads N]
//            [--blas openblas|blis] [--collective-threads auto|on|off]
//            [--device N] [--tf32 on|off] [--print-ranks]
//            [--init-from FILE] [--export FILE] [--export-names hf|ours]
//            [--trace FILE] [--report-json FILE] [--profile]
//            [--data-format auto|bytes|tokens] [--flight-recorder DIR]
//            [--skip-collectives] [--sync-collectives] [--describe]
//            [--checkpoint-dir DIR [--checkpoint-every K] [--keep-last M]]
//            [--resume DIR [--resume-changed-hyperparameters]]
//
// Loads and validates the plan, checks and reserves every output, makes
// the ranks agree on everything that changes numbers, allocates the arena
// once, initialises the parameters from their initializers (or from
// --init-from's safetensors file, each rank reading its shard), and trains:
// one progress line per step (step, loss, ms/step, tokens/s), then a
// summary with the measured arena high-water mark next to the compiler's
// prediction; --export writes the trained weights as safetensors;
// --checkpoint-dir writes sharded checkpoints, --resume continues from the
// newest, SIGTERM/SIGINT stop after a step with one. Every
// collective goes through the flight recorder and its
// watchdog (docs/runtime.md). The pieces live in the runtime library
// (Session, Trainer, StepInputs, RunOutputs, FlightRecorder, Agreement);
// this file parses options and reports.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/comm/Agreement.h"
#include "fsdp/runtime/comm/Communicator.h"
#include "fsdp/runtime/comm/FlightRecorder.h"
#include "fsdp/runtime/comm/NodeRank.h"
#include "fsdp/runtime/exec/Backend.h"
#include "fsdp/runtime/exec/Session.h"
#include "fsdp/runtime/io/Checkpoint.h"
#include "fsdp/runtime/io/Data.h"
#include "fsdp/runtime/io/Weights.h"
#include "fsdp/runtime/plan/Plan.h"
#include "fsdp/runtime/support/CommandLine.h"
#include "fsdp/runtime/support/HeapMeter.h"
#include "fsdp/runtime/support/OutputFile.h"
#include "fsdp/runtime/support/ProcessMemory.h"
#include "fsdp/runtime/train/LrSchedule.h"
#include "fsdp/runtime/train/Progress.h"
#include "fsdp/runtime/train/RunOutputs.h"
#include "fsdp/runtime/train/StepInputs.h"
#include "fsdp/runtime/train/Trainer.h"
#include "fsdp/runtime/train/Validation.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <vector>

using namespace fsdp;
using namespace fsdp::rt;

namespace {
struct Options {
  std::string planPath, dataPath, tracePath, reportPath, initFromPath,
      exportPath, exportNames, flightRecorderDir, checkpointDir, resumeDir,
      blas = "openblas", backend = "cpu", collectiveThreads = "auto",
      dataFormatName = "auto";
  DataFormat dataFormat = DataFormat::Auto;
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

const char *const kUsage =
    "usage: fsdp-run PLAN [--steps N] [--data FILE] [--seed N] [--lr X]\n"
    "                [--lr-schedule constant|cosine|linear]\n"
    "                [--warmup-steps W] [--min-lr X]\n"
    "                [--data-format auto|bytes|tokens]\n"
    "                [--val-data FILE] [--val-every K] [--val-steps S]\n"
    "                [--log-every N] [--backend cpu|cuda]\n"
    "                [--threads N] [--blas openblas|blis]      (cpu)\n"
    "                [--collective-threads auto|on|off]        (cpu)\n"
    "                [--device N] [--tf32 on|off]              (cuda)\n"
    "                [--print-ranks]\n"
    "                [--init-from FILE] [--export FILE]\n"
    "                [--export-names hf|ours]\n"
    "                [--trace FILE] [--report-json FILE]\n"
    "                [--profile] [--heap-breakdown] [--peak-tflops X]\n"
    "                [--collective-timeout SECONDS]\n"
    "                [--flight-recorder DIR]\n"
    "                [--skip-collectives] [--sync-collectives] [--describe]\n"
    "                [--checkpoint-dir DIR] [--checkpoint-every K]\n"
    "                [--keep-last M] [--resume DIR]\n"
    "                [--resume-changed-hyperparameters]\n"
    "       fsdp-run --list-devices\n";

/// Set once the ranks are connected: an error on any rank then ends the
/// whole job (MPI_Abort), so no rank waits forever in a collective.
Communicator *gComm = nullptr;

/// The error line, then the end of the run: of the whole job at more
/// than one rank (through gComm while it lives, else MPI_Abort on MPI's
/// world where MPI runs). Allocates nothing (an exception's `what`).
[[noreturn]] void dieWith(const char *prefix, const char *message, int code) {
  removeTemporaryFiles();
  if (gComm && gComm->size() > 1)
    std::fprintf(stderr, "fsdp-run: rank %d: error: %s%s\n", gComm->rank(),
                 prefix, message);
  else
    std::fprintf(stderr, "fsdp-run: error: %s%s\n", prefix, message);
  std::fflush(stderr);
  if (gComm && gComm->size() > 1)
    gComm->abort(code);
  abortMpiJob(code); // returns at one rank or without MPI
  std::exit(code);
}

[[noreturn]] void die(const std::string &message, int code = 1) {
  dieWith("", message.c_str(), code);
}

/// An exception that escaped: exit code 1, never an abort or a crash.
[[noreturn]] void dieUnexpected(const char *what) {
  dieWith("unexpected error: ", what, 1);
}

/// The largest step count any option takes: --steps + 1 (the step after
/// the last, as --debug-stall counts) stays far from overflowing.
constexpr int64_t kMaxSteps = 1000000000000000; // 10^15

/// `text` as an integer in [min, max] for `flag`, or the run ends (exit 2).
int64_t parseInt(const std::string &flag, const char *text, int64_t min,
                 int64_t max = kMaxSteps) {
  int64_t value = 0;
  std::string error;
  if (!parseIntegerOption(flag, text, min, max, value, error))
    die(error, 2);
  return value;
}

/// The command line, one argument at a time: `value()` takes the next
/// argument as the current option's value (or ends the run without one,
/// or with an empty one: an unset shell variable is no path).
struct ArgCursor {
  int argc;
  char **argv;
  int i = 1;
  std::string arg;
  const char *value() {
    const char *text = i + 1 < argc ? argv[i + 1] : nullptr;
    std::string why = optionValueError(arg, text);
    if (!why.empty())
      die(text ? why : why + "\n" + kUsage, 2);
    return argv[++i];
  }
};

/// A finite number in [min, max] for `flag` (seconds, a learning rate):
/// `what` says what in the error.
double parseNumber(const std::string &flag, const char *text, double min,
                   double max, const char *what = "a number") {
  double value = 0.0;
  std::string error;
  if (!parseNumberOption(flag, text, min, max, value, error, what))
    die(error, 2);
  return value;
}

/// The ranges of the floating options: a learning rate above 10 or a
/// timeout of more than 11 days is a typo, not a setting.
constexpr double kMaxLr = 10.0, kMaxSeconds = 1e6, kMaxTflops = 1e5;

/// The options of what is trained: steps, data, seed, learning rate,
/// logging. False when `c.arg` is none of them.
bool parseTrainingOption(ArgCursor &c, Options &o) {
  const std::string &arg = c.arg;
  if (arg == "--steps")
    o.steps = parseInt(arg, c.value(), 1);
  else if (arg == "--data")
    o.dataPath = c.value();
  else if (arg == "--data-format") {
    o.dataFormatName = c.value();
    if (!parseDataFormat(o.dataFormatName, o.dataFormat))
      die("--data-format expects auto, bytes or tokens, got '" +
              o.dataFormatName + "'",
          2);
  } else if (arg == "--seed")
    o.seed = uint64_t(parseInt(arg, c.value(), 0, INT64_MAX));
  else if (arg == "--lr")
    o.lr = parseNumber(arg, c.value(), 0.0, kMaxLr);
  else if (arg == "--log-every")
    o.logEvery = parseInt(arg, c.value(), 1);
  else if (arg == "--init-from")
    o.initFromPath = c.value();
  else if (arg == "--val-data")
    o.valDataPath = c.value();
  else if (arg == "--val-every")
    o.valEvery = parseInt(arg, c.value(), 1);
  else if (arg == "--val-steps")
    o.valSteps = parseInt(arg, c.value(), 1);
  else
    return false;
  return true;
}

/// The learning-rate schedule's options. False when `c.arg` is none of
/// them.
bool parseScheduleOption(ArgCursor &c, Options &o) {
  const std::string &arg = c.arg;
  if (arg == "--lr-schedule") {
    o.lrScheduleName = c.value();
    if (!parseLrScheduleKind(o.lrScheduleName, o.lrKind))
      die("--lr-schedule expects constant, cosine or linear, got '" +
              o.lrScheduleName + "'",
          2);
  } else if (arg == "--warmup-steps")
    o.warmupSteps = parseInt(arg, c.value(), 0);
  else if (arg == "--min-lr")
    o.minLr = parseNumber(arg, c.value(), 0.0, kMaxLr);
  else
    return false;
  return true;
}

/// The options of the backend that runs the kernels (CPU threads and BLAS,
/// CUDA device and TF32) and of where the ranks are (--print-ranks).
/// False when `c.arg` is none of them.
bool parseBackendOption(ArgCursor &c, Options &o) {
  const std::string &arg = c.arg;
  if (arg == "--threads")
    o.threads = parseInt(arg, c.value(), 1, 4096);
  else if (arg == "--blas")
    o.blas = c.value();
  else if (arg == "--backend") {
    o.backend = c.value();
    if (!isBackend(o.backend)) {
      std::string names;
      for (const std::string &name : backendNames())
        names += (names.empty() ? "" : " or ") + name;
      die("unknown backend '" + o.backend + "' (expected " + names + ")", 2);
    }
  } else if (arg == "--device")
    o.device = parseInt(arg, c.value(), 0, 65535);
  else if (arg == "--tf32") {
    std::string text = c.value();
    if (text != "on" && text != "off")
      die("--tf32 expects on or off, got '" + text + "'", 2);
    o.tf32 = text == "on";
  } else if (arg == "--print-ranks")
    o.printRanks = true;
  else
    return false;
  return true;
}

/// --debug-stall RANK:SECONDS[:STEP], fault injection for testing the
/// watchdog: rank RANK sleeps before step STEP, 1 by default; 0: before
/// the ranks agree, as a rank stuck reading its data; steps + 1: after the
/// last step, before the high-water mark and the final gather.
void parseDebugStall(const std::string &text, Options &o) {
  size_t colon = text.find(':');
  if (colon == std::string::npos)
    die("--debug-stall expects RANK:SECONDS[:STEP], got '" + text + "'", 2);
  o.stallRank =
      parseInt("--debug-stall", text.substr(0, colon).c_str(), 0, INT32_MAX);
  size_t second = text.find(':', colon + 1);
  o.stallSeconds = parseNumber(
      "--debug-stall", text.substr(colon + 1, second - colon - 1).c_str(), 0.0,
      kMaxSeconds, "seconds");
  if (second != std::string::npos)
    o.stallStep =
        parseInt("--debug-stall", text.c_str() + second + 1, 0, kMaxSteps + 1);
}

/// --debug-throw RANK[:STEP], fault injection for testing what an
/// exception that escapes does: rank RANK throws before step STEP (0 by
/// default: before the ranks agree, as --debug-stall counts).
void parseDebugThrow(const std::string &text, Options &o) {
  size_t colon = text.find(':');
  o.throwRank =
      parseInt("--debug-throw", text.substr(0, colon).c_str(), 0, INT32_MAX);
  if (colon != std::string::npos)
    o.throwStep =
        parseInt("--debug-throw", text.c_str() + colon + 1, 0, kMaxSteps + 1);
}

/// The options of the collectives: how they run, their watchdog and flight
/// recorder, fault injection. False when `c.arg` is none of them.
bool parseCollectiveOption(ArgCursor &c, Options &o) {
  const std::string &arg = c.arg;
  if (arg == "--collective-threads") {
    o.collectiveThreads = c.value();
    if (o.collectiveThreads != "auto" && o.collectiveThreads != "on" &&
        o.collectiveThreads != "off")
      die("--collective-threads expects auto, on or off, got '" +
              o.collectiveThreads + "'",
          2);
  } else if (arg == "--skip-collectives")
    o.skipCollectives = true;
  else if (arg == "--sync-collectives")
    o.syncCollectives = true;
  else if (arg == "--collective-timeout")
    o.collectiveTimeout =
        parseNumber(arg, c.value(), 0.0, kMaxSeconds, "seconds");
  else if (arg == "--flight-recorder")
    o.flightRecorderDir = c.value();
  else if (arg == "--debug-stall")
    parseDebugStall(c.value(), o);
  else if (arg == "--debug-throw")
    parseDebugThrow(c.value(), o);
  else
    return false;
  return true;
}

/// The options of what a run writes and prints besides its progress.
/// False when `c.arg` is none of them.
bool parseOutputOption(ArgCursor &c, Options &o) {
  const std::string &arg = c.arg;
  if (arg == "--report-json")
    o.reportPath = c.value();
  else if (arg == "--save") // the FSDPPARM dump, replaced by --export
    die("--save was removed: use --export FILE (the weights as safetensors; "
        "--export-names ours for the plan's names)",
        2);
  else if (arg == "--export")
    o.exportPath = c.value();
  else if (arg == "--export-names") {
    o.exportNames = c.value();
    if (o.exportNames != "hf" && o.exportNames != "ours")
      die("--export-names expects hf or ours, got '" + o.exportNames + "'", 2);
  } else if (arg == "--trace")
    o.tracePath = c.value();
  else if (arg == "--profile")
    o.profile = true;
  else if (arg == "--heap-breakdown")
    o.heapBreakdown = true;
  else if (arg == "--peak-tflops")
    o.peakTflops = parseNumber(arg, c.value(), 0.0, kMaxTflops);
  else if (arg == "--describe")
    o.describe = true;
  else
    return false;
  return true;
}

/// The options of checkpoints and resuming (docs/runtime.md). False when
/// `c.arg` is none of them.
bool parseCheckpointOption(ArgCursor &c, Options &o) {
  const std::string &arg = c.arg;
  if (arg == "--checkpoint-dir")
    o.checkpointDir = c.value();
  else if (arg == "--checkpoint-every")
    o.checkpointEvery = parseInt(arg, c.value(), 1);
  else if (arg == "--keep-last")
    o.keepLast = parseInt(arg, c.value(), 1, 1000000);
  else if (arg == "--resume")
    o.resumeDir = c.value();
  else if (arg == "--resume-changed-hyperparameters")
    o.resumeChangedHyperparameters = true;
  else
    return false;
  return true;
}

/// What the checkpoint options need of each other and of the build.
void checkCheckpointOptions(const Options &o) {
  if ((o.checkpointEvery || o.keepLast) && o.checkpointDir.empty())
    die("--checkpoint-every and --keep-last need --checkpoint-dir DIR", 2);
  if (!o.resumeDir.empty() && !o.initFromPath.empty())
    die("--resume continues a run; --init-from starts one: give one", 2);
  if (o.resumeChangedHyperparameters && o.resumeDir.empty())
    die("--resume-changed-hyperparameters needs --resume DIR", 2);
  for (const std::string *dir : {&o.checkpointDir, &o.resumeDir})
    if (!dir->empty() && !checkpointsAvailable())
      die(*dir + ": checkpoints: " + safeTensorsUnavailableReason());
}

Options parseOptions(int argc, char **argv) {
  Options o;
  for (ArgCursor c{argc, argv}; c.i < argc; ++c.i) {
    c.arg = argv[c.i];
    const std::string &arg = c.arg;
    if (parseTrainingOption(c, o) || parseScheduleOption(c, o) ||
        parseBackendOption(c, o) || parseCollectiveOption(c, o) ||
        parseOutputOption(c, o) || parseCheckpointOption(c, o))
      continue;
    if (arg == "--list-devices") {
      std::printf("%s\n", listCudaDevices().c_str());
      std::exit(0);
    } else if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (!arg.empty() && arg[0] == '-')
      die("unknown option '" + arg + "'\n" + kUsage, 2);
    else if (arg.empty())
      die("the plan's path is empty", 2);
    else if (o.planPath.empty())
      o.planPath = arg;
    else
      die("more than one plan given ('" + o.planPath + "', '" + arg + "')", 2);
  }
  if (o.planPath.empty())
    die(std::string("no plan given\n") + kUsage, 2);
  if (o.minLr >= 0.0 && o.lrKind == LrSchedule::Kind::Constant)
    die("--min-lr is where cosine and linear schedules end; it does not "
        "apply to --lr-schedule constant",
        2);
  checkCheckpointOptions(o);
  if ((o.valEvery || o.valSteps) && o.valDataPath.empty())
    die("--val-every and --val-steps need --val-data FILE", 2);
  if (!o.exportNames.empty() && o.exportPath.empty())
    die("--export-names needs --export FILE", 2);
  for (const auto &[flag, path] :
       {std::pair{"--init-from", &o.initFromPath}, {"--export", &o.exportPath}})
    if (!path->empty() && !safeTensorsAvailable())
      die(std::string(flag) + " " + *path + ": " +
          safeTensorsUnavailableReason());
  return o;
}

/// Whatever changes the numbers of a run, and everything that decides
/// which collectives a rank issues: ranks must agree on all of it.
std::vector<AgreedField> agreedFields(const Options &o, const Plan &plan,
                                      const TokenData *tokens,
                                      const TokenData *validation,
                                      const InitialWeights *weights,
                                      int threads) {
  char checksum[16];
  std::snprintf(checksum, sizeof(checksum), "%08x", plan.checksum);
  char lr[32];
  std::snprintf(lr, sizeof(lr), "%.17g", o.lr);
  char minLr[32];
  std::snprintf(minLr, sizeof(minLr), "%.17g", o.minLr);
  std::vector<AgreedField> fields = {
      {"plan checksum", checksum},
      {"steps", std::to_string(o.steps)},
      {"seed", std::to_string(o.seed)},
      {"lr", o.lr >= 0.0 ? lr : "compiled"},
      {"lr schedule", o.lrScheduleName + ", warmup " +
                          std::to_string(o.warmupSteps) + ", min " +
                          (o.minLr >= 0.0 ? minLr : "default")},
      {"backend", o.backend},
      {"skip collectives", o.skipCollectives ? "yes" : "no"},
      {"sync collectives", o.syncCollectives ? "yes" : "no"},
      {"collective threads", o.collectiveThreads},
      {"export", o.exportPath.empty() ? "no" : "yes"},
      {"checkpoint every",
       o.checkpointDir.empty() ? "no" : std::to_string(o.checkpointEvery)},
      {"resume", o.resumeDir.empty() ? "no" : "yes"},
      {"resume changed hyperparameters",
       o.resumeChangedHyperparameters ? "yes" : "no"},
  };
  // The weights' file by its header and size (reading the data to hash it
  // would read the whole file on every rank).
  char fingerprint[48] = "no";
  if (weights)
    std::snprintf(fingerprint, sizeof(fingerprint), "header hash %016llx",
                  (unsigned long long)weights->fingerprint());
  fields.push_back({"init from", fingerprint});
  // OpenMP threads and the GEMM library decide the CPU's summation order;
  // TF32 the GPU's GEMM precision.
  fields.push_back({"threads", std::to_string(threads)});
  fields.push_back({"blas", o.blas});
  fields.push_back({"tf32", o.tf32 ? "on" : "off"});
  for (const auto &[name, data] :
       {std::pair{"data", tokens}, {"validation data", validation}}) {
    if (!data)
      continue;
    char hash[24];
    std::snprintf(hash, sizeof(hash), "%016llx",
                  (unsigned long long)data->fingerprint());
    fields.push_back({name, std::string(data->formatName()) + ", " +
                                std::to_string(data->size()) +
                                " tokens, hash " + hash});
  }
  fields.push_back({"validation", std::to_string(o.valEvery) + " every, " +
                                      std::to_string(o.valSteps) + " batches"});
  return fields;
}

std::string bytes(uint64_t b) {
  char text[64];
  std::snprintf(text, sizeof(text), "%llu bytes (%.1f MiB)",
                (unsigned long long)b, double(b) / (1 << 20));
  return text;
}

/// The recorder's dumps go to --flight-recorder DIR, else next to the
/// trace, else only to stderr.
std::string flightRecorderDir(const Options &o) {
  if (!o.flightRecorderDir.empty()) {
    struct stat info;
    if (stat(o.flightRecorderDir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
      die(o.flightRecorderDir +
          ": --flight-recorder expects an existing directory");
    return o.flightRecorderDir;
  }
  if (o.tracePath.empty())
    return "";
  size_t slash = o.tracePath.rfind('/');
  return slash == std::string::npos ? "." : o.tracePath.substr(0, slash);
}

void checkWorldSize(const Plan &plan, int ranks) {
  if (int64_t(plan.worldSize) == ranks)
    return;
  die(plan.path + ": compiled for world size " +
      std::to_string(plan.worldSize) + ", but launched on " +
      std::to_string(ranks) + " rank" + (ranks == 1 ? "" : "s") +
      (plan.worldSize > 1
           ? " (launch it with mpirun -np " + std::to_string(plan.worldSize) +
                 ")"
           : " (recompile with --fsdp-train-pipeline=\"world-size=" +
                 std::to_string(ranks) + "\")"));
}

/// The heap live after each setup phase (--heap-breakdown): a fixed table,
/// so that keeping it allocates nothing.
struct HeapMarks {
  static constexpr int kMax = 8;
  const char *phase[kMax] = {};
  uint64_t live[kMax] = {};
  int count = 0;
  void mark(const char *name) {
    if (count < kMax) {
      phase[count] = name;
      live[count++] = heap::liveBytes();
    }
  }
};
HeapMarks gHeapMarks;

/// Rank 0's setup phases by the heap each added (docs/memory.md).
void printHeapBreakdown() {
  uint64_t before = 0;
  for (int i = 0; i < gHeapMarks.count; ++i) {
    uint64_t live = gHeapMarks.live[i];
    std::printf("heap: %-34s +%12lld bytes, %12llu live\n", gHeapMarks.phase[i],
                (long long)(live - before), (unsigned long long)live);
    before = live;
  }
}

/// The CPU backend's threads (OpenMP's and the BLAS's): --threads, or one
/// per hardware thread.
int runThreads(const Options &o) {
  return o.threads > 0 ? int(o.threads)
                       : int(std::thread::hardware_concurrency());
}

/// The heap while training, max over ranks: live after setup (the arena
/// included) and the high-water mark since.
struct HeapFigures {
  bool counted = false;
  uint64_t afterSetup = 0, peak = 0;
  /// The backend's device memory, each figure the max over ranks.
  Backend::DeviceMemory device;
  /// The resident set after setup and its peak while training (since the
  /// process started where the peak could not be restarted).
  ResidentMemory rssAfterSetup, rss;
  bool rssPeakRestarted = false;
};

/// Every rank's heap and device figures reduced to their maxima (a
/// collective); `setup` holds this rank's figures from after setup.
HeapFigures measureHeap(Communicator &comm, const Backend &backend,
                        const HeapFigures &setup) {
  RecordScope scope(CollectiveLabel{0, -1, "heap all-reduce"});
  HeapFigures heap = setup;
  // The heap's peak first: reading /proc allocates (a FILE).
  uint64_t heapPeak = heap::peakBytes();
  heap.rss = residentMemory();
  heap.rssAfterSetup.now = comm.allReduceMax(heap.rssAfterSetup.now);
  heap.rss.peak = comm.allReduceMax(heap.rss.peak);
  heap.counted = heap::counting();
  heap.afterSetup = comm.allReduceMax(heap.afterSetup);
  heap.peak = comm.allReduceMax(heapPeak);
  heap.device = backend.deviceMemory();
  heap.device.afterSetup = comm.allReduceMax(heap.device.afterSetup);
  heap.device.peak = comm.allReduceMax(heap.device.peak);
  return heap;
}

/// On a device: its memory in use next to the compiler's prediction, the
/// arena plus the libraries' share outside it.
void printDevice(const Plan &plan, const HeapFigures &h, int ranks) {
  const Backend::DeviceMemory &d = h.device;
  if (!d.measured) {
    std::printf("summary: outside the arena per rank on the device: %s "
                "predicted by the compiler (device memory not measured)\n",
                bytes(plan.outsideArenaCuda).c_str());
    return;
  }
  std::printf("summary: device memory per rank (max over %d ranks, the "
              "device's total less its free bytes): %s after setup, %s at "
              "most after a step, of %s\n",
              ranks, bytes(d.afterSetup).c_str(), bytes(d.peak).c_str(),
              bytes(d.total).c_str());
  std::printf("summary: predicted by the compiler: arena %s + outside it %s "
              "= %s\n",
              bytes(plan.arenaSize).c_str(),
              bytes(plan.outsideArenaCuda).c_str(),
              bytes(plan.arenaSize + plan.outsideArenaCuda).c_str());
}

/// The heap line of the summary: how far the process's heap rose above
/// the arena the compiler planned (docs/memory.md explains the rest).
/// The resident set: everything the process holds in memory, mapped or
/// allocated, code included.
/// On the CPU, the compiler's prediction of it at this run's threads.
void printResident(const Plan &plan, const Options &o, const HeapFigures &h,
                   int ranks) {
  if (!h.rss.measured)
    return;
  std::printf(
      "summary: resident memory per rank (max over %d ranks): %s "
      "after setup, peak %s %s (the arena, the heap, the BLAS's "
      "mapped buffers, stacks and code)\n",
      ranks, bytes(h.rssAfterSetup.now).c_str(), bytes(h.rss.peak).c_str(),
      h.rssPeakRestarted ? "while training" : "since the process started");
  if (o.backend == "cpu")
    std::printf("summary: resident memory predicted by the compiler: %s at "
                "%d BLAS threads (an estimate: the arena, the heap beyond "
                "it, %s of code and stacks, %s of BLAS panels per thread)\n",
                bytes(plan.predictedResident(runThreads(o))).c_str(),
                runThreads(o), bytes(plan.outsideArenaCpuMapped).c_str(),
                bytes(plan.blasBytesPerThread).c_str());
}

void printHeap(const Plan &plan, const Options &o, const HeapFigures &h,
               int ranks) {
  printResident(plan, o, h, ranks);
  if (!h.counted) {
    std::printf("summary: heap not counted (this build replaces malloc: "
                "sanitizers)\n");
    return;
  }
  uint64_t above = h.peak > plan.arenaSize ? h.peak - plan.arenaSize : 0;
  std::printf("summary: heap per rank (max over %d ranks): %s after setup, "
              "peak %s while training, %s above the arena (%.2f%% of it)\n",
              ranks, bytes(h.afterSetup).c_str(), bytes(h.peak).c_str(),
              bytes(above).c_str(),
              plan.arenaSize ? 100.0 * double(above) / double(plan.arenaSize)
                             : 0.0);
  // The compiler's prediction of the same (the memory report's "outside
  // the arena" lines); on CUDA the arena and that share are device memory.
  if (o.backend == "cpu")
    std::printf("summary: outside the arena per rank: %s measured, %s "
                "predicted by the compiler\n",
                bytes(above).c_str(), bytes(plan.outsideArenaCpu).c_str());
  else
    printDevice(plan, h, ranks);
}

/// The model FLOPs and, where the peak is known, the utilisation.
/// The tokens are the global batch's, the FLOPs one rank's share of it.
void printFlops(const ProgressMeter &meter, double secondsPerStep, int ranks) {
  double flops = meter.modelFlopsPerStep();
  std::printf("summary: model FLOPs per rank and step %.4g (%.4g per "
              "token), %.3f TFLOP/s per rank; ",
              flops, flops * ranks / double(meter.tokensPerStep()),
              flops / secondsPerStep / 1e12);
  double mfu = meter.mfu(secondsPerStep);
  if (mfu >= 0.0)
    std::printf("MFU %.1f%% of %.1f TFLOP/s\n", 100.0 * mfu,
                meter.peakFlops() / 1e12);
  else
    std::printf("MFU not known (no peak for this device: --peak-tflops)\n");
}

/// The summary's validation line: the last loss, the first and the best.
void printValidationSummary(const std::vector<ValidationPoint> &points) {
  if (points.empty())
    return;
  const ValidationPoint *best = &points.front();
  double seconds = 0.0;
  for (const ValidationPoint &p : points) {
    seconds += p.seconds;
    if (p.loss < best->loss)
      best = &p;
  }
  std::printf("summary: validation loss %.6f after step %lld (first %.6f "
              "after step %lld, best %.6f after step %lld; %zu evaluations "
              "of %lld batches, %.3f s each)\n",
              points.back().loss, (long long)points.back().step,
              points.front().loss, (long long)points.front().step, best->loss,
              (long long)best->step, points.size(),
              (long long)points.back().batches, seconds / points.size());
}

void printSummary(const Plan &plan, const Options &o, const TrainResult &r,
                  const HeapFigures &heap, const ProgressMeter &meter,
                  int ranks) {
  // The steps this process ran: first.. (a resumed run starts later); the
  // mean leaves out the first of them when there are others.
  int64_t ran = int64_t(r.losses.size()), first = r.lastStep - ran + 1;
  char over[48];
  std::snprintf(over, sizeof(over), ran > 1 ? "%lld..%lld" : "%lld",
                (long long)(ran > 1 ? first + 1 : first),
                (long long)r.lastStep);
  std::printf("summary: %lld steps, loss %.6f -> %.6f, %.2f ms/step, %.0f "
              "tok/s (mean over steps %s)\n",
              (long long)ran, r.losses.front(), r.losses.back(),
              r.meanSeconds * 1e3, meter.tokensPerStep() / r.meanSeconds, over);
  printFlops(meter, r.meanSeconds, ranks);
  printValidationSummary(r.validation);
  std::printf(
      "summary: arena high-water mark per rank %s measured (max "
      "over %d ranks), %s predicted (%s)\n",
      bytes(r.highWaterMarkMax).c_str(), ranks, bytes(plan.arenaSize).c_str(),
      r.highWaterMark == plan.arenaSize && r.highWaterMarkMax == plan.arenaSize
          ? "match"
          : "MISMATCH");
  std::printf("summary: predicted live peak %s: params %llu, grads %llu, "
              "optimizer %llu, activations %llu, scratch %llu, gathered "
              "%llu, inputs %llu\n",
              bytes(plan.peakBytes).c_str(),
              (unsigned long long)plan.peak.params,
              (unsigned long long)plan.peak.grads,
              (unsigned long long)plan.peak.optimizer,
              (unsigned long long)plan.peak.activations,
              (unsigned long long)plan.peak.scratch,
              (unsigned long long)plan.peak.gathered,
              (unsigned long long)plan.peak.inputs);
  printHeap(plan, o, heap, ranks);
  if (o.heapBreakdown && heap.counted)
    printHeapBreakdown();
}

void printProfile(const KernelTimes &t, int64_t timedSteps) {
  double all = 0.0;
  for (double s : t.seconds)
    all += s;
  std::printf("profile: kernel time by kind over %lld steps\n",
              (long long)timedSteps);
  for (size_t k = 0; k < plan::kKernels.size(); ++k)
    if (t.calls[k])
      std::printf("profile: %-24s %8lld calls %10.2f ms %6.1f%%\n",
                  std::string(plan::kKernels[k].name).c_str(),
                  (long long)t.calls[k], t.seconds[k] * 1e3,
                  100.0 * t.seconds[k] / all);
}

/// The plan's step inputs and, for a token plan, its data, loaded and
/// checked against the model before any rank agrees or trains. Returns
/// the data a token plan trains on, null for a feature plan.
const TokenData *loadInputs(const Options &o, const Plan &plan, int ranks,
                            StepInputs &inputs, TokenData &tokens) {
  std::string error;
  if (!classifyInputs(plan, inputs, error))
    die(error);
  if (inputs.kind != InputKind::Tokens) {
    if (!o.dataPath.empty())
      die(plan.path + " classifies features; --data feeds token models only");
    return nullptr;
  }
  if (o.dataPath.empty())
    die(plan.path + ": a language model trains on --data FILE (text, or "
                    "llm.c uint16 tokens; data/corpus.txt in the source "
                    "tree is a small English text)",
        2);
  if (!loadTrainingData(inputs, ranks, o.dataPath, o.dataFormat, tokens, error))
    die(error);
  return &tokens;
}

/// Rank 0's line on what each evaluation reads and when it runs.
void printValidationPlan(const Options &o, const Plan &plan, const Validator &v,
                         int64_t tokensPerBatch) {
  const ValidationOptions &s = v.settings();
  std::string when =
      s.every ? "after every " + std::to_string(s.every) + " steps and the last"
              : "after the last step";
  std::printf("fsdp-run: validation: %lld batches (%lld tokens) of %s %s "
              "(the plan's evaluation step: %u of %zu kernels, %zu "
              "collectives finished at its end)\n",
              (long long)s.batches, (long long)(s.batches * tokensPerBatch),
              o.valDataPath.c_str(), when.c_str(), plan.evalKernels,
              plan.program.size(), plan.evalDrainTokens.size());
}

/// --val-data's tokens, checked against the model and the plan's
/// evaluation step (null without --val-data); `batches` is how many global
/// batches each evaluation reads.
const TokenData *loadValidation(const Options &o, const Plan &plan, int ranks,
                                const StepInputs &inputs, TokenData &tokens,
                                int64_t &batches) {
  if (o.valDataPath.empty())
    return nullptr;
  std::string error;
  if (inputs.kind != InputKind::Tokens)
    die(plan.path + " classifies features; --val-data evaluates token "
                    "models only",
        2);
  if (plan.evalKernels == 0)
    die(plan.path + ": the plan marks no evaluation step (no kernel writes "
                    "its loss); --val-data needs one",
        2);
  if (!loadTrainingData(inputs, ranks, o.valDataPath, o.dataFormat, tokens,
                        error))
    die(error);
  int64_t global = inputs.batch * ranks;
  int64_t whole = tokens.windowsPerEpoch(global, inputs.seq);
  if (o.valSteps > whole)
    die(o.valDataPath + ": --val-steps " + std::to_string(o.valSteps) +
            " needs " + std::to_string(o.valSteps) + " batches of " +
            std::to_string(global) + " x " + std::to_string(inputs.seq) +
            " tokens; the file holds " + std::to_string(whole),
        2);
  batches = o.valSteps ? o.valSteps : whole;
  return &tokens;
}

/// Sleeps where --debug-stall says: rank stallRank before step `step`;
/// throws where --debug-throw says.
void stallAt(const Options &o, int rank, int64_t step) {
  if (o.stallRank == rank && o.stallStep == step)
    std::this_thread::sleep_for(std::chrono::duration<double>(o.stallSeconds));
  if (o.throwRank == rank && o.throwStep == step)
    throw std::runtime_error("--debug-throw: rank " + std::to_string(rank) +
                             " before step " + std::to_string(step));
}

/// The ranks compare everything that changes numbers; false, each rank
/// having said why on its own, when they differ.
bool ranksAgree(const Options &o, const Plan &plan, Communicator &comm,
                const TokenData *tokens, const TokenData *validation,
                const InitialWeights *weights) {
  int threads = runThreads(o);
  RecordScope scope(CollectiveLabel{0, -1, "rank agreement"});
  std::string disagreement = checkRanksAgree(
      comm, agreedFields(o, plan, tokens, validation, weights, threads));
  if (disagreement.empty())
    return true;
  // Every rank knows the same: each refuses and exits on its own.
  std::fprintf(stderr, "fsdp-run: rank %d: error: %s\n", comm.rank(),
               disagreement.c_str());
  removeTemporaryFiles();
  return false;
}

/// The backend --backend names, started on the ranks' communicator.
std::unique_ptr<Backend> startBackend(const Options &o, Communicator &comm,
                                      const NodeRank &local) {
  std::string error;
  std::unique_ptr<Backend> backend;
  {
    RecordScope scope(CollectiveLabel{0, -1, "backend start-up"});
    BackendOptions backendOptions;
    backendOptions.comm = &comm;
    backendOptions.threads = int(o.threads);
    backendOptions.blas = o.blas;
    backendOptions.collectiveThreads = o.collectiveThreads;
    backendOptions.device = int(o.device);
    backendOptions.localRank = local.rank;
    backendOptions.tf32 = o.tf32;
    backendOptions.collectiveTimeout = o.collectiveTimeout;
    backend = createBackend(o.backend, backendOptions, error);
  }
  if (!backend)
    die(o.backend + " backend: " + error);
  return backend;
}

/// This rank's index on its node (it picks the GPU), and with
/// --print-ranks every rank's line saying where it runs.
NodeRank findNodeRank(const Options &o, const Communicator &comm) {
  std::string error;
  std::optional<NodeRank> local = nodeLocalRank(comm, error);
  if (!local)
    die(error, 2);
  if (o.printRanks) {
    std::printf("fsdp-run: rank %d of %d: node-local rank %d (%s; MPI's "
                "shared-memory split: %d of %d), host %s\n",
                comm.rank(), comm.size(), local->rank, local->source.c_str(),
                comm.localRank(), comm.localSize(), hostName().c_str());
    std::fflush(stdout);
  }
  return *local;
}

/// The session set up as the options say, its parameters initialised.
void startSession(Session &session, const Options &o, FlightRecorder &recorder,
                  const InitialWeights *weights) {
  std::string error;
  session.setFlightRecorder(&recorder);
  session.setSkipCollectives(o.skipCollectives);
  session.setSynchronousCollectives(o.syncCollectives);
  if (!session.initialize(o.seed, error, weights))
    die(error);
  if (o.lr >= 0.0)
    session.overrideLearningRate(o.lr);
  if (!o.tracePath.empty()) {
    if (heap::counting())
      session.setHeapSampler(heap::liveBytes);
    session.startTrace();
  }
}

/// Rank 0's lines before the first step: the backend and the ranks, the
/// plan, the data (`tokens`; null: the synthetic teacher).
void printStart(const Options &o, const Plan &plan, const Backend &backend,
                const Communicator &comm, const std::string &collectiveMode,
                const StepInputs &inputs, const TokenData *tokens) {
  int64_t globalBatch = inputs.batch * comm.size();
  std::printf("fsdp-run: %s; %s; started collectives run %s\n",
              backend.description().c_str(), comm.description().c_str(),
              collectiveMode.c_str());
  if (o.skipCollectives)
    std::printf("fsdp-run: --skip-collectives: compute only, no "
                "communication; the losses mean nothing\n");
  std::printf("fsdp-run: %s, %zu parameters in %zu units, %zu kernels, "
              "global batch %lld, data %s\n",
              plan.path.c_str(), plan.params.size(), plan.units.size(),
              plan.program.size(), (long long)globalBatch,
              tokens ? tokens->source().c_str() : "(synthetic teacher)");
  if (tokens)
    std::printf("fsdp-run: data: %zu tokens (%s), %lld batches of %lld x "
                "%lld per epoch, %lld tail tokens unused\n",
                tokens->size(), tokens->formatName(),
                (long long)tokens->windowsPerEpoch(globalBatch, inputs.seq),
                (long long)globalBatch, (long long)inputs.seq,
                (long long)tokens->unusedTail(globalBatch, inputs.seq));
}

/// The schedule the options ask for, peaking at the session's rate (--lr
/// or the compiled one); none for a constant rate without warmup.
std::optional<LrSchedule> makeSchedule(const Options &o, const Plan &plan,
                                       const Session &session) {
  if (o.lrKind == LrSchedule::Kind::Constant && o.warmupSteps == 0)
    return std::nullopt;
  std::optional<double> peak = session.learningRate();
  if (!peak)
    die(plan.path + ": the plan has no optimizer; --lr-schedule and "
                    "--warmup-steps set its learning rate");
  LrSchedule schedule;
  schedule.kind = o.lrKind;
  schedule.peak = *peak;
  schedule.warmup = o.warmupSteps;
  schedule.minimum = o.minLr >= 0.0 ? o.minLr : 0.0;
  schedule.steps = o.steps;
  if (schedule.minimum > schedule.peak) {
    char text[128];
    std::snprintf(text, sizeof(text),
                  "--min-lr %.6g is above the peak learning rate %.6g",
                  schedule.minimum, *peak);
    die(text, 2);
  }
  return schedule;
}

/// Whether the plan's GEMMs run in bf16 (the peak MFU divides by).
bool gemmsInBf16(const Plan &plan) {
  for (const Instruction &inst : plan.program)
    if (inst.kernel->opcode == plan::Opcode::Linear)
      return inst.elementType == plan::DType::BF16;
  return false;
}

/// The progress line's constants: one rank's model FLOPs per step and its
/// device's peak (--peak-tflops, or what the backend knows of it).
ProgressMeter makeProgressMeter(const Options &o, const Plan &plan,
                                const Backend &backend, int64_t tokensPerStep) {
  double peak = o.peakTflops > 0.0 ? o.peakTflops * 1e12
                                   : backend.peakFlops(gemmsInBf16(plan));
  return ProgressMeter(o.steps, tokensPerStep, plan.modelFlops, peak);
}

/// The memory a progress line shows: the device's in use where the
/// backend measures it, else this process's resident set.
uint64_t memoryInUse(const Backend &backend) {
  Backend::DeviceMemory device = backend.deviceMemory();
  return device.measured ? device.peak : residentBytesNow();
}

/// What a checkpoint records of this run, and --resume checks.
RunIdentity runIdentity(const Options &o, const Plan &plan,
                        const StepInputs &inputs, const TokenData *data,
                        int ranks) {
  RunIdentity run;
  run.optimizer = optimizerSettings(
      plan, o.lr >= 0.0 ? std::optional<double>(o.lr) : std::nullopt);
  run.seed = o.seed;
  if (data) {
    run.dataKind = "tokens";
    run.dataSource = data->source();
    run.dataFingerprint = data->fingerprint();
    run.dataTokens = data->size();
  }
  run.globalBatch = inputs.batch * ranks;
  run.seq = inputs.kind == InputKind::Tokens ? inputs.seq : inputs.features;
  char lr[32];
  std::snprintf(lr, sizeof(lr), "%.17g", o.lr);
  run.lr = o.lr >= 0.0 ? lr : "compiled";
  // A decaying schedule is a function of --steps too.
  run.lrSchedule =
      o.lrScheduleName + ", warmup " + std::to_string(o.warmupSteps);
  if (o.lrKind != LrSchedule::Kind::Constant) {
    std::snprintf(lr, sizeof(lr), "%.17g", o.minLr >= 0.0 ? o.minLr : 0.0);
    run.lrSchedule += std::string(", min ") + lr + ", over " +
                      std::to_string(o.steps) + " steps";
  }
  run.steps = o.steps;
  run.threads = runThreads(o);
  return run;
}

/// An error every rank has (an agreement, or a collective that carried
/// one rank's error to all): each rank says it and ends its run with exit
/// code 1 on its own, no MPI_Abort.
int refuseTogether(const Communicator &comm, const std::string &error) {
  removeTemporaryFiles();
  if (comm.size() > 1)
    std::fprintf(stderr, "fsdp-run: rank %d: error: %s\n", comm.rank(),
                 error.c_str());
  else
    std::fprintf(stderr, "fsdp-run: error: %s\n", error.c_str());
  std::fflush(stderr);
  return 1;
}

/// --resume: the newest complete checkpoint loaded into the session;
/// `first` is the first step to run (1 without --resume). False with
/// `error`, the same on every rank.
bool resume(const Options &o, const Plan &plan, Communicator &comm,
            Session &session, const RunIdentity &run, int64_t &first,
            std::string &error) {
  first = 1;
  if (o.resumeDir.empty())
    return true;
  ResumePoint point;
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  if (!findResumePoint(o.resumeDir, plan, run, comm, point, error,
                       o.resumeChangedHyperparameters))
    return false;
  auto found = Clock::now();
  if (!loadCheckpoint(point, plan, session, comm, error))
    return false;
  std::chrono::duration<double> checked = found - start,
                                loaded = Clock::now() - found;
  if (comm.rank() == 0) {
    for (const std::string &note : point.notes)
      std::printf("fsdp-run: --resume: %s\n", note.c_str());
    std::printf("fsdp-run: resuming from %s: steps %lld..%lld (checked in "
                "%.3f s, rank 0's shards loaded in %.3f s)\n",
                point.stepDir.c_str(), (long long)point.manifest.step + 1,
                (long long)o.steps, checked.count(), loaded.count());
  }
  first = point.manifest.step + 1;
  return true;
}

/// A run that a signal stopped: rank 0's line; the exit code.
int reportStop(const Options &o, const Communicator &comm, int64_t step,
               int signal) {
  removeTemporaryFiles();
  if (comm.rank() != 0)
    return kStoppedExitCode;
  const char *name = signal == SIGINT    ? "SIGINT"
                     : signal == SIGTERM ? "SIGTERM"
                                         : "a signal";
  if (o.checkpointDir.empty())
    std::printf("fsdp-run: %s at step %lld: stopped (no --checkpoint-dir: "
                "nothing saved)\n",
                name, (long long)step);
  else
    std::printf("fsdp-run: %s at step %lld: checkpoint %s written; resume "
                "with --resume %s\n",
                name, (long long)step,
                stepDirectory(o.checkpointDir, step).c_str(),
                o.checkpointDir.c_str());
  std::fflush(stdout);
  return kStoppedExitCode;
}

/// Rank 0's line after an evaluation. Formatted on the stack: a step
/// allocates nothing.
void printValidation(const ValidationPoint &p, int64_t tokensPerBatch) {
  std::printf("fsdp-run: validation after step %lld: loss %.6f over %lld "
              "batches (%lld tokens) in %.3f s\n",
              (long long)p.step, p.loss, (long long)p.batches,
              (long long)(p.batches * tokensPerBatch), p.seconds);
}

/// Trains steps `first`..--steps, rank 0 printing a progress line for
/// every logged step; `stall` runs before each, `control` after each.
TrainResult train(const Options &o, Session &session, Communicator &comm,
                  BatchFeeder &feeder, const std::optional<LrSchedule> &lr,
                  ProgressMeter &meter, const Backend &backend,
                  const std::function<void(int64_t)> &stall, int64_t first,
                  StepControl &control, Validator *validator) {
  TrainOptions trainOptions;
  trainOptions.validator = validator;
  trainOptions.schedule = lr;
  trainOptions.steps = o.steps;
  trainOptions.lossesMeanNothing = o.skipCollectives;
  trainOptions.beforeStep = stall;
  trainOptions.firstStep = first;
  bool lead = comm.rank() == 0;
  trainOptions.afterStep = [&](int64_t step, bool &stop, std::string &error) {
    Checkpointer *c = control.checkpointer;
    int64_t before = c ? c->lastWritten() : -1;
    if (!control.afterStep(step, comm, stop, error))
      return false;
    if (lead && c && c->lastWritten() != before)
      std::printf("fsdp-run: %s\n", c->lastNote().c_str());
    return true;
  };
  Trainer trainer(session, comm, feeder, trainOptions);
  TrainResult result;
  std::string error;
  bool trained = trainer.run(
      [&](const StepResult &s) {
        meter.record(s.seconds);
        if (lead && (s.step % o.logEvery == 0 || s.step == first ||
                     s.step == o.steps)) {
          // A plan that clips its gradients reports their global norm.
          char line[320];
          meter.format(line, sizeof(line), s.step, s.loss, s.lr,
                       s.gradNorm ? *s.gradNorm : -1.0, s.seconds,
                       memoryInUse(backend));
          std::printf("%s\n", line);
        }
        if (lead && s.validation)
          printValidation(*s.validation, meter.tokensPerStep());
        std::fflush(stdout);
      },
      result, error);
  if (!trained)
    die(error);
  return result;
}

/// After the last step: the parameters gathered, rank 0's summary and
/// profile, then every reserved output written.
void finish(const Options &o, const Plan &plan, Session &session,
            const Backend &backend, const Communicator &comm,
            const std::string &collectiveMode, const TrainResult &result,
            const HeapFigures &heap, const ProgressMeter &meter,
            RunOutputFiles &outputs, WeightNaming naming) {
  int64_t tokensPerStep = meter.tokensPerStep();
  std::string error;
  bool lead = comm.rank() == 0;
  std::vector<std::vector<float>> finalParams;
  if (!o.exportPath.empty())
    finalParams = session.gatherParams();
  if (lead)
    printSummary(plan, o, result, heap, meter, comm.size());
  if (o.profile && lead)
    printProfile(session.kernelTimes(), result.timedSteps);
  if (outputs.weights.active()) {
    if (!writeWeights(plan, naming, finalParams, outputs.weights, error))
      die(error);
    std::printf("fsdp-run: exported %zu parameters to %s (%s names)\n",
                plan.params.size(), o.exportPath.c_str(),
                naming == WeightNaming::Ours ? "our" : "Hugging Face");
  }
  if (outputs.report.active()) {
    RunReport report =
        makeRunReport(plan, result, tokensPerStep, backend.description(),
                      collectiveMode, comm.size(), o.skipCollectives);
    report.heapCounted = heap.counted;
    report.heapAfterSetup = heap.afterSetup;
    report.heapPeak = heap.peak;
    report.outsidePredicted =
        o.backend == "cpu" ? plan.outsideArenaCpu : plan.outsideArenaCuda;
    report.rssMeasured = heap.rss.measured;
    report.rssAfterSetup = heap.rssAfterSetup.now;
    report.rssPeak = heap.rss.peak;
    if (o.backend == "cpu")
      report.rssPredicted = plan.predictedResident(runThreads(o));
    report.deviceMeasured = heap.device.measured;
    report.deviceAfterSetup = heap.device.afterSetup;
    report.devicePeak = heap.device.peak;
    report.modelFlops = meter.modelFlopsPerStep();
    report.peakFlops = meter.peakFlops();
    if (!writeReport(report, outputs.report, error))
      die(error);
  }
  if (outputs.trace.active() &&
      !writeTrace(plan, session, comm.rank(), outputs.trace, error))
    die(error);
}

/// --init-from's file, mapped and matched to the plan (null without it).
std::unique_ptr<InitialWeights> openWeights(const Options &o,
                                            const Plan &plan) {
  if (o.initFromPath.empty())
    return nullptr;
  auto weights = std::make_unique<InitialWeights>();
  std::string error;
  if (!weights->open(plan, o.initFromPath, error))
    die(error);
  return weights;
}

/// Rank 0's lines on where the weights come from and go to.
void printWeightLines(const Options &o, const Plan &plan,
                      const InitialWeights *weights, WeightNaming naming) {
  if (weights)
    std::printf("fsdp-run: --init-from %s: %s\n", o.initFromPath.c_str(),
                weights->summary().c_str());
  if (!o.exportPath.empty() && o.exportNames.empty() &&
      naming == WeightNaming::Ours)
    std::printf("fsdp-run: --export %s: our names (only fsdp-gen's GPT-2 "
                "and Llama have Hugging Face names; this is %s)\n",
                o.exportPath.c_str(),
                detectFamily(plan) == ModelFamily::MLP ? "an MLP"
                                                       : "another model");
}

/// Everything after the ranks connected: the plan, the data and outputs,
/// the agreement, the session and training. `comm` and `recorder` outlive
/// it: run() catches what it throws while they live.
int runOnRanks(const Options &options, Communicator &comm,
               FlightRecorder &recorder, const NodeRank &local) {
  std::string error;
  Plan plan;
  if (!loadPlan(options.planPath, plan, error))
    die(error);
  if (options.describe) {
    if (comm.rank() == 0)
      std::fputs(describePlan(plan).c_str(), stdout);
    return 0;
  }
  checkWorldSize(plan, comm.size());
  gHeapMarks.mark("plan");
  StepInputs inputs;
  TokenData tokens;
  const TokenData *data =
      loadInputs(options, plan, comm.size(), inputs, tokens);
  TokenData valTokens;
  int64_t valBatches = 0;
  const TokenData *validation =
      loadValidation(options, plan, comm.size(), inputs, valTokens, valBatches);
  gHeapMarks.mark("data");
  std::unique_ptr<InitialWeights> weights = openWeights(options, plan);
  if (weights)
    gHeapMarks.mark("--init-from file (mapped, matched)");
  // Every output is checked and reserved now, not after the last step.
  RunOutputFiles outputs;
  RunOutputPaths paths{options.tracePath, options.reportPath,
                       options.exportPath};
  if (validation)
    paths.evaluations =
        options.valEvery ? options.steps / options.valEvery + 1 : 1;
  if (!options.exportPath.empty() &&
      !chooseExportNaming(plan, options.exportNames, paths.weightNames, error))
    die(error, 2);
  if (!reserveRunOutputs(plan, paths, options.steps, comm.rank(), comm.size(),
                         outputs, error))
    die(error);

  auto stall = [&](int64_t step) { stallAt(options, comm.rank(), step); };
  stall(0);
  if (!ranksAgree(options, plan, comm, data, validation, weights.get()))
    return 1;
  // Every rank of the node has attached by now: the board's name can go.
  if (comm.localRank() == 0)
    recorder.unlinkBoard();

  std::unique_ptr<Backend> backend = startBackend(options, comm, local);
  gHeapMarks.mark("backend (BLAS, thread pools)");
  Session session(plan, *backend, comm);
  startSession(session, options, recorder, weights.get());
  if (weights)
    weights->close(); // its mapped pages are no part of training
  std::string collectiveMode = options.syncCollectives
                                   ? "synchronously (--sync-collectives)"
                                   : backend->collectiveMode();
  if (comm.rank() == 0) {
    printStart(options, plan, *backend, comm, collectiveMode, inputs, data);
    printWeightLines(options, plan, weights.get(), paths.weightNames);
  }
  BatchFeeder feeder(inputs, data, options.seed, comm.rank(), comm.size());
  std::optional<BatchFeeder> valFeeder;
  std::optional<Validator> validator;
  if (validation) {
    valFeeder.emplace(inputs, validation, options.seed, comm.rank(),
                      comm.size());
    validator.emplace(
        session, comm, *valFeeder,
        ValidationOptions{options.valEvery, valBatches, options.steps});
    if (comm.rank() == 0)
      printValidationPlan(options, plan, *validator, feeder.tokensPerStep());
  }
  std::optional<LrSchedule> schedule = makeSchedule(options, plan, session);
  if (schedule && comm.rank() == 0)
    std::printf("fsdp-run: lr schedule: %s\n", schedule->describe().c_str());
  if (std::optional<double> clip = session.maxGradNorm();
      clip && comm.rank() == 0)
    std::printf("fsdp-run: gradient clipping: global norm at most %g (in "
                "the compiled step)\n",
                *clip);
  RunIdentity identity = runIdentity(options, plan, inputs, data, comm.size());
  int64_t first = 1;
  if (!resume(options, plan, comm, session, identity, first, error))
    return refuseTogether(comm, error);
  std::unique_ptr<Checkpointer> checkpointer;
  if (!options.checkpointDir.empty()) {
    checkpointer = std::make_unique<Checkpointer>(
        plan, session, comm,
        CheckpointOptions{options.checkpointDir, options.checkpointEvery,
                          options.keepLast},
        identity);
    if (!checkpointer->prepare(error))
      return refuseTogether(comm, error);
    if (comm.rank() == 0 && !checkpointer->lockTakenOver().empty())
      std::printf("fsdp-run: %s\n", checkpointer->lockTakenOver().c_str());
  }
  StepControl control{checkpointer.get(), options.steps};
  // Setup is over (a resumed checkpoint loaded): from here on, whatever
  // the heap gains is what a step (or writing a checkpoint) allocates
  // outside the arena.
  gHeapMarks.mark("session (arena), batch feeder");
  HeapFigures setupFigures;
  setupFigures.rssAfterSetup = residentMemory();
  setupFigures.rssPeakRestarted = resetResidentPeak();
  setupFigures.afterSetup = heap::liveBytes();
  heap::resetPeak();
  ProgressMeter meter =
      makeProgressMeter(options, plan, *backend, feeder.tokensPerStep());
  installStopSignals(); // a signal now stops after the step
  TrainResult result =
      train(options, session, comm, feeder, schedule, meter, *backend, stall,
            first, control, validator ? &*validator : nullptr);
  installOutputCleanup();
  if (result.stopped)
    return reportStop(options, comm, result.lastStep, control.stoppedBy);
  HeapFigures heap = measureHeap(comm, *backend, setupFigures);
  finish(options, plan, session, *backend, comm, collectiveMode, result, heap,
         meter, outputs, paths.weightNames);
  return 0;
}

int run(int argc, char **argv) {
  gHeapMarks.mark("process start (C++ runtime, libs)");
  Options options = parseOptions(argc, argv);
  installOutputCleanup();
  // Ranks first: every later error can then end the whole job. Every
  // collective from here on is recorded and watched.
  std::unique_ptr<Communicator> raw = haveMpi()
                                          ? createMpiCommunicator(&argc, &argv)
                                          : createLocalCommunicator();
  FlightRecorder recorder(raw->rank(), raw->size());
  std::unique_ptr<Communicator> comm =
      createWatchedCommunicator(std::move(raw), recorder);
  // gComm is null again before the communicator goes: main()'s handler
  // must not use a destroyed one.
  struct Forget {
    ~Forget() { gComm = nullptr; }
  } forget;
  gComm = comm.get();
  std::unique_ptr<Watchdog> watchdog;
  if (comm->size() > 1)
    watchdog = startWatchdog(recorder, *comm, options.collectiveTimeout,
                             flightRecorderDir(options), removeTemporaryFiles);
  gHeapMarks.mark("communicator (MPI), flight recorder");
  NodeRank local = findNodeRank(options, *comm);
  // An exception ends the whole job here, the communicator alive
  // (MPI_Abort): unwinding past it would finalize MPI on this rank alone,
  // the others waiting in a collective.
  try {
    return runOnRanks(options, *comm, recorder, local);
  } catch (const std::exception &e) {
    dieUnexpected(e.what());
  } catch (...) {
    dieUnexpected("an exception of unknown type");
  }
}
} // namespace

int main(int argc, char **argv) {
  // Nothing should throw. run() ends the job on an exception once the
  // ranks are connected; one before that ends here (gComm is null then).
  try {
    return run(argc, argv);
  } catch (const std::exception &e) {
    dieUnexpected(e.what());
  } catch (...) {
    dieUnexpected("an exception of unknown type");
  }
}
