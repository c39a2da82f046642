//===- Options.cpp - parse and check fsdp-run's command line --------------===//
//
// Grouped by what an option is about (training, schedule, backend,
// collectives and fault injection, outputs, checkpoints); the checks that
// need several options run once all are read.
//
//===----------------------------------------------------------------------===//

#include "Options.h"
#include "Errors.h"

#include "fsdp/runtime/exec/Backend.h"
#include "fsdp/runtime/io/Checkpoint.h"
#include "fsdp/runtime/io/Weights.h"
#include "fsdp/runtime/support/CommandLine.h"

#include <cstdio>
#include <cstdlib>
#include <sys/stat.h>
#include <thread>
#include <utility>

namespace fsdprun {
namespace {
const char *const kUsage =
    "usage: fsdp-run PLAN [--steps N] [--data FILE] [--seed N] [--lr X]\n"
    "                [--lr-schedule constant|cosine|linear]\n"
    "                [--warmup-steps W] [--min-lr X]\n"
    "                [--data-format auto|bytes|tokens]\n"
    "                [--val-data FILE] [--val-every K] [--val-steps S]\n"
    "                [--log-every N] [--backend cpu|cuda]\n"
    "                [--threads N] [--blas auto|openblas|blis|onednn] (cpu)\n"
    "                [--collective-threads auto|on|off]        (cpu)\n"
    "                [--device N] [--tf32 on|off]              (cuda)\n"
    "                [--print-ranks]\n"
    "                [--init-from FILE|DIR|INDEX] [--export FILE|DIR]\n"
    "                [--export-names hf|ours] [--export-dtype f32|bf16]\n"
    "                [--export-shard-size SIZE]\n"
    "                [--trace FILE] [--report-json FILE]\n"
    "                [--profile] [--heap-breakdown] [--peak-tflops X]\n"
    "                [--collective-timeout SECONDS]\n"
    "                [--flight-recorder DIR]\n"
    "                [--skip-collectives] [--sync-collectives] [--describe]\n"
    "                [--checkpoint-dir DIR] [--checkpoint-every K]\n"
    "                [--keep-last M] [--resume DIR]\n"
    "                [--resume-changed-hyperparameters]\n"
    "       fsdp-run --list-devices\n";

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
  } else if (arg == "--export-dtype") {
    o.exportDType = c.value();
    if (o.exportDType != "f32" && o.exportDType != "bf16")
      die("--export-dtype expects f32 or bf16, got '" + o.exportDType + "'", 2);
  } else if (arg == "--export-shard-size") {
    std::string why;
    if (!parseByteSize(c.value(), o.exportShardBytes, why))
      die("--export-shard-size: " + why, 2);
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

} // namespace

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
  if (!o.exportDType.empty() && o.exportPath.empty())
    die("--export-dtype needs --export FILE|DIR", 2);
  if (o.exportShardBytes && !exportIsDirectory(o.exportPath))
    die(o.exportPath.empty()
            ? std::string("--export-shard-size needs --export DIR")
            : "--export-shard-size shards a directory export; --export " +
                  o.exportPath +
                  " is one file (a path without an extension, "
                  "or ending in '/', is a directory)",
        2);
  for (const auto &[flag, path] :
       {std::pair{"--init-from", &o.initFromPath}, {"--export", &o.exportPath}})
    if (!path->empty() && !safeTensorsAvailable())
      die(std::string(flag) + " " + *path + ": " +
          safeTensorsUnavailableReason());
  return o;
}

int runThreads(const Options &o) {
  return o.threads > 0 ? int(o.threads)
                       : int(std::thread::hardware_concurrency());
}

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

} // namespace fsdprun
