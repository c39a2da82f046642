//===- fsdp-run.cpp - train a compiled plan -------------------------------===//
//
//   fsdp-run model.plan [--steps N] [--data FILE] [--seed N] [--lr X]
//            [--log-every N] [--backend cpu|cuda] [--threads N]
//            [--blas openblas|blis] [--collective-threads auto|on|off]
//            [--device N] [--tf32 on|off]
//            [--save FILE] [--trace FILE] [--report-json FILE] [--profile]
//            [--data-format auto|bytes|tokens] [--flight-recorder DIR]
//            [--skip-collectives] [--sync-collectives] [--describe]
//
// Loads and validates the plan, checks and reserves every output, makes
// the ranks agree on everything that changes numbers, allocates the arena
// once, initialises the parameters from their initializers, and trains:
// one progress line per step (step, loss, ms/step, tokens/s), then a
// summary with the measured arena high-water mark next to the compiler's
// prediction. Every collective goes through the flight recorder and its
// watchdog (docs/runtime.md). The pieces live in the runtime library
// (Session, Trainer, StepInputs, RunOutputs, FlightRecorder, Agreement);
// this file parses options and reports.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/Agreement.h"
#include "fsdp/runtime/Backend.h"
#include "fsdp/runtime/Communicator.h"
#include "fsdp/runtime/Data.h"
#include "fsdp/runtime/FlightRecorder.h"
#include "fsdp/runtime/OutputFile.h"
#include "fsdp/runtime/Plan.h"
#include "fsdp/runtime/RunOutputs.h"
#include "fsdp/runtime/Session.h"
#include "fsdp/runtime/StepInputs.h"
#include "fsdp/runtime/Trainer.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <vector>

using namespace fsdp;
using namespace fsdp::rt;

namespace {
struct Options {
  std::string planPath, dataPath, savePath, tracePath, reportPath,
      flightRecorderDir, blas = "openblas", backend = "cpu",
                         collectiveThreads = "auto", dataFormatName = "auto";
  DataFormat dataFormat = DataFormat::Auto;
  int64_t device = -1;
  bool tf32 = true, skipCollectives = false, syncCollectives = false;
  int64_t steps = 20, logEvery = 1, threads = 0;
  double collectiveTimeout = 300.0;
  int64_t stallRank = -1, stallStep = 1;
  double stallSeconds = 0.0;
  uint64_t seed = 1;
  double lr = -1.0;
  bool profile = false, describe = false;
};

const char *const kUsage =
    "usage: fsdp-run PLAN [--steps N] [--data FILE] [--seed N] [--lr X]\n"
    "                [--data-format auto|bytes|tokens]\n"
    "                [--log-every N] [--backend cpu|cuda]\n"
    "                [--threads N] [--blas openblas|blis]      (cpu)\n"
    "                [--collective-threads auto|on|off]        (cpu)\n"
    "                [--device N] [--tf32 on|off]              (cuda)\n"
    "                [--save FILE] [--trace FILE] [--report-json FILE]\n"
    "                [--profile] [--collective-timeout SECONDS]\n"
    "                [--flight-recorder DIR]\n"
    "                [--skip-collectives] [--sync-collectives] [--describe]\n"
    "       fsdp-run --list-devices\n";

/// Set once the ranks are connected: an error on any rank then ends the
/// whole job (MPI_Abort), so no rank waits forever in a collective.
Communicator *gComm = nullptr;

[[noreturn]] void die(const std::string &message, int code = 1) {
  removeTemporaryFiles();
  if (gComm && gComm->size() > 1)
    std::fprintf(stderr, "fsdp-run: rank %d: error: %s\n", gComm->rank(),
                 message.c_str());
  else
    std::fprintf(stderr, "fsdp-run: error: %s\n", message.c_str());
  std::fflush(stderr);
  if (gComm && gComm->size() > 1)
    gComm->abort(code);
  std::exit(code);
}

int64_t parseInt(const std::string &flag, const char *text, int64_t min) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  if (errno || *end || end == text || v < min)
    die(flag + " expects an integer >= " + std::to_string(min) + ", got '" +
            text + "'",
        2);
  return v;
}

