//===- fsdp-run.cpp - train a compiled plan -------------------------------===//
//
//   fsdp-run model.plan [--steps N] [--data FILE] [--seed N] [--lr X]
//            [--log-every N] [--backend cpu|cuda] [--threads N]
//            [--blas auto|openblas|blis|onednn]
//            [--collective-threads auto|on|off]
//            [--device N] [--tf32 on|off] [--print-ranks]
//            [--init-from FILE|DIR|INDEX] [--export FILE|DIR]
//            [--export-names hf|ours] [--export-dtype f32|bf16]
//            [--export-shard-size SIZE]
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
// (Session, Trainer, StepInputs, RunOutputs, FlightRecorder, Agreement).
// This tool's own parts: Options (the command line), Setup (what runs
// before the first step, fault injection included), Reports and
// MemoryReport (what it prints and writes), Errors (how it ends); this
// file runs them in order on the connected ranks.
//
//===----------------------------------------------------------------------===//

#include "Errors.h"
#include "MemoryReport.h"
#include "Options.h"
#include "Reports.h"
#include "Setup.h"

#include "fsdp/runtime/comm/Communicator.h"
#include "fsdp/runtime/comm/FlightRecorder.h"
#include "fsdp/runtime/io/Checkpoint.h"
#include "fsdp/runtime/support/OutputFile.h"
#include "fsdp/runtime/train/RunOutputs.h"
#include "fsdp/runtime/train/Trainer.h"

#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

using namespace fsdprun;

namespace {

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
                       memoryInUse(backend), s.droppedPairs.value_or(-1));
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

/// What a rank loads and checks before the ranks agree: the plan, its
/// inputs and data, --init-from's weights and the reserved outputs.
struct RankInputs {
  Plan plan;
  StepInputs inputs;
  TokenData tokens, valTokens;
  /// The data a token plan trains and evaluates on (null: none).
  const TokenData *data = nullptr, *validation = nullptr;
  int64_t valBatches = 0;
  std::unique_ptr<InitialWeights> weights;
  RunOutputFiles outputs;
  RunOutputPaths paths;
};

/// The plan's inputs, data and weights loaded, every output checked and
/// reserved now, not after the last step.
void loadRankInputs(const Options &options, const Communicator &comm,
                    RankInputs &in) {
  std::string error;
  checkWorldSize(in.plan, comm.size());
  markHeap("plan");
  in.data = loadInputs(options, in.plan, comm.size(), in.inputs, in.tokens);
  in.validation = loadValidation(options, in.plan, comm.size(), in.inputs,
                                 in.valTokens, in.valBatches);
  markHeap("data");
  in.weights = openWeights(options, in.plan);
  if (in.weights)
    markHeap("--init-from file (mapped, matched)");
  in.paths =
      RunOutputPaths{options.tracePath, options.reportPath, options.exportPath};
  if (in.validation)
    in.paths.evaluations =
        options.valEvery ? options.steps / options.valEvery + 1 : 1;
  if (!options.exportPath.empty() &&
      !chooseExportNaming(in.plan, options.exportNames, in.paths.weightNames,
                          error))
    die(error, 2);
  if (options.exportDType == "bf16")
    in.paths.weightDType = TensorDType::BF16;
  if (options.exportShardBytes)
    in.paths.weightShardBytes = options.exportShardBytes;
  if (!reserveRunOutputs(in.plan, in.paths, options.steps, comm.rank(),
                         comm.size(), in.outputs, error))
    die(error);
}

/// The evaluations --val-data asks for: their feeder and validator, and
/// rank 0's line on them.
void startValidation(const Options &options, const RankInputs &in,
                     Session &session, Communicator &comm,
                     const BatchFeeder &feeder,
                     std::optional<BatchFeeder> &valFeeder,
                     std::optional<Validator> &validator) {
  if (!in.validation)
    return;
  valFeeder.emplace(in.inputs, in.validation, options.seed, comm.rank(),
                    comm.size());
  validator.emplace(
      session, comm, *valFeeder,
      ValidationOptions{options.valEvery, in.valBatches, options.steps});
  if (comm.rank() == 0)
    printValidationPlan(options, in.plan, *validator, feeder.tokensPerStep());
}

/// Rank 0's lines on the schedule and the clipping the step applies.
void printOptimizerLines(const std::optional<LrSchedule> &schedule,
                         const Session &session, const Communicator &comm) {
  if (schedule && comm.rank() == 0)
    std::printf("fsdp-run: lr schedule: %s\n", schedule->describe().c_str());
  if (std::optional<double> clip = session.maxGradNorm();
      clip && comm.rank() == 0)
    std::printf("fsdp-run: gradient clipping: global norm at most %g (in "
                "the compiled step)\n",
                *clip);
}

/// --checkpoint-dir's checkpointer, prepared (null without it). False
/// with `error`, the same on every rank.
bool startCheckpointer(const Options &options, const Plan &plan,
                       Session &session, Communicator &comm,
                       const RunIdentity &identity,
                       std::unique_ptr<Checkpointer> &checkpointer,
                       std::string &error) {
  if (options.checkpointDir.empty())
    return true;
  checkpointer = std::make_unique<Checkpointer>(
      plan, session, comm,
      CheckpointOptions{options.checkpointDir, options.checkpointEvery,
                        options.keepLast},
      identity);
  if (!checkpointer->prepare(error))
    return false;
  if (comm.rank() == 0 && !checkpointer->lockTakenOver().empty())
    std::printf("fsdp-run: %s\n", checkpointer->lockTakenOver().c_str());
  return true;
}

