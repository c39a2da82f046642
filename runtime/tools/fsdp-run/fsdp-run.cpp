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
// watchdog (docs/runtime.md).
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/Agreement.h"
#include "fsdp/runtime/Backend.h"
#include "fsdp/runtime/Communicator.h"
#include "fsdp/runtime/Data.h"
#include "fsdp/runtime/FlightRecorder.h"
#include "fsdp/runtime/Plan.h"
#include "fsdp/runtime/Session.h"

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <ostream>
#include <random>
#include <streambuf>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
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

/// Outputs reserved before training (PATH.tmp), removed on any error or
/// signal so that a failed run leaves nothing half-written. Fixed storage:
/// the signal handler may only unlink.
constexpr int kMaxTempFiles = 8;
char gTempFiles[kMaxTempFiles][4096];
volatile sig_atomic_t gNumTempFiles = 0;

void registerTempFile(const std::string &path) {
  if (gNumTempFiles >= kMaxTempFiles || path.size() >= sizeof(gTempFiles[0]))
    return;
  std::memcpy(gTempFiles[gNumTempFiles], path.c_str(), path.size() + 1);
  gNumTempFiles = gNumTempFiles + 1;
}

void forgetTempFile(const std::string &path) {
  for (int i = 0; i < gNumTempFiles && i < kMaxTempFiles; ++i)
    if (path == gTempFiles[i])
      gTempFiles[i][0] = '\0';
}

void removeTempFiles() {
  for (int i = 0; i < gNumTempFiles && i < kMaxTempFiles; ++i)
    if (gTempFiles[i][0])
      unlink(gTempFiles[i]);
}

extern "C" void onTerminate(int signal) {
  removeTempFiles();
  _exit(128 + signal);
}

[[noreturn]] void die(const std::string &message, int code = 1) {
  removeTempFiles();
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
    } else if (arg == "--backend")
      o.backend = value();
    else if (arg == "--device")
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
      o.stallSeconds =
          std::strtod(text.substr(colon + 1, second - colon - 1).c_str(), nullptr);
      if (second != std::string::npos)
        o.stallStep =
            parseInt("--debug-stall", text.c_str() + second + 1, 0);
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

/// How the plan's step inputs are fed.
enum class InputKind { Tokens, Features };

struct Inputs {
  InputKind kind;
  int64_t batch = 0, seq = 1, features = 0, vocab = 0;
};

Inputs classifyInputs(const Plan &plan) {
  if (plan.inputs.size() != 2 || plan.inputs[0] == plan::kNone ||
      plan.inputs[1] == plan::kNone)
    die(plan.path + ": fsdp-run feeds plans with two inputs (data, targets)");
  const BufferDesc &data = plan.buffers[plan.inputs[0]];
  const BufferDesc &targets = plan.buffers[plan.inputs[1]];
  Inputs in;
  for (const Instruction &inst : plan.program)
    if (inst.kernel->opcode == plan::Opcode::CrossEntropy)
      in.vocab = plan.buffers[inst.ins[0]].shape.back();
  if (data.dtype == plan::DType::I32 && data.shape.size() == 2 &&
      targets.shape == data.shape) {
    in.kind = InputKind::Tokens;
    in.batch = data.shape[0];
    in.seq = data.shape[1];
  } else if (data.dtype == plan::DType::F32 && data.shape.size() == 2 &&
             targets.shape.size() == 1 && targets.shape[0] == data.shape[0]) {
    in.kind = InputKind::Features;
    in.batch = data.shape[0];
    in.features = data.shape[1];
  } else {
    die(plan.path + ": unsupported step inputs (expected B x T token ids and "
                    "targets, or B x D features and B class ids)");
  }
  return in;
}

