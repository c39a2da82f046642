//===- Plan.cpp - loading and validating plan files -----------------------===//
//
// loadPlan never throws and never trusts a field: every count is bounded by
// the bytes left to hold its records, every size and product is computed
// with overflow checks before anything is allocated, and every relation a
// kernel relies on (docs/plan-format.md, "What the reader checks") is
// checked before anything runs.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/Plan.h"

#include <cerrno>
#include <climits>
#include <cstring>
#include <exception>
#include <fcntl.h>
#include <map>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace fsdp::rt {
namespace {
/// Reads little-endian fields, failing (never reading past the end) once a
/// field would cross the end of the payload.
class Reader {
public:
  Reader(const char *data, size_t size) : data(data), size(size) {}

  template <typename T> bool read(T &value) {
    if (size - pos < sizeof(T))
      return fail();
    std::memcpy(&value, data + pos, sizeof(T)); // hosts are little-endian
    pos += sizeof(T);
    return true;
  }
  bool readString(std::string &s) {
    uint32_t len;
    if (!read(len) || size - pos < len)
      return fail();
    s.assign(data + pos, len);
    pos += len;
    return true;
  }
  bool readShape(std::vector<int64_t> &shape) {
    uint32_t rank;
    if (!read(rank) || rank > 16)
      return fail();
    shape.resize(rank);
    for (int64_t &d : shape)
      if (!read(d) || d < 0)
        return fail();
    return true;
  }
  /// Reads a table's record count, which must leave room for that many
  /// records of at least `minRecord` bytes (so that a corrupt count cannot
  /// make the reader allocate more than the file could describe).
  bool readCount(uint32_t &count, size_t minRecord) {
    return read(count) && count <= (size - pos) / minRecord ? true : fail();
  }
  bool failed() const { return bad; }
  bool atEnd() const { return pos == size; }

private:
  bool fail() {
    bad = true;
    return false;
  }
  const char *data;
  size_t size, pos = 0;
  bool bad = false;
};

/// The number of elements of `shape`, or -1 when it overflows int64.
int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      return -1;
  return n;
}

/// Plan files are small (kilobytes to a few megabytes); a larger file is
/// refused before it is read.
constexpr uint64_t kMaxPlanFileSize = uint64_t(1) << 30;

/// Reads the whole of `path` into `bytes`. Only a regular file is read: a
/// directory or a device is refused, and a FIFO does not block the open.
bool readPlanFile(const std::string &path, std::string &bytes,
                  std::string &why) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    why = "cannot open plan file: " + std::string(std::strerror(errno));
    return false;
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    why = "cannot read plan file: " + std::string(std::strerror(errno));
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    why = std::string("cannot read plan file: ") +
          (S_ISDIR(st.st_mode)    ? "is a directory"
           : S_ISFIFO(st.st_mode) ? "is a FIFO, not a regular file"
           : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)
               ? "is a device, not a regular file"
               : "not a regular file");
    return false;
  }
  if (uint64_t(st.st_size) > kMaxPlanFileSize) {
    why = "not a plan file (" + std::to_string(st.st_size) +
          " bytes, larger than the " + std::to_string(kMaxPlanFileSize) +
          " a plan may have)";
    return false;
  }
  bytes.clear();
  char chunk[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      why = "cannot read plan file: " + std::string(std::strerror(errno));
      return false;
    }
    if (n == 0)
      return true;
    if (bytes.size() + size_t(n) > kMaxPlanFileSize) {
      why = "not a plan file (it grows past " +
            std::to_string(kMaxPlanFileSize) + " bytes while read)";
      return false;
    }
    bytes.append(chunk, size_t(n));
  }
}

/// a * b == c, exactly (no overflow in the product).
bool productIs(int64_t a, int64_t b, int64_t c) { return (__int128)a * b == c; }
} // namespace

int64_t BufferDesc::numElements() const { return product(shape); }
int64_t ParamDesc::numElements() const { return product(shape); }

static bool validateKernels(Plan &plan, std::string &why);
static bool validateStreams(Plan &plan, std::string &why);
static bool overlap(const BufferDesc &a, const BufferDesc &b);
static bool parsePlan(const std::string &path, const std::string &bytes,
                      Plan &plan, std::string &why);