/// The all-to-alls' bytes, max over ranks, for the summary and the
/// report: a collective only for a plan that moves any (expert
/// parallelism), so that every other run keeps its collectives.
void countAllToAll(const Plan &plan, Communicator &comm, TrainResult &result) {
  if (!plan.hasExpertUnits())
    return;
  RecordScope scope(CollectiveLabel{0, -1, "all-to-all bytes all-reduce"});
  result.allToAllBytesMax = comm.allReduceMax(result.allToAllBytes);
}

/// The session started on the agreed ranks, then the steps and the end
/// of the run: resumed, checkpointed, validated, reported.
int trainOnRanks(const Options &options, RankInputs &in, Session &session,
                 const Backend &backend, Communicator &comm,
                 FlightRecorder &recorder,
                 const std::function<void(int64_t)> &stall) {
  const Plan &plan = in.plan;
  startSession(session, options, recorder, in.weights.get());
  if (in.weights)
    in.weights->close(); // its mapped pages are no part of training
  std::string collectiveMode = options.syncCollectives
                                   ? "synchronously (--sync-collectives)"
                                   : backend.collectiveMode();
  if (comm.rank() == 0) {
    printStart(options, plan, backend, comm, collectiveMode, in.inputs,
               in.data);
    printWeightLines(options, plan, in.weights.get(), in.paths.weightNames);
  }
  BatchFeeder feeder(in.inputs, in.data, options.seed, comm.rank(),
                     comm.size());
  std::optional<BatchFeeder> valFeeder;
  std::optional<Validator> validator;
  startValidation(options, in, session, comm, feeder, valFeeder, validator);
  std::optional<LrSchedule> schedule = makeSchedule(options, plan, session);
  printOptimizerLines(schedule, session, comm);
  RunIdentity identity =
      runIdentity(options, plan, in.inputs, in.data, comm.size());
  int64_t first = 1;
  std::string error;
  std::unique_ptr<Checkpointer> checkpointer;
  if (!resume(options, plan, comm, session, identity, first, error) ||
      !startCheckpointer(options, plan, session, comm, identity, checkpointer,
                         error))
    return refuseTogether(comm, error);
  StepControl control{checkpointer.get(), options.steps};
  // Setup is over (a resumed checkpoint loaded): from here on, whatever
  // the heap gains is what a step (or writing a checkpoint) allocates
  // outside the arena.
  markHeap("session (arena), batch feeder");
  HeapFigures setupFigures = setupHeapFigures();
  ProgressMeter meter =
      makeProgressMeter(options, plan, backend, feeder.tokensPerStep());
  installStopSignals(); // a signal now stops after the step
  TrainResult result =
      train(options, session, comm, feeder, schedule, meter, backend, stall,
            first, control, validator ? &*validator : nullptr);
  installOutputCleanup();
  if (result.stopped)
    return reportStop(options, comm, result.lastStep, control.stoppedBy);
  HeapFigures heap = measureHeap(comm, backend, setupFigures);
  countAllToAll(plan, comm, result);
  finish(options, plan, session, backend, comm, collectiveMode, result, heap,
         meter, in.outputs, in.paths.weightNames);
  return 0;
}

/// Everything after the ranks connected: the plan, the data and outputs,
/// the agreement, the session and training. `comm` and `recorder` outlive
/// it: run() catches what it throws while they live.
int runOnRanks(const Options &options, Communicator &comm,
               FlightRecorder &recorder, const NodeRank &local) {
  std::string error;
  RankInputs in;
  if (!loadPlan(options.planPath, in.plan, error))
    die(error);
  if (options.describe) {
    if (comm.rank() == 0)
      std::fputs(describePlan(in.plan).c_str(), stdout);
    return 0;
  }
  loadRankInputs(options, comm, in);
  auto stall = [&](int64_t step) { stallAt(options, comm.rank(), step); };
  stall(0);
  if (!ranksAgree(options, in.plan, comm, in.data, in.validation,
                  in.weights.get()))
    return 1;
  // Every rank of the node has attached by now: the board's name can go.
  if (comm.localRank() == 0)
    recorder.unlinkBoard();
  std::unique_ptr<Backend> backend = startBackend(options, comm, local);
  markHeap("backend (BLAS, thread pools)");
  Session session(in.plan, *backend, comm);
  return trainOnRanks(options, in, session, *backend, comm, recorder, stall);
}

int run(int argc, char **argv) {
  markHeap("process start (C++ runtime, libs)");
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
  // The job communicator is null again before the communicator goes:
  // main()'s handler must not use a destroyed one.
  struct Forget {
    ~Forget() { setJobCommunicator(nullptr); }
  } forget;
  setJobCommunicator(comm.get());
  std::unique_ptr<Watchdog> watchdog;
  if (comm->size() > 1)
    watchdog = startWatchdog(recorder, *comm, options.collectiveTimeout,
                             flightRecorderDir(options), removeTemporaryFiles);
  markHeap("communicator (MPI), flight recorder");
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
  // ranks are connected; one before that ends here (no job communicator then).
  try {
    return run(argc, argv);
  } catch (const std::exception &e) {
    dieUnexpected(e.what());
  } catch (...) {
    dieUnexpected("an exception of unknown type");
  }
}