Options parseOptions(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char * {
      if (i + 1 >= argc)
        die(arg + " needs a value\n" + kUsage, 2);
      return argv[++i];
    };
    if (arg == "--steps")
      o.steps = parseInt(arg, value(), 1);
    else if (arg == "--data")
      o.dataPath = value();
    else if (arg == "--data-format") {
      o.dataFormatName = value();
      if (!parseDataFormat(o.dataFormatName, o.dataFormat))
        die("--data-format expects auto, bytes or tokens, got '" +
                o.dataFormatName + "'",
            2);
    } else if (arg == "--flight-recorder")
      o.flightRecorderDir = value();
    else if (arg == "--seed")
      o.seed = parseInt(arg, value(), 0);
    else if (arg == "--lr") {
      const char *text = value();
      char *end = nullptr;
      o.lr = std::strtod(text, &end);
      if (*end || end == text || !(o.lr >= 0.0))
        die("--lr expects a non-negative number, got '" + std::string(text) +
                "'",
            2);
    } else if (arg == "--log-every")
      o.logEvery = parseInt(arg, value(), 1);
    else if (arg == "--threads")
      o.threads = parseInt(arg, value(), 1);
    else if (arg == "--blas")
      o.blas = value();
    else if (arg == "--collective-threads") {
      o.collectiveThreads = value();
      if (o.collectiveThreads != "auto" && o.collectiveThreads != "on" &&
          o.collectiveThreads != "off")
        die("--collective-threads expects auto, on or off, got '" +
                o.collectiveThreads + "'",
            2);
    } else if (arg == "--backend") {
      o.backend = value();
      if (!isBackend(o.backend)) {
        std::string names;
        for (const std::string &name : backendNames())
          names += (names.empty() ? "" : " or ") + name;
        die("unknown backend '" + o.backend + "' (expected " + names + ")", 2);
      }
    } else if (arg == "--device")
      o.device = parseInt(arg, value(), 0);
    else if (arg == "--tf32") {
      std::string text = value();
      if (text != "on" && text != "off")
        die("--tf32 expects on or off, got '" + text + "'", 2);
      o.tf32 = text == "on";
    } else if (arg == "--skip-collectives")
      o.skipCollectives = true;
    else if (arg == "--sync-collectives")
      o.syncCollectives = true;
    else if (arg == "--report-json")
      o.reportPath = value();
    else if (arg == "--save")
      o.savePath = value();
    else if (arg == "--trace")
      o.tracePath = value();
    else if (arg == "--collective-timeout") {
      const char *text = value();
      char *end = nullptr;
      o.collectiveTimeout = std::strtod(text, &end);
      if (*end || end == text || !(o.collectiveTimeout >= 0.0))
        die("--collective-timeout expects seconds >= 0, got '" +
                std::string(text) + "'",
            2);
    } else if (arg == "--debug-stall") {
      // Fault injection for testing the watchdog: RANK:SECONDS[:STEP]
      // (rank RANK sleeps before step STEP, 1 by default; 0: before the
      // ranks agree, as a rank stuck reading its data; steps + 1: after
      // the last step, before the high-water mark and the final gather).
      std::string text = value();
      size_t colon = text.find(':');
      if (colon == std::string::npos)
        die("--debug-stall expects RANK:SECONDS[:STEP], got '" + text + "'", 2);
      o.stallRank = parseInt("--debug-stall", text.substr(0, colon).c_str(), 0);
      size_t second = text.find(':', colon + 1);
      o.stallSeconds = std::strtod(
          text.substr(colon + 1, second - colon - 1).c_str(), nullptr);
      if (second != std::string::npos)
        o.stallStep = parseInt("--debug-stall", text.c_str() + second + 1, 0);
    } else if (arg == "--profile")
      o.profile = true;
    else if (arg == "--describe")
      o.describe = true;
    else if (arg == "--list-devices") {
      std::printf("%s\n", listCudaDevices().c_str());
      std::exit(0);
    } else if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (!arg.empty() && arg[0] == '-')
      die("unknown option '" + arg + "'\n" + kUsage, 2);
    else if (o.planPath.empty())
      o.planPath = arg;
    else
      die("more than one plan given ('" + o.planPath + "', '" + arg + "')", 2);
  }
  if (o.planPath.empty())
    die(std::string("no plan given\n") + kUsage, 2);
  return o;
}