bool loadPlan(const std::string &path, Plan &plan, std::string &error) {
  std::string why;
  bool ok = false;
  try {
    std::string bytes;
    ok = readPlanFile(path, bytes, why) && parsePlan(path, bytes, plan, why);
  } catch (const std::bad_alloc &) {
    why = "out of memory while loading the plan";
  } catch (const std::exception &e) {
    why = std::string("cannot load the plan: ") + e.what();
  }
  if (!ok) {
    error = path + ": " + why;
    plan = Plan();
  }
  return ok;
}

static bool parsePlan(const std::string &path, const std::string &bytes,
                      Plan &plan, std::string &error) {
  auto fail = [&](const std::string &why) {
    error = why;
    return false;
  };
  if (bytes.empty())
    return fail("not a plan file (it is empty)");
  size_t magicBytes = std::min(bytes.size(), sizeof(plan::kMagic));
  if (std::memcmp(bytes.data(), plan::kMagic, magicBytes) != 0)
    return fail("not a plan file (bad magic)");
  if (bytes.size() < plan::kHeaderSize)
    return fail("truncated plan: " + std::to_string(bytes.size()) +
                " bytes, shorter than the " +
                std::to_string(plan::kHeaderSize) + "-byte header");
  Reader header(bytes.data() + sizeof(plan::kMagic),
                plan::kHeaderSize - sizeof(plan::kMagic));
  uint32_t version, flags, crc, reserved32;
  uint64_t payloadSize, reserved64[2];
  header.read(version);
  header.read(flags);
  header.read(payloadSize);
  header.read(crc);
  header.read(reserved32);
  header.read(reserved64[0]);
  header.read(reserved64[1]);
  if (version != plan::kPlanVersion)
    return fail("unsupported plan version " + std::to_string(version) +
                " (this fsdp-run reads version " +
                std::to_string(plan::kPlanVersion) + "; recompile the model)");
  if (payloadSize != bytes.size() - plan::kHeaderSize)
    return fail("truncated or padded plan: header says " +
                std::to_string(payloadSize) + " payload bytes, file has " +
                std::to_string(bytes.size() - plan::kHeaderSize));
  const char *payload = bytes.data() + plan::kHeaderSize;
  if (plan::planChecksum(bytes.data(), payload, payloadSize) != crc)
    return fail("checksum mismatch: the plan file is corrupt");
  // Covered by the checksum, so only a writer that sets them gets here.
  if (flags != 0)
    return fail("unsupported header flags 0x" + [&] {
      std::ostringstream os;
      os << std::hex << flags;
      return os.str();
    }() + " (this fsdp-run knows none; recompile the model)");
  if (reserved32 != 0 || reserved64[0] != 0 || reserved64[1] != 0)
    return fail("reserved header bytes are not zero");

  plan = Plan();
  plan.path = path;
  plan.checksum = crc;
  Reader r(payload, payloadSize);
  uint64_t peak[7] = {};
  r.read(plan.worldSize);
  r.read(plan.arenaSize);
  r.read(plan.peakBytes);
  r.read(plan.peakKernel);
  for (uint64_t &row : peak)
    r.read(row);
  plan.peak = {peak[0], peak[1], peak[2], peak[3], peak[4], peak[5], peak[6]};
  if (r.failed())
    return fail("the payload ends in the middle of a record");
  if (plan.worldSize < 1 || plan.worldSize > (1u << 20))
    return fail("invalid world size " + std::to_string(plan.worldSize));
  if (plan.arenaSize > plan::kMaxArenaSize)
    return fail("an arena of " + std::to_string(plan.arenaSize) +
                " bytes is larger than the " +
                std::to_string(plan::kMaxArenaSize) + " a plan may ask for");

  // Smallest records: a buffer of rank 0, a unit, a parameter of rank 0, a
  // kernel without operands or parameters, an empty string.
  constexpr size_t kMinBuffer = 36, kMinUnit = 16, kMinParam = 40,
                   kMinKernel = 20, kMinString = 4;
  uint32_t count = 0;
  if (!r.readCount(count, kMinBuffer))
    return fail("malformed buffer table");
  plan.buffers.resize(count);
  for (BufferDesc &b : plan.buffers) {
    uint32_t kind, dtype;
    if (!r.read(kind) || !r.read(dtype) || !r.read(b.offset) ||
        !r.read(b.size) || !r.readShape(b.shape) || !r.read(b.unit) ||
        !r.read(b.input))
      return fail("malformed buffer table");
    if (kind >= plan::kNumBufferKinds || dtype >= plan::kDTypeNames.size())
      return fail("buffer with an unknown kind or element type");
    b.kind = plan::BufferKind(kind);
    b.dtype = plan::DType(dtype);
  }
  if (!r.readCount(count, kMinUnit))
    return fail("malformed unit table");
  plan.units.resize(count);
  std::vector<uint32_t> unitNameIds(count);
  for (size_t i = 0; i < count; ++i) {
    UnitDesc &u = plan.units[i];
    if (!r.read(unitNameIds[i]) || !r.read(u.flatSize) ||
        !r.read(u.shardBuffer) || u.flatSize < 0)
      return fail("malformed unit table");
  }
  if (!r.readCount(count, kMinParam))
    return fail("malformed parameter table");
  plan.params.resize(count);
  std::vector<uint32_t> nameIds(count);
  for (size_t i = 0; i < count; ++i) {
    ParamDesc &p = plan.params[i];
    uint32_t dtype, init, noDecay;
    if (!r.read(nameIds[i]) || !r.read(dtype) || !r.readShape(p.shape) ||
        !r.read(init) || !r.read(p.stddev) || !r.read(noDecay) ||
        !r.read(p.unit) || !r.read(p.unitOffset))
      return fail("malformed parameter table");
    if (dtype >= plan::kDTypeNames.size() || init > 2)
      return fail("parameter with an unknown element type or initializer");
    p.dtype = plan::DType(dtype);
    p.init = plan::InitKind(init);
    p.noWeightDecay = noDecay != 0;
  }
  if (!r.read(plan.lossBuffer) || !r.readCount(count, kMinKernel))
    return fail("malformed program");
  plan.program.resize(count);
  std::vector<uint32_t> unitIds(count);
  for (size_t i = 0; i < count; ++i) {
    Instruction &inst = plan.program[i];
    uint32_t opcode, n;
    if (!r.read(opcode) || !(inst.kernel = plan::findKernel(opcode)))
      return fail("kernel #" + std::to_string(i) + " has an unknown opcode");
    r.read(unitIds[i]);
    for (std::vector<uint32_t> *group : {&inst.ins, &inst.outs}) {
      if (!r.read(n) || n > 16)
        return fail("malformed kernel #" + std::to_string(i));
      group->resize(n);
      for (uint32_t &id : *group)
        r.read(id);
    }
    if (!r.read(n) || n > 16)
      return fail("malformed kernel #" + std::to_string(i));
    inst.params.resize(n);
    for (double &v : inst.params)
      r.read(v);
  }
  std::vector<std::string> strings;
  if (!r.readCount(count, kMinString))
    return fail("malformed string table");
  strings.resize(count);
  for (std::string &s : strings)
    r.readString(s);
  if (r.failed())
    return fail("the payload ends in the middle of a record");
  if (!r.atEnd())
    return fail("trailing bytes after the string table");

  // Buffers first: every later check may use their element counts.
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const BufferDesc &b = plan.buffers[i];
    std::string name = "buffer #" + std::to_string(i);
    int64_t elements = b.numElements();
    uint64_t bytes;
    if (elements < 0 ||
        __builtin_mul_overflow(uint64_t(elements), plan::dtypeSize(b.dtype),
                               &bytes))
      return fail(name + " has a shape whose size overflows 64 bits");
    if (b.size != bytes)
      return fail(name + " has a size that does not match its shape");
    // Views into a gathered parameter or a full gradient start anywhere an
    // element can.
    if (b.offset % plan::dtypeSize(b.dtype))
      return fail(name + " is not aligned to its element size");
    if (b.offset > plan.arenaSize || b.size > plan.arenaSize - b.offset)
      return fail(name + " lies outside the arena");
    bool owned = b.kind == plan::BufferKind::Param ||
                 b.kind == plan::BufferKind::AdamM ||
                 b.kind == plan::BufferKind::AdamV;
    if (owned != (b.unit >= 0) || b.unit >= int32_t(plan.units.size()))
      return fail(name + " has an invalid owning unit");
    if ((b.kind == plan::BufferKind::Input) != (b.input >= 0) || b.input > 64)
      return fail(name + " has an invalid input position");
    if (b.input >= 0) {
      if (plan.inputs.size() <= size_t(b.input))
        plan.inputs.resize(b.input + 1, plan::kNone);
      if (plan.inputs[b.input] != plan::kNone)
        return fail(name + " has input position " + std::to_string(b.input) +
                    ", which buffer #" + std::to_string(plan.inputs[b.input]) +
                    " has too");
      plan.inputs[b.input] = i;
    }
  }
  for (size_t i = 0; i < plan.units.size(); ++i) {
    UnitDesc &u = plan.units[i];
    if (unitNameIds[i] >= strings.size())
      return fail("unit #" + std::to_string(i) + " has no name");
    u.name = strings[unitNameIds[i]];
    if (u.shardBuffer >= plan.buffers.size() ||
        plan.buffers[u.shardBuffer].kind != plan::BufferKind::Param ||
        plan.buffers[u.shardBuffer].unit != int32_t(i) ||
        plan.buffers[u.shardBuffer].numElements() !=
            plan::maxShardSize(u.flatSize, plan.worldSize))
      return fail("unit '" + u.name + "' has no valid shard buffer");
  }
  for (size_t i = 0; i < plan.params.size(); ++i) {
    ParamDesc &p = plan.params[i];
    if (nameIds[i] >= strings.size())
      return fail("parameter #" + std::to_string(i) + " has no name");
    p.name = strings[nameIds[i]];
    int64_t elements = p.numElements();
    if (elements < 0)
      return fail("parameter '" + p.name +
                  "' has a shape whose size overflows 64 bits");
    if (p.unit >= plan.units.size() || p.unitOffset < 0 ||
        p.unitOffset > plan.units[p.unit].flatSize ||
        elements > plan.units[p.unit].flatSize - p.unitOffset)
      return fail("parameter '" + p.name + "' lies outside its unit");
  }
  if (plan.lossBuffer >= plan.buffers.size() ||
      plan.buffers[plan.lossBuffer].numElements() != 1 ||
      plan.buffers[plan.lossBuffer].dtype != plan::DType::F32)
    return fail("the loss buffer is not a scalar f32 buffer");
  for (size_t i = 0; i < plan.program.size(); ++i) {
    Instruction &inst = plan.program[i];
    if (unitIds[i] != plan::kNone) {
      if (unitIds[i] >= strings.size())
        return fail("kernel #" + std::to_string(i) + " names no unit");
      inst.unit = strings[unitIds[i]];
    }
  }
  std::string why;
  if (!validateKernels(plan, why))
    return fail(why);
  return true;
}

