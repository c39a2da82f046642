//===- Setup.cpp - what fsdp-run does before the first step ---------------===//

#include "Setup.h"
#include "Errors.h"

#include "fsdp/runtime/comm/Agreement.h"
#include "fsdp/runtime/support/HeapMeter.h"
#include "fsdp/runtime/support/OutputFile.h"

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

namespace fsdprun {
namespace {
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

/// Whether the plan's GEMMs run in bf16 (the peak MFU divides by).
bool gemmsInBf16(const Plan &plan) {
  for (const Instruction &inst : plan.program)
    if (inst.kernel->opcode == plan::Opcode::Linear)
      return inst.elementType == plan::DType::BF16;
  return false;
}

// Each backend's options from its own flags: a backend added to
// BackendOptions fails to compile here until fsdp-run fills its options.
void configure(CpuBackendOptions &cpu, const Options &o, Communicator &comm,
               const NodeRank &) {
  cpu.comm = &comm;
  cpu.threads = int(o.threads);
  cpu.blas = o.blas;
  cpu.collectiveThreads = o.collectiveThreads;
}

void configure(CudaBackendOptions &cuda, const Options &o, Communicator &comm,
               const NodeRank &local) {
  cuda.comm = &comm;
  cuda.device = int(o.device);
  cuda.localRank = local.rank;
  cuda.tf32 = o.tf32;
  cuda.collectiveTimeout = o.collectiveTimeout;
}
} // namespace

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

void stallAt(const Options &o, int rank, int64_t step) {
  if (o.stallRank == rank && o.stallStep == step)
    std::this_thread::sleep_for(std::chrono::duration<double>(o.stallSeconds));
  if (o.throwRank == rank && o.throwStep == step)
    throw std::runtime_error("--debug-throw: rank " + std::to_string(rank) +
                             " before step " + std::to_string(step));
}

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

std::unique_ptr<Backend> startBackend(const Options &o, Communicator &comm,
                                      const NodeRank &local) {
  std::string error;
  std::unique_ptr<Backend> backend;
  {
    RecordScope scope(CollectiveLabel{0, -1, "backend start-up"});
    BackendOptions options;
    defaultBackendOptions(o.backend, options); // a name parseOptions checked
    std::visit([&](auto &chosen) { configure(chosen, o, comm, local); },
               options);
    backend = createBackend(options, error);
  }
  if (!backend)
    die(o.backend + " backend: " + error);
  return backend;
}

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
  // On CUDA: the device's times (timing events), only when asked for.
  if (o.profile)
    session.timeKernels();
  if (!o.tracePath.empty()) {
    if (heap::counting())
      session.setHeapSampler(heap::liveBytes);
    session.startTrace();
  }
}

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

ProgressMeter makeProgressMeter(const Options &o, const Plan &plan,
                                const Backend &backend, int64_t tokensPerStep) {
  double peak = o.peakTflops > 0.0 ? o.peakTflops * 1e12
                                   : backend.peakFlops(gemmsInBf16(plan));
  return ProgressMeter(o.steps, tokensPerStep, plan.modelFlops, peak);
}

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

} // namespace fsdprun