/// Whatever changes the numbers of a run, and everything that decides
/// which collectives a rank issues: ranks must agree on all of it.
std::vector<AgreedField> agreedFields(const Options &o, const Plan &plan,
                                      const TokenData *tokens, int threads) {
  char checksum[16];
  std::snprintf(checksum, sizeof(checksum), "%08x", plan.checksum);
  char lr[32];
  std::snprintf(lr, sizeof(lr), "%.17g", o.lr);
  std::vector<AgreedField> fields = {
      {"plan checksum", checksum},
      {"steps", std::to_string(o.steps)},
      {"seed", std::to_string(o.seed)},
      {"lr", o.lr >= 0.0 ? lr : "compiled"},
      {"backend", o.backend},
      {"skip collectives", o.skipCollectives ? "yes" : "no"},
      {"sync collectives", o.syncCollectives ? "yes" : "no"},
      {"collective threads", o.collectiveThreads},
      {"save", o.savePath.empty() ? "no" : "yes"},
  };
  // OpenMP threads and the GEMM library decide the CPU's summation order;
  // TF32 the GPU's GEMM precision.
  fields.push_back({"threads", std::to_string(threads)});
  fields.push_back({"blas", o.blas});
  fields.push_back({"tf32", o.tf32 ? "on" : "off"});
  if (tokens) {
    char hash[24];
    std::snprintf(hash, sizeof(hash), "%016llx",
                  (unsigned long long)tokens->fingerprint());
    fields.push_back({"data", std::string(tokens->formatName()) + ", " +
                                  std::to_string(tokens->size()) +
                                  " tokens, hash " + hash});
  }
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

void printSummary(const Plan &plan, const Options &o, const TrainResult &r,
                  int64_t tokensPerStep, int ranks) {
  std::printf("summary: %lld steps, loss %.6f -> %.6f, %.2f ms/step, %.0f "
              "tok/s (mean over steps %s)\n",
              (long long)o.steps, r.losses.front(), r.losses.back(),
              r.meanSeconds * 1e3, tokensPerStep / r.meanSeconds,
              o.steps > 1 ? "2.." : "1");
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

int run(int argc, char **argv) {
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
  gComm = comm.get();
  bool lead = comm->rank() == 0;
  std::string error;
  std::unique_ptr<Watchdog> watchdog;
  if (comm->size() > 1)
    watchdog = startWatchdog(recorder, *comm, options.collectiveTimeout,
                             flightRecorderDir(options), removeTemporaryFiles);

  Plan plan;
  if (!loadPlan(options.planPath, plan, error))
    die(error);
  if (options.describe) {
    if (lead)
      std::fputs(describePlan(plan).c_str(), stdout);
    return 0;
  }
  checkWorldSize(plan, comm->size());
  StepInputs inputs;
  if (!classifyInputs(plan, inputs, error))
    die(error);
  TokenData tokens;
  bool tokenPlan = inputs.kind == InputKind::Tokens;
  int64_t globalBatch = inputs.batch * comm->size();
  if (tokenPlan) {
    if (options.dataPath.empty())
      die(plan.path + ": a language model trains on --data FILE (text, or "
                      "llm.c uint16 tokens; data/corpus.txt in the source "
                      "tree is a small English text)",
          2);
    if (!tokens.load(options.dataPath, options.dataFormat, error))
      die(error);
    if (!tokens.check(globalBatch, inputs.seq, inputs.vocab, error))
      die(error);
  } else if (!options.dataPath.empty()) {
    die(plan.path + " classifies features; --data feeds token models only");
  }
  // Every output is checked and its space reserved now, not after the
  // last step.
  OutputFile saveOutput, traceOutput, reportOutput;
  if (!options.savePath.empty() && lead &&
      !saveOutput.reserve(options.savePath, "parameters", paramsFileBytes(plan),
                          error))
    die(error);
  if (!options.tracePath.empty() &&
      !traceOutput.reserve(
          traceFileFor(options.tracePath, comm->rank(), comm->size()), "trace",
          traceBytes(plan, options.steps), error))
    die(error);
  if (!options.reportPath.empty() && lead &&
      !reportOutput.reserve(options.reportPath, "report",
                            reportBytes(options.steps), error))
    die(error);

  auto stallAt = [&](int64_t step) {
    if (options.stallRank == comm->rank() && options.stallStep == step)
      std::this_thread::sleep_for(
          std::chrono::duration<double>(options.stallSeconds));
  };
  stallAt(0);
  int threads = options.threads > 0 ? int(options.threads)
                                    : int(std::thread::hardware_concurrency());
  {
    RecordScope scope(CollectiveLabel{0, -1, "rank agreement"});
    std::string disagreement = checkRanksAgree(
        *comm,
        agreedFields(options, plan, tokenPlan ? &tokens : nullptr, threads));
    if (!disagreement.empty()) {
      // Every rank knows the same: each refuses and exits on its own.
      std::fprintf(stderr, "fsdp-run: rank %d: error: %s\n", comm->rank(),
                   disagreement.c_str());
      removeTemporaryFiles();
      return 1;
    }
  }
  // Every rank of the node has attached by now: the board's name can go.
  if (comm->localRank() == 0)
    recorder.unlinkBoard();

  std::unique_ptr<Backend> backend;
  {
    RecordScope scope(CollectiveLabel{0, -1, "backend start-up"});
    BackendOptions backendOptions;
    backendOptions.comm = comm.get();
    backendOptions.threads = int(options.threads);
    backendOptions.blas = options.blas;
    backendOptions.collectiveThreads = options.collectiveThreads;
    backendOptions.device = int(options.device);
    backendOptions.tf32 = options.tf32;
    backendOptions.collectiveTimeout = options.collectiveTimeout;
    backend = createBackend(options.backend, backendOptions, error);
  }
  if (!backend)
    die(options.backend + " backend: " + error);
  Session session(plan, *backend, *comm);
  session.setFlightRecorder(&recorder);
  session.setSkipCollectives(options.skipCollectives);
  session.setSynchronousCollectives(options.syncCollectives);
  if (!session.initialize(options.seed, error))
    die(error);
  if (options.lr >= 0.0)
    session.overrideLearningRate(options.lr);
  if (!options.tracePath.empty())
    session.startTrace();

  std::string collectiveMode = options.syncCollectives
                                   ? "synchronously (--sync-collectives)"
                                   : backend->collectiveMode();
  if (lead) {
    std::printf("fsdp-run: %s; %s; started collectives run %s\n",
                backend->description().c_str(), comm->description().c_str(),
                collectiveMode.c_str());
    if (options.skipCollectives)
      std::printf("fsdp-run: --skip-collectives: compute only, no "
                  "communication; the losses mean nothing\n");
    std::printf("fsdp-run: %s, %zu parameters in %zu units, %zu kernels, "
                "global batch %lld, data %s\n",
                plan.path.c_str(), plan.params.size(), plan.units.size(),
                plan.program.size(), (long long)globalBatch,
                tokenPlan ? tokens.source().c_str() : "(synthetic teacher)");
    if (tokenPlan)
      std::printf("fsdp-run: data: %zu tokens (%s), %lld batches of %lld x "
                  "%lld per epoch, %lld tail tokens unused\n",
                  tokens.size(), tokens.formatName(),
                  (long long)tokens.windowsPerEpoch(globalBatch, inputs.seq),
                  (long long)globalBatch, (long long)inputs.seq,
                  (long long)tokens.unusedTail(globalBatch, inputs.seq));
  }

  BatchFeeder feeder(inputs, tokenPlan ? &tokens : nullptr, options.seed,
                     comm->rank(), comm->size());
  TrainOptions trainOptions;
  trainOptions.steps = options.steps;
  trainOptions.lossesMeanNothing = options.skipCollectives;
  trainOptions.beforeStep = stallAt;
  Trainer trainer(session, *comm, feeder, trainOptions);
  TrainResult result;
  int64_t tokensPerStep = feeder.tokensPerStep();
  bool trained = trainer.run(
      [&](const StepResult &s) {
        if (lead && (s.step % options.logEvery == 0 || s.step == 1 ||
                     s.step == options.steps))
          std::printf("step %5lld/%lld | loss %.6f | %8.2f ms | %9.0f tok/s\n",
                      (long long)s.step, (long long)options.steps, s.loss,
                      s.seconds * 1e3, tokensPerStep / s.seconds);
        std::fflush(stdout);
      },
      result, error);
  if (!trained)
    die(error);

  std::vector<std::vector<float>> finalParams;
  if (!options.savePath.empty())
    finalParams = session.gatherParams();
  if (lead)
    printSummary(plan, options, result, tokensPerStep, comm->size());
  if (options.profile && lead)
    printProfile(session.kernelTimes(), result.timedSteps);
  if (saveOutput.active() && !writeParams(plan, finalParams, saveOutput, error))
    die(error);
  if (reportOutput.active()) {
    RunReport report;
    report.backend = backend->description();
    report.collectives = collectiveMode;
    report.ranks = comm->size();
    report.skipCollectives = options.skipCollectives;
    report.secondsPerStep = result.meanSeconds;
    report.tokensPerSecond = double(tokensPerStep) / result.meanSeconds;
    report.losses = result.losses;
    report.arenaPredicted = plan.arenaSize;
    report.arenaMeasured = result.highWaterMarkMax;
    report.peakPredicted = plan.peakBytes;
    if (!writeReport(report, reportOutput, error))
      die(error);
  }
  if (traceOutput.active() &&
      !writeTrace(plan, session, comm->rank(), traceOutput, error))
    die(error);
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  // Nothing below should throw; if anything does, it is an error line and
  // exit code 1, never an abort.
  try {
    return run(argc, argv);
  } catch (const std::exception &e) {
    die(std::string("unexpected error: ") + e.what());
  }
}