/// Every kernel's operands: counts, ids, element types and shapes, as the
/// CPU and CUDA kernels assume them: no width a kernel divides by is zero,
/// every dimension that reaches a BLAS call or a CUDA grid fits in an int,
/// token ids come from a step input and index tables that hold the
/// vocabulary, and collectives and sharded updates cover exactly a unit's
/// shard.
static bool validateKernels(Plan &plan, std::string &why) {
  using plan::Opcode;
  constexpr int64_t kIntMax = INT32_MAX;
  // The vocabulary the cross-entropies index (fsdp-run checks its data
  // against it) and the smallest embedding table (where and how large).
  int64_t vocabulary = -1, smallestTable = -1;
  size_t vocabularyAt = 0, smallestTableAt = 0;
  for (size_t i = 0; i < plan.program.size(); ++i) {
    const Instruction &inst = plan.program[i];
    const plan::KernelInfo &info = *inst.kernel;
    std::string where =
        "kernel #" + std::to_string(i) + " (" + std::string(info.name) + ")";
    auto bad = [&](const std::string &what) {
      why = where + ": " + what;
      return false;
    };
    if (inst.ins.size() < info.minInputs || inst.ins.size() > info.maxInputs ||
        inst.outs.size() != info.outputs)
      return bad("wrong number of operands");
    if (inst.params.size() != plan::numParams(info))
      return bad("wrong number of parameters");
    for (uint32_t id : inst.ins)
      if (id >= plan.buffers.size())
        return bad("reads an unknown buffer");
    for (uint32_t id : inst.outs)
      if (id >= plan.buffers.size())
        return bad("writes an unknown buffer");
    auto in = [&](size_t k) -> const BufferDesc & {
      return plan.buffers[inst.ins[k]];
    };
    auto out = [&](size_t k) -> const BufferDesc & {
      return plan.buffers[inst.outs[k]];
    };
    // Float operands are f32 on every backend today; token ids are i32.
    bool idOperand[8] = {};
    if (info.opcode == Opcode::Embedding ||
        info.opcode == Opcode::EmbeddingBackward)
      idOperand[info.opcode == Opcode::Embedding ? 0 : 1] = true;
    if (info.opcode == Opcode::CrossEntropy)
      idOperand[1] = true;
    if (info.opcode == Opcode::CrossEntropyBackward)
      idOperand[2] = true;
    for (size_t k = 0; k < inst.ins.size(); ++k)
      if (in(k).dtype != (idOperand[k] ? plan::DType::I32 : plan::DType::F32))
        return bad("operand #" + std::to_string(k) +
                   " has the wrong element type");
    for (size_t k = 0; k < inst.outs.size(); ++k)
      if (out(k).dtype != plan::DType::F32)
        return bad("result #" + std::to_string(k) + " is not f32");
    // No kernel writes i32, so ids only have values if a step input holds
    // them (the runtime fills inputs with checked data).
    for (size_t k = 0; k < inst.ins.size(); ++k)
      if (idOperand[k] && in(k).kind != plan::BufferKind::Input)
        return bad("operand #" + std::to_string(k) +
                   " (token ids) is not a step input");
    auto last = [](const BufferDesc &b) {
      return b.shape.empty() ? int64_t(1) : b.shape.back();
    };
    auto same = [](const BufferDesc &a, const BufferDesc &b) {
      return a.shape == b.shape;
    };
    const char *tooManyRows =
        "has more rows than the 2^31 - 1 that CUDA grids and BLAS index";
    switch (info.opcode) {
    case Opcode::Embedding:
      if (in(0).shape.size() != 2 || in(1).shape.size() != 2 ||
          in(2).shape.size() != 2 || in(2).shape[0] < in(0).shape[1] ||
          in(1).shape[1] != in(2).shape[1] ||
          out(0).shape != std::vector<int64_t>{in(0).shape[0], in(0).shape[1],
                                               in(1).shape[1]})
        return bad("inconsistent shapes");
      if (in(0).numElements() > kIntMax)
        return bad(tooManyRows);
      if (smallestTable < 0 || in(1).shape[0] < smallestTable) {
        smallestTable = in(1).shape[0];
        smallestTableAt = i;
      }
      break;
    case Opcode::EmbeddingBackward:
      if (in(1).shape.size() != 2 || out(0).shape.size() != 2 ||
          out(1).shape.size() != 2 || out(1).shape[0] < in(1).shape[1] ||
          in(0).shape != std::vector<int64_t>{in(1).shape[0], in(1).shape[1],
                                              out(0).shape[1]} ||
          out(1).shape[1] != out(0).shape[1])
        return bad("inconsistent shapes");
      if (in(1).numElements() > kIntMax)
        return bad(tooManyRows);
      break;
    case Opcode::LayerNorm:
      if (in(0).shape.empty() || last(in(0)) == 0 || !same(in(0), out(0)) ||
          in(1).numElements() != last(in(0)) ||
          in(2).numElements() != last(in(0)) ||
          !productIs(out(1).numElements(), last(in(0)), in(0).numElements()) ||
          out(2).numElements() != out(1).numElements())
        return bad("inconsistent shapes");
      if (out(1).numElements() > kIntMax)
        return bad(tooManyRows);
      break;
    case Opcode::LayerNormBackward:
      if (in(1).shape.empty() || last(in(1)) == 0 || !same(in(0), in(1)) ||
          !same(in(1), out(0)) || in(2).numElements() != last(in(1)) ||
          !productIs(in(3).numElements(), last(in(1)), in(1).numElements()) ||
          in(4).numElements() != in(3).numElements() ||
          out(1).numElements() != last(in(1)) ||
          out(2).numElements() != last(in(1)))
        return bad("inconsistent shapes");
      if (in(3).numElements() > kIntMax)
        return bad(tooManyRows);
      break;
    case Opcode::Linear:
    case Opcode::LinearGradInput:
    case Opcode::LinearGradWeight: {
      // x: N x IC, w: OC x IC, y: N x OC (with roles per kernel).
      const BufferDesc &w =
          info.opcode == Opcode::LinearGradWeight ? out(0) : in(1);
      if (w.shape.size() != 2)
        return bad("weight is not rank 2");
      int64_t oc = w.shape[0], ic = w.shape[1];
      const BufferDesc &x = info.opcode == Opcode::Linear            ? in(0)
                            : info.opcode == Opcode::LinearGradInput ? out(0)
                                                                     : in(1);
      const BufferDesc &y = info.opcode == Opcode::Linear ? out(0) : in(0);
      if (oc == 0 || ic == 0 || x.shape.empty() || y.shape.empty() ||
          last(x) != ic || last(y) != oc ||
          x.numElements() / ic != y.numElements() / oc)
        return bad("inconsistent shapes");
      if (oc > kIntMax || ic > kIntMax || x.numElements() / ic > kIntMax)
        return bad("has a dimension past the 2^31 - 1 that BLAS takes");
      if (info.opcode == Opcode::Linear && inst.ins.size() == 3 &&
          in(2).numElements() != oc)
        return bad("bias does not match the output features");
      break;
    }
    case Opcode::BiasGrad:
      if (in(0).shape.empty() || last(in(0)) == 0 ||
          out(0).numElements() != last(in(0)))
        return bad("inconsistent shapes");
      break;
    case Opcode::Add:
      if (!same(in(0), in(1)) || !same(in(0), out(0)))
        return bad("inconsistent shapes");
      break;
    case Opcode::Gelu:
    case Opcode::Relu:
      if (!same(in(0), out(0)))
        return bad("inconsistent shapes");
      break;
    case Opcode::GeluBackward:
    case Opcode::ReluBackward:
      if (!same(in(0), in(1)) || !same(in(0), out(0)))
        return bad("inconsistent shapes");
      break;
    case Opcode::Attention:
    case Opcode::AttentionBackward: {
      const BufferDesc &qkv = info.opcode == Opcode::Attention ? in(0) : in(1);
      double heads = inst.params[0];
      // heads within [1, C] before it is converted (NaN fails too).
      if (qkv.shape.size() != 3 || qkv.shape[2] % 3 || qkv.shape[1] == 0 ||
          qkv.shape[2] == 0 || !(heads >= 1 && heads <= qkv.shape[2] / 3) ||
          heads != double(int64_t(heads)) ||
          (qkv.shape[2] / 3) % int64_t(heads))
        return bad("inconsistent shapes or head count");
      int64_t B = qkv.shape[0], T = qkv.shape[1], C = qkv.shape[2] / 3,
              H = int64_t(heads);
      // B H T <= B T C <= the qkv buffer's elements: no overflow here.
      if (T > kIntMax || 3 * C > kIntMax || (__int128)B * H * T > kIntMax)
        return bad("has a dimension past the 2^31 - 1 that BLAS takes");
      std::vector<int64_t> act = {B, T, C}, probs = {B, H, T, T};
      if (info.opcode == Opcode::Attention
              ? (out(0).shape != act || out(1).shape != probs)
              : (in(0).shape != act || in(2).shape != probs ||
                 out(0).shape != qkv.shape ||
                 out(1).numElements() != in(2).numElements()))
        return bad("inconsistent shapes");
      break;
    }
    case Opcode::CrossEntropy:
    case Opcode::CrossEntropyBackward: {
      const BufferDesc &logits =
          info.opcode == Opcode::CrossEntropy ? in(0) : in(1);
      const BufferDesc &targets =
          info.opcode == Opcode::CrossEntropy ? in(1) : in(2);
      if (logits.shape.empty() || last(logits) == 0 ||
          !productIs(targets.numElements(), last(logits), logits.numElements()))
        return bad("inconsistent shapes");
      if (targets.numElements() > kIntMax || last(logits) > kIntMax)
        return bad(tooManyRows);
      if (vocabulary < 0) {
        vocabulary = last(logits);
        vocabularyAt = i;
      } else if (last(logits) != vocabulary) {
        return bad("has a vocabulary of " + std::to_string(last(logits)) +
                   ", kernel #" + std::to_string(vocabularyAt) + " one of " +
                   std::to_string(vocabulary));
      }
      if (info.opcode == Opcode::CrossEntropy
              ? out(0).numElements() != 1 ||
                    out(1).numElements() != targets.numElements()
              : (in(0).numElements() != 1 || !same(out(0), logits)))
        return bad("inconsistent shapes");
      break;
    }
    case Opcode::AdamW:
      if (!same(in(0), out(0)) || !same(in(0), out(1)) ||
          !same(in(0), out(2)) || out(0).kind != plan::BufferKind::Param ||
          out(1).kind != plan::BufferKind::AdamM ||
          out(2).kind != plan::BufferKind::AdamV)
        return bad("does not update a parameter and its moments");
      break;
    case Opcode::Fill:
      break;
    case Opcode::AllGather: {
      const BufferDesc &shard = in(0);
      if (shard.kind != plan::BufferKind::Param || shard.unit < 0 ||
          out(0).numElements() != plan.units[shard.unit].flatSize ||
          shard.numElements() !=
              plan::maxShardSize(out(0).numElements(), plan.worldSize))
        return bad("does not gather a unit's shard into its flat size");
      break;
    }
    case Opcode::ReduceScatter:
      if (out(0).numElements() !=
          plan::maxShardSize(in(0).numElements(), plan.worldSize))
        return bad("the shard does not match the flat gradient");
      break;
    case Opcode::AdamWShard:
      if (out(0).kind != plan::BufferKind::Param || out(0).unit < 0 ||
          out(1).kind != plan::BufferKind::AdamM ||
          out(2).kind != plan::BufferKind::AdamV ||
          out(1).unit != out(0).unit || out(2).unit != out(0).unit ||
          !same(in(0), out(0)) || !same(out(0), out(1)) ||
          !same(out(0), out(2)) ||
          out(0).numElements() !=
              plan::maxShardSize(plan.units[out(0).unit].flatSize,
                                 plan.worldSize))
        return bad("does not update a unit's shard and its moments");
      break;
    case Opcode::Copy:
      if (in(0).numElements() != out(0).numElements())
        return bad("inconsistent shapes");
      if (overlap(in(0), out(0)))
        return bad("copies between overlapping buffers");
      break;
    case Opcode::Wait:
      break; // validateStreams matches it with its start
    }
  }
  // Data is checked against the cross-entropies' vocabulary: every
  // embedding table must have a row for each id below it.
  if (smallestTable >= 0 && vocabulary >= 0 && smallestTable < vocabulary) {
    why = "kernel #" + std::to_string(smallestTableAt) +
          " (embedding): a table of " + std::to_string(smallestTable) +
          " rows for ids below the vocabulary of " +
          std::to_string(vocabulary) + " (kernel #" +
          std::to_string(vocabularyAt) + ")";
    return false;
  }
  plan.vocabulary =
      vocabulary >= 0 ? vocabulary : std::max<int64_t>(smallestTable, 0);
  return validateStreams(plan, why);
}