/// Classification data for MLP plans: Gaussian features, labels from a
/// fixed random linear teacher, so that a model can learn them.
class TeacherData {
public:
  TeacherData(int64_t features, int64_t classes, uint64_t seed)
      : features(features), classes(classes), weights(features * classes) {
    std::mt19937_64 rng(seed ^ 0x7EAC4E5ull);
    std::normal_distribution<float> normal;
    for (float &w : weights)
      w = normal(rng);
  }
  /// Rows [rowBegin, rowBegin + B) of the global batch of step `step`.
  void batch(int64_t step, int64_t rowBegin, int64_t B, float *x,
             int32_t *y) const {
    std::mt19937_64 rng(step * 7919 + 17);
    std::normal_distribution<float> normal;
    for (int64_t skip = 0; skip < rowBegin * features; ++skip)
      normal(rng);
    for (int64_t b = 0; b < B; ++b) {
      float *row = x + b * features;
      for (int64_t f = 0; f < features; ++f)
        row[f] = normal(rng);
      int64_t best = 0;
      float bestScore = -INFINITY;
      for (int64_t c = 0; c < classes; ++c) {
        float score = 0.0f;
        for (int64_t f = 0; f < features; ++f)
          score += row[f] * weights[c * features + f];
        if (score > bestScore) {
          bestScore = score;
          best = c;
        }
      }
      y[b] = int32_t(best);
    }
  }

private:
  int64_t features, classes;
  std::vector<float> weights;
};