/// True when buffers a and b share an arena byte.
static bool overlap(const BufferDesc &a, const BufferDesc &b) {
  return a.offset < b.offset + b.size && b.offset < a.offset + a.size;
}

/// The asynchronous collectives: each started one (stream >= 1) has a
/// unique token and exactly one later wait naming its buffers, and until
/// that wait no kernel writes what it reads or touches what it writes (a
/// corrupt plan would otherwise race with the collective's thread or
/// stream, silently).
static bool validateStreams(Plan &plan, std::string &why) {
  using plan::Opcode;
  struct Started {
    size_t at;
    uint32_t source, result;
  };
  std::map<int64_t, Started> inFlight;
  std::set<int64_t> used;
  auto text = [](double v) {
    std::ostringstream os;
    os << v;
    return os.str();
  };
  auto isCount = [](double v, double limit) {
    return v >= 0 && v < limit && v == double(int64_t(v));
  };
  for (size_t i = 0; i < plan.program.size(); ++i) {
    const Instruction &inst = plan.program[i];
    Opcode opcode = inst.kernel->opcode;
    std::string where = "kernel #" + std::to_string(i) + " (" +
                        std::string(inst.kernel->name) + ")";
    auto bad = [&](const std::string &what) {
      why = where + ": " + what;
      return false;
    };
    for (const auto &[token, started] : inFlight) {
      const Instruction &start = plan.program[started.at];
      bool writesSource = false, touchesResult = false;
      for (uint32_t id : inst.outs) {
        writesSource |= overlap(plan.buffers[id], plan.buffers[started.source]);
        touchesResult |=
            overlap(plan.buffers[id], plan.buffers[started.result]);
      }
      if (opcode != Opcode::Wait)
        for (uint32_t id : inst.ins)
          touchesResult |=
              overlap(plan.buffers[id], plan.buffers[started.result]);
      if (writesSource || touchesResult)
        return bad(std::string(writesSource ? "overwrites the input"
                                            : "uses the output") +
                   " of " + std::string(start.kernel->name) + " #" +
                   std::to_string(started.at) + " (token " +
                   std::to_string(token) + ") before its wait");
    }
    if (opcode == Opcode::AllGather || opcode == Opcode::ReduceScatter) {
      double stream = inst.params[0], token = inst.params[1];
      if (!isCount(stream, plan::kNumStreams))
        return bad("invalid stream " + text(stream));
      if (!isCount(token, 4294967296.0) || (stream == 0) != (token == 0))
        return bad("invalid token " + text(token) + " on stream " +
                   text(stream));
      double group = inst.params[2];
      if (group != 0 && group != 1)
        return bad("invalid group " + text(group));
      if (group == 1) {
        const Instruction *previous = i > 0 ? &plan.program[i - 1] : nullptr;
        if (stream == 0 || !previous || previous->kernel->opcode != opcode ||
            previous->params[0] != stream)
          return bad("is grouped but does not follow a started " +
                     std::string(inst.kernel->name) + " on its stream");
      }
      if (stream == 0)
        continue;
      if (!used.insert(int64_t(token)).second)
        return bad("token " + std::to_string(int64_t(token)) +
                   " is started twice");
      inFlight[int64_t(token)] = {i, inst.ins[0], inst.outs[0]};
    } else if (opcode == Opcode::Wait) {
      double token = inst.params[0];
      auto found = isCount(token, 4294967296.0) ? inFlight.find(int64_t(token))
                                                : inFlight.end();
      if (found == inFlight.end())
        return bad("waits for token " + text(token) +
                   ", which is not in flight");
      if (inst.ins[0] != found->second.source ||
          inst.ins[1] != found->second.result)
        return bad("does not name the buffers of the collective it waits for");
      inFlight.erase(found);
    }
  }
  if (!inFlight.empty()) {
    const auto &[token, started] = *inFlight.begin();
    why = "kernel #" + std::to_string(started.at) + " (" +
          std::string(plan.program[started.at].kernel->name) + "): token " +
          std::to_string(token) + " is never awaited";
    return false;
  }
  return true;
}

std::string describePlan(const Plan &plan) {
  std::ostringstream os;
  uint64_t paramElements = 0;
  for (const ParamDesc &p : plan.params)
    paramElements += p.numElements();
  os << "plan " << plan.path << ": world size " << plan.worldSize << ", "
     << plan.params.size() << " parameters (" << paramElements << " elements), "
     << plan.buffers.size() << " buffers, " << plan.program.size()
     << " kernels\n"
     << "  arena " << plan.arenaSize << " bytes, predicted peak "
     << plan.peakBytes << " bytes at kernel #" << plan.peakKernel << " (params "
     << plan.peak.params << ", grads " << plan.peak.grads << ", optimizer "
     << plan.peak.optimizer << ", activations " << plan.peak.activations
     << ", scratch " << plan.peak.scratch << ", gathered " << plan.peak.gathered
     << ", inputs " << plan.peak.inputs << ")\n";
  for (const UnitDesc &u : plan.units)
    os << "  unit " << u.name << ": " << u.flatSize << " elements, shard of "
       << plan::maxShardSize(u.flatSize, plan.worldSize) << "\n";
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    if (plan.inputs[i] == plan::kNone)
      continue;
    const BufferDesc &b = plan.buffers[plan.inputs[i]];
    os << "  input " << i << ": " << plan::kDTypeNames[uint32_t(b.dtype)];
    for (int64_t d : b.shape)
      os << "x" << d;
    os << "\n";
  }
  return os.str();
}

} // namespace fsdp::rt