/// A std::streambuf over a file descriptor, with a buffer of its own; the
/// first failed write sticks, with its errno.
class FdBuf : public std::streambuf {
public:
  explicit FdBuf(int fd) : fd(fd), buffer(1 << 20) {
    setp(buffer.data(), buffer.data() + buffer.size());
  }
  /// 0, or the errno of the first failed write.
  int drain() {
    flushBuffer();
    return error;
  }

protected:
  int overflow(int c) override {
    if (!flushBuffer())
      return traits_type::eof();
    if (c != traits_type::eof()) {
      *pptr() = char(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return flushBuffer() ? 0 : -1; }

private:
  bool flushBuffer() {
    for (char *p = pbase(); p < pptr() && !error;) {
      ssize_t n = ::write(fd, p, size_t(pptr() - p));
      if (n < 0 && errno != EINTR)
        error = errno;
      else if (n > 0)
        p += n;
    }
    setp(buffer.data(), buffer.data() + buffer.size());
    return !error;
  }
  int fd;
  std::vector<char> buffer;
  int error = 0;
};

/// An output written at the end of the run into space reserved before the
/// first step: PATH.tmp is created and its bytes allocated up front, so a
/// directory, device or symbolic link in the way, a missing or read-only
/// directory, or a disk too full fail before training; at the end the
/// output is written into it, synced and renamed over PATH, which is
/// therefore always the old file or the whole new one.
class Output {
public:
  void reserve(const std::string &file, const char *name, uint64_t bytes) {
    path = file;
    tmp = file + ".tmp";
    what = name;
    for (const std::string *f : {&path, &tmp}) {
      struct stat info;
      if (lstat(f->c_str(), &info) != 0 || S_ISREG(info.st_mode))
        continue;
      die(*f + ": " +
          (S_ISDIR(info.st_mode)   ? "is a directory"
           : S_ISLNK(info.st_mode) ? "is a symbolic link"
                                   : "is a device, pipe or socket") +
          "; fsdp-run writes the " + what + " only over a regular file");
    }
    fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
              0644);
    if (fd < 0)
      die(path + ": cannot write output: " + std::strerror(errno));
    registerTempFile(tmp);
    int error = bytes ? posix_fallocate(fd, 0, off_t(bytes)) : 0;
    // A filesystem without fallocate still gets its output, unreserved.
    if (error && error != EOPNOTSUPP && error != EINVAL)
      die(path + ": cannot reserve " + std::to_string(bytes) +
          " bytes for the " + what + ": " + std::strerror(error));
  }
  bool active() const { return fd >= 0; }

  template <typename Fill> void write(Fill fill) {
    FdBuf buffer(fd);
    std::ostream out(&buffer);
    fill(out);
    out.flush();
    int error = buffer.drain();
    off_t end = lseek(fd, 0, SEEK_CUR);
    if (!error && (ftruncate(fd, end) != 0 || fsync(fd) != 0))
      error = errno;
    if (close(fd) != 0 && !error)
      error = errno;
    fd = -1;
    if (!error && std::rename(tmp.c_str(), path.c_str()) != 0)
      error = errno;
    if (error)
      die(path + ": cannot write the " + what + ": " + std::strerror(error) +
          " (the previous file, if any, is unchanged)");
    forgetTempFile(tmp);
  }

private:
  std::string path, tmp, what;
  int fd = -1;
};

/// The exact size of saveParams's file.
uint64_t savedParamsBytes(const Plan &plan) {
  uint64_t bytes = 8 + 4;
  for (const ParamDesc &p : plan.params)
    bytes += 4 + p.name.size() + 4 + 8 * p.shape.size() +
             4 * uint64_t(p.numElements());
  return bytes;
}

/// An upper estimate of writeTrace's file: every kernel of every step.
uint64_t traceBytes(const Plan &plan, int64_t steps) {
  uint64_t perStep = 0;
  for (const Instruction &inst : plan.program)
    perStep += 120 + inst.kernel->name.size() + inst.unit.size();
  return 4096 + perStep * uint64_t(steps);
}

/// Rank r's trace file: PATH with ".rank<r>" before the extension when
/// several ranks each write one.
std::string traceFile(const std::string &path, int rank, int ranks) {
  if (ranks == 1)
    return path;
  size_t dot = path.rfind('.');
  size_t slash = path.rfind('/');
  std::string suffix = ".rank" + std::to_string(rank);
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
    return path + suffix;
  return path.substr(0, dot) + suffix + path.substr(dot);
}

/// Parameter dump: "FSDPPARM", u32 count, then per parameter u32 name
/// length, name, u32 rank, i64 dims, f32 values (docs/plan-format.md).
void saveParams(const Plan &plan, const std::vector<std::vector<float>> &params,
                Output &output) {
  output.write([&](std::ostream &out) {
    auto put = [&](const void *p, size_t n) {
      out.write(static_cast<const char *>(p), n);
    };
    put("FSDPPARM", 8);
    uint32_t count = plan.params.size();
    put(&count, 4);
    for (size_t i = 0; i < plan.params.size(); ++i) {
      const ParamDesc &p = plan.params[i];
      uint32_t len = p.name.size(), rank = p.shape.size();
      put(&len, 4);
      put(p.name.data(), len);
      put(&rank, 4);
      put(p.shape.data(), rank * sizeof(int64_t));
      put(params[i].data(), params[i].size() * sizeof(float));
    }
  });
}

/// The measured timeline as a Chrome trace (JSON; Perfetto opens it), one
/// process per rank and one lane per stream, like --fsdp-simulate's. With
/// several ranks, rank r writes traceFile(PATH, r).
void writeTrace(const Plan &plan, const Session &session, int rank,
                Output &output) {
  output.write([&](std::ostream &out) {
    out << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
    const char *lanes[] = {"compute", "all-gather", "reduce-scatter"};
    for (int lane = 0; lane < 3; ++lane)
      out << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " << rank
          << ", \"tid\": " << lane << ", \"args\": {\"name\": \"" << lanes[lane]
          << "\"}},\n";
    out << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " << rank
        << ", \"args\": {\"name\": \"rank " << rank << "\"}}";
    char number[64];
    for (const Session::TraceEvent &e : session.traceEvents()) {
      const Instruction &inst = plan.program[e.instruction];
      uint32_t lane = e.lane;
      out << ",\n{\"name\": \"" << inst.kernel->name
          << (inst.unit.empty() ? "" : " @" + inst.unit)
          << "\", \"ph\": \"X\", "
          << "\"pid\": " << rank << ", \"tid\": " << lane;
      std::snprintf(number, sizeof(number), ", \"ts\": %.3f, \"dur\": %.3f",
                    e.start, e.duration);
      out << number << ", \"args\": {\"step\": " << e.step << "}}";
    }
    out << "\n]}\n";
  });
}

/// What --report-json writes: the run's figures for scripts (the GPU check,
/// benchmarks), one JSON object.
struct Report {
  std::string backend, collectives;
  int ranks;
  bool skipCollectives;
  double secondsPerStep, tokensPerSecond;
  std::vector<float> losses;
  uint64_t arenaPredicted, arenaMeasured, peakPredicted;
};

void writeReport(const Report &r, Output &output) {
  auto quoted = [](const std::string &text) {
    std::string out = "\"";
    for (char c : text)
      out += c == '"' || c == '\\' ? std::string("\\") + c
             : c == '\n'           ? std::string(" ")
                                   : std::string(1, c);
    return out + "\"";
  };
  output.write([&](std::ostream &out) {
    char number[64];
    out << "{\"backend\": " << quoted(r.backend)
        << ", \"collectives\": " << quoted(r.collectives)
        << ", \"ranks\": " << r.ranks
        << ", \"skip_collectives\": " << (r.skipCollectives ? "true" : "false");
    std::snprintf(number, sizeof(number), "%.4f", r.secondsPerStep * 1e3);
    out << ", \"ms_per_step\": " << number;
    std::snprintf(number, sizeof(number), "%.1f", r.tokensPerSecond);
    out << ", \"tokens_per_s\": " << number << ", \"losses\": [";
    for (size_t i = 0; i < r.losses.size(); ++i) {
      std::snprintf(number, sizeof(number), "%.9g", r.losses[i]);
      out << (i ? ", " : "") << (std::isfinite(r.losses[i]) ? number : "null");
    }
    out << "], \"arena_bytes_predicted\": " << r.arenaPredicted
        << ", \"arena_bytes_measured\": " << r.arenaMeasured
        << ", \"peak_bytes_predicted\": " << r.peakPredicted << "}\n";
  });
}

std::string bytes(uint64_t b) {
  char text[64];
  std::snprintf(text, sizeof(text), "%llu bytes (%.1f MiB)",
                (unsigned long long)b, double(b) / (1 << 20));
  return text;
}
/// The name of this job's progress board, the same on every rank: the
/// launcher's job id where it gives one, else rank 0's choice.
std::string boardName(Communicator &comm) {
  for (const char *variable : {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid",
                               "SLURM_JOB_ID"})
    if (const char *value = std::getenv(variable)) {
      std::string name = "fsdp-run.";
      for (const char *c = value; *c; ++c)
        name += std::isalnum((unsigned char)*c) ? *c : '_';
      return name;
    }
  uint64_t id = (uint64_t(getpid()) << 32) ^ uint64_t(steadyNanos());
  comm.broadcast(&id, sizeof(id), 0);
  return "fsdp-run." + std::to_string(id);
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
  if (o.backend == "cpu") {
    // OpenMP threads and the GEMM library decide the summation order.
    fields.push_back({"threads", std::to_string(threads)});
    fields.push_back({"blas", o.blas});
  } else {
    fields.push_back({"tf32", o.tf32 ? "on" : "off"});
  }
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

int run(int argc, char **argv) {
  Options options = parseOptions(argc, argv);
  // A file-size limit makes writes fail with EFBIG instead of killing us;
  // mpirun's SIGTERM still removes the reserved outputs.
  std::signal(SIGXFSZ, SIG_IGN);
  std::signal(SIGTERM, onTerminate);
  std::signal(SIGINT, onTerminate);
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
  if (!options.flightRecorderDir.empty()) {
    struct stat info;
    if (stat(options.flightRecorderDir.c_str(), &info) != 0 ||
        !S_ISDIR(info.st_mode))
      die(options.flightRecorderDir +
          ": --flight-recorder expects an existing directory");
  }
  std::string dumpDir = options.flightRecorderDir;
  if (dumpDir.empty() && !options.tracePath.empty()) {
    size_t slash = options.tracePath.rfind('/');
    dumpDir = slash == std::string::npos ? "."
                                         : options.tracePath.substr(0, slash);
  }
  std::unique_ptr<Watchdog> watchdog;
  std::string error;
  if (comm->size() > 1) {
    RecordScope scope(CollectiveLabel{0, -1, "progress-board set-up"});
    watchdog = std::make_unique<Watchdog>(
        recorder, options.collectiveTimeout, dumpDir, removeTempFiles);
    std::string name = boardName(*comm);
    // Removed like a temporary file on any error or signal, and by local
    // rank 0 once every rank has attached (after the agreement).
    registerTempFile("/dev/shm/" + name);
    if (!recorder.attachBoard(name, error))
      std::fprintf(stderr,
                   "fsdp-run: rank %d: warning: no progress board (%s): a "
                   "timeout will not name the lagging rank\n",
                   comm->rank(), error.c_str());
  }

  Plan plan;
  if (!loadPlan(options.planPath, plan, error))
    die(error);
  if (options.describe) {
    if (lead)
      std::fputs(describePlan(plan).c_str(), stdout);
    return 0;
  }
  if (int64_t(plan.worldSize) != comm->size())
    die(plan.path + ": compiled for world size " +
        std::to_string(plan.worldSize) + ", but launched on " +
        std::to_string(comm->size()) + " rank" +
        (comm->size() == 1 ? "" : "s") +
        (plan.worldSize > 1
             ? " (launch it with mpirun -np " + std::to_string(plan.worldSize) +
                   ")"
             : " (recompile with --fsdp-train-pipeline=\"world-size=" +
                   std::to_string(comm->size()) + "\")"));
  if (options.backend != "cpu" && options.backend != "cuda")
    die("unknown backend '" + options.backend + "' (expected cpu or cuda)", 2);
  Inputs inputs = classifyInputs(plan);
  // The plan holds one rank's rows; the data is the global batch.
  int64_t globalBatch = inputs.batch * comm->size();
  int64_t rowBegin = inputs.batch * comm->rank();

  TokenData tokens;
  if (inputs.kind == InputKind::Tokens) {
    if (options.dataPath.empty())
      tokens.loadBuiltin();
    else if (!tokens.load(options.dataPath, options.dataFormat, error))
      die(error);
    if (!tokens.check(globalBatch, inputs.seq, inputs.vocab, error))
      die(error);
  } else if (!options.dataPath.empty()) {
    die(plan.path + " classifies features; --data feeds token models only");
  }
  // Every output is checked and its space reserved now, not after the
  // last step.
  Output saveOutput, traceOutput, reportOutput;
  if (!options.savePath.empty() && lead)
    saveOutput.reserve(options.savePath, "parameters", savedParamsBytes(plan));
  if (!options.tracePath.empty())
    traceOutput.reserve(
        traceFile(options.tracePath, comm->rank(), comm->size()), "trace",
        traceBytes(plan, options.steps));
  if (!options.reportPath.empty() && lead)
    reportOutput.reserve(options.reportPath, "report",
                         1024 + 24 * uint64_t(options.steps));

  int threads = options.threads > 0 ? int(options.threads)
                                    : int(std::thread::hardware_concurrency());
  auto stallAt = [&](int64_t step) {
    if (options.stallRank == comm->rank() && options.stallStep == step)
      std::this_thread::sleep_for(
          std::chrono::duration<double>(options.stallSeconds));
  };
  stallAt(0);
  {
    RecordScope scope(CollectiveLabel{0, -1, "rank agreement"});
    std::string disagreement = checkRanksAgree(
        *comm, agreedFields(options, plan,
                            inputs.kind == InputKind::Tokens ? &tokens : nullptr,
                            threads));
    if (!disagreement.empty()) {
      // Every rank knows the same: each refuses and exits on its own.
      std::fprintf(stderr, "fsdp-run: rank %d: error: %s\n", comm->rank(),
                   disagreement.c_str());
      removeTempFiles();
      return 1;
    }
  }
  // Every rank of the node has attached by now: the board's name can go.
  if (comm->localRank() == 0)
    recorder.unlinkBoard();

  std::unique_ptr<Backend> backend;
  {
    RecordScope scope(CollectiveLabel{0, -1, "backend start-up"});
    backend = options.backend == "cuda"
                  ? createCudaBackend({int(options.device), options.tf32,
                                       comm.get(), options.collectiveTimeout},
                                      error)
                  : createCpuBackend({int(options.threads), options.blas,
                                      comm.get(), options.collectiveThreads},
                                     error);
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

  if (lead) {
    std::printf("fsdp-run: %s; %s; started collectives run %s\n",
                backend->description().c_str(), comm->description().c_str(),
                options.syncCollectives ? "synchronously (--sync-collectives)"
                                        : backend->collectiveMode().c_str());
    if (options.skipCollectives)
      std::printf("fsdp-run: --skip-collectives: compute only, no "
                  "communication; the losses mean nothing\n");
    std::printf("fsdp-run: %s, %zu parameters in %zu units, %zu kernels, "
                "global batch %lld, data %s\n",
                plan.path.c_str(), plan.params.size(), plan.units.size(),
                plan.program.size(), (long long)globalBatch,
                inputs.kind == InputKind::Tokens ? tokens.source().c_str()
                                                 : "(synthetic teacher)");
    if (inputs.kind == InputKind::Tokens)
      std::printf("fsdp-run: data: %zu tokens (%s), %lld batches of %lld x "
                  "%lld per epoch, %lld tail tokens unused\n",
                  tokens.size(), tokens.formatName(),
                  (long long)tokens.windowsPerEpoch(globalBatch, inputs.seq),
                  (long long)globalBatch, (long long)inputs.seq,
                  (long long)tokens.unusedTail(globalBatch, inputs.seq));
  }
  int64_t tokensPerStep = globalBatch * inputs.seq;
  int64_t localTokens = inputs.batch * inputs.seq;
  std::vector<int32_t> x(localTokens), y(localTokens);
  std::vector<float> features(inputs.batch * inputs.features);
  TeacherData teacher(inputs.features, inputs.vocab, options.seed);

  using Clock = std::chrono::steady_clock;
  double totalSeconds = 0.0, steadySeconds = 0.0;
  float firstLoss = 0.0f, loss = 0.0f;
  std::vector<float> losses;
  for (int64_t step = 1; step <= options.steps; ++step) {
    stallAt(step);
    if (inputs.kind == InputKind::Tokens) {
      tokens.batch(step - 1, globalBatch, inputs.seq, rowBegin, inputs.batch,
                   x.data(), y.data());
      session.setInput(0, x.data(), x.size() * sizeof(int32_t));
    } else {
      teacher.batch(step, rowBegin, inputs.batch, features.data(), y.data());
      session.setInput(0, features.data(), features.size() * sizeof(float));
    }
    session.setInput(1, y.data(), localTokens * sizeof(int32_t));
    auto start = Clock::now();
    // Each rank's loss is the mean over its rows; their mean is the
    // global batch's (every rank has as many rows).
    float local = session.step(step);
    {
      RecordScope scope(CollectiveLabel{step, -1, "loss all-reduce"});
      loss = float(comm->allReduceMean(local));
    }
    double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    totalSeconds += seconds;
    if (step > 1)
      steadySeconds += seconds;
    if (step == 1) {
      firstLoss = loss;
      // The first step touches every page of the arena; the profile, like
      // the mean time per step, covers the steps after it.
      if (options.steps > 1)
        session.resetKernelTimes();
    }
    losses.push_back(loss);
    if (!std::isfinite(loss) && !options.skipCollectives)
      die("the loss is " + std::to_string(loss) + " at step " +
          std::to_string(step) + "; training diverged");
    if (lead &&
        (step % options.logEvery == 0 || step == 1 || step == options.steps))
      std::printf("step %5lld/%lld | loss %.6f | %8.2f ms | %9.0f tok/s\n",
                  (long long)step, (long long)options.steps, loss,
                  seconds * 1e3, tokensPerStep / seconds);
    std::fflush(stdout);
  }

  int64_t timed = options.steps > 1 ? options.steps - 1 : 1;
  double meanSeconds = options.steps > 1 ? steadySeconds / timed : totalSeconds;
  uint64_t measured = session.measureHighWaterMark();
  stallAt(options.steps + 1);
  uint64_t measuredMax;
  {
    RecordScope scope(CollectiveLabel{0, -1, "high-water-mark all-reduce"});
    measuredMax = comm->allReduceMax(measured);
  }
  std::vector<std::vector<float>> finalParams;
  if (!options.savePath.empty())
    finalParams = session.gatherParams();
  if (lead) {
    std::printf("summary: %lld steps, loss %.6f -> %.6f, %.2f ms/step, %.0f "
                "tok/s (mean over steps %s)\n",
                (long long)options.steps, firstLoss, loss, meanSeconds * 1e3,
                tokensPerStep / meanSeconds, options.steps > 1 ? "2.." : "1");
    std::printf("summary: arena high-water mark per rank %s measured (max "
                "over %d ranks), %s predicted (%s)\n",
                bytes(measuredMax).c_str(), comm->size(),
                bytes(plan.arenaSize).c_str(),
                measured == plan.arenaSize && measuredMax == plan.arenaSize
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
  if (options.profile && lead) {
    const KernelTimes &t = session.kernelTimes();
    double all = 0.0;
    for (double s : t.seconds)
      all += s;
    std::printf("profile: kernel time by kind over %lld steps\n",
                (long long)timed);
    for (size_t k = 0; k < plan::kKernels.size(); ++k)
      if (t.calls[k])
        std::printf("profile: %-24s %8lld calls %10.2f ms %6.1f%%\n",
                    std::string(plan::kKernels[k].name).c_str(),
                    (long long)t.calls[k], t.seconds[k] * 1e3,
                    100.0 * t.seconds[k] / all);
  }
  if (saveOutput.active())
    saveParams(plan, finalParams, saveOutput);
  if (reportOutput.active()) {
    Report report{backend->description(),
                  options.syncCollectives ? "synchronously (--sync-collectives)"
                                          : backend->collectiveMode(),
                  comm->size(),
                  options.skipCollectives,
                  meanSeconds,
                  double(tokensPerStep) / meanSeconds,
                  losses,
                  plan.arenaSize,
                  measuredMax,
                  plan.peakBytes};
    writeReport(report, reportOutput);
  }
  if (traceOutput.active())
    writeTrace(plan, session, comm->rank(), traceOutput);
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
