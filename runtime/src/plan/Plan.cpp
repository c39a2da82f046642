//===- Plan.cpp - loading and validating plan files -----------------------===//
//
// loadPlan never throws and never trusts a field: every count is bounded by
// the bytes left to hold its records, every size and product is computed
// with overflow checks before anything is allocated, and every relation a
// kernel relies on (docs/plan-format.md, "What the reader checks") is
// checked before anything runs.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/plan/Plan.h"
#include "fsdp/runtime/support/RegularFile.h"
#include "plan/EvalStep.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <exception>
#include <map>
#include <set>
#include <sstream>

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

/// Reads the whole of `path` into `bytes`. Only a regular file is read
/// (RegularFile.h): a directory, a device or a FIFO is refused at once.
bool readPlanFile(const std::string &path, std::string &bytes,
                  std::string &why) {
  return readRegularFile(path, "plan file", kMaxPlanFileSize, bytes, why);
}

/// a * b == c, exactly (no overflow in the product).
bool productIs(int64_t a, int64_t b, int64_t c) { return (__int128)a * b == c; }
} // namespace

int64_t BufferDesc::numElements() const { return product(shape); }
int64_t ParamDesc::numElements() const { return product(shape); }

namespace {
/// String indices the tables hold until the string table, the last one, is
/// read: units' and parameters' names, kernels' units.
struct StringIds {
  std::vector<uint32_t> unitNames, paramNames, kernelUnits;
};

/// One kernel of the program under check: its operands, and its errors,
/// which name it ("kernel #3 (linear): ...").
struct KernelCheck {
  const Plan &plan;
  const Instruction &inst;
  size_t index;
  std::string &why;

  const plan::KernelInfo &info() const { return *inst.kernel; }
  const BufferDesc &in(size_t k) const { return plan.buffers[inst.ins[k]]; }
  const BufferDesc &out(size_t k) const { return plan.buffers[inst.outs[k]]; }
  bool bad(const std::string &what) const {
    why = "kernel #" + std::to_string(index) + " (" +
          std::string(inst.kernel->name) + "): " + what;
    return false;
  }
};

/// The vocabulary the cross-entropies index (fsdp-run checks its data
/// against it) and the smallest embedding table, each with where it is.
struct Vocabulary {
  int64_t vocabulary = -1, smallestTable = -1;
  size_t vocabularyAt = 0, smallestTableAt = 0;
};

constexpr int64_t kIntMax = INT32_MAX;
const char *const kTooManyRows =
    "has more rows than the 2^31 - 1 that CUDA grids and BLAS index";

/// A parameter as errors print it.
std::string text(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

int64_t last(const BufferDesc &b) {
  return b.shape.empty() ? int64_t(1) : b.shape.back();
}
bool same(const BufferDesc &a, const BufferDesc &b) {
  return a.shape == b.shape;
}
} // namespace

static bool checkHeader(const std::string &bytes, uint32_t &crc,
                        std::string &why);
static bool readSummary(Reader &r, Plan &plan, std::string &why);
static bool readTables(Reader &r, Plan &plan, StringIds &ids,
                       std::vector<std::string> &strings, std::string &why);
static bool checkBuffers(Plan &plan, std::string &why);
static bool resolveNames(Plan &plan, const StringIds &ids,
                         const std::vector<std::string> &strings,
                         std::string &why);
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

/// The phases of a load, in order: the header, the payload's records, then
/// the relations between them, the kernels last.
static bool parsePlan(const std::string &path, const std::string &bytes,
                      Plan &plan, std::string &why) {
  uint32_t crc = 0;
  if (!checkHeader(bytes, crc, why))
    return false;
  plan = Plan();
  plan.path = path;
  plan.checksum = crc;
  Reader r(bytes.data() + plan::kHeaderSize, bytes.size() - plan::kHeaderSize);
  StringIds ids;
  std::vector<std::string> strings;
  // Buffers are checked first: every later check may use their element
  // counts.
  return readSummary(r, plan, why) && readTables(r, plan, ids, strings, why) &&
         checkBuffers(plan, why) && resolveNames(plan, ids, strings, why) &&
         validateKernels(plan, why);
}

/// The header: magic, size, version, payload size, checksum, flags and
/// reserved bytes; sets `crc` to the checksum it holds.
static bool checkHeader(const std::string &bytes, uint32_t &crc,
                        std::string &why) {
  auto fail = [&](const std::string &what) {
    why = what;
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
  uint32_t version, flags, reserved32;
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
  return true;
}

/// The summary: world size, arena size (bounded), the predicted peak, the
/// predicted bytes outside the arena per backend.
static bool readSummary(Reader &r, Plan &plan, std::string &why) {
  uint64_t peak[7] = {};
  r.read(plan.worldSize);
  r.read(plan.shardSize);
  r.read(plan.arenaSize);
  r.read(plan.peakBytes);
  r.read(plan.peakKernel);
  for (uint64_t &row : peak)
    r.read(row);
  plan.peak = {peak[0], peak[1], peak[2], peak[3], peak[4], peak[5], peak[6]};
  r.read(plan.outsideArenaCpu);
  r.read(plan.outsideArenaCpuMapped);
  r.read(plan.blasBytesPerThread);
  r.read(plan.outsideArenaCuda);
  r.read(plan.modelFlops);
  r.read(plan.memoryBudget);
  if (r.failed())
    why = "the payload ends in the middle of a record";
  else if (!(plan.modelFlops >= 0.0 && plan.modelFlops <= 1e30))
    why = "invalid model FLOPs per step " + std::to_string(plan.modelFlops);
  else if (plan.worldSize < 1 || plan.worldSize > (1u << 20))
    why = "invalid world size " + std::to_string(plan.worldSize);
  else if (plan.shardSize < 1 || plan.worldSize % plan.shardSize != 0)
    why = "invalid mesh: a shard group of " + std::to_string(plan.shardSize) +
          " ranks in a world of " + std::to_string(plan.worldSize);
  else if (plan.arenaSize > plan::kMaxArenaSize)
    why = "an arena of " + std::to_string(plan.arenaSize) +
          " bytes is larger than the " + std::to_string(plan::kMaxArenaSize) +
          " a plan may ask for";
  else
    return true;
  return false;
}

// Smallest records: a buffer of rank 0, a unit, a parameter of rank 0, a
// kernel without operands or parameters, an empty string.
constexpr size_t kMinBuffer = 40, kMinUnit = 16, kMinParam = 40,
                 kMinKernel = 20, kMinString = 4;

/// The buffer table: records and enum values, nothing relating them yet.
static bool readBuffers(Reader &r, Plan &plan, std::string &why) {
  uint32_t count = 0;
  why = "malformed buffer table";
  if (!r.readCount(count, kMinBuffer))
    return false;
  plan.buffers.resize(count);
  for (BufferDesc &b : plan.buffers) {
    uint32_t kind, dtype;
    if (!r.read(kind) || !r.read(dtype) || !r.read(b.offset) ||
        !r.read(b.size) || !r.readShape(b.shape) || !r.read(b.unit) ||
        !r.read(b.input) || !r.read(b.base))
      return false;
    if (kind >= plan::kNumBufferKinds || dtype >= plan::kNumDTypes) {
      why = "buffer with an unknown kind or element type";
      return false;
    }
    b.kind = plan::BufferKind(kind);
    b.dtype = plan::DType(dtype);
  }
  return true;
}

/// The unit table (names as string ids).
static bool readUnits(Reader &r, Plan &plan, StringIds &ids, std::string &why) {
  uint32_t count = 0;
  why = "malformed unit table";
  if (!r.readCount(count, kMinUnit))
    return false;
  plan.units.resize(count);
  ids.unitNames.resize(count);
  for (size_t i = 0; i < count; ++i) {
    UnitDesc &u = plan.units[i];
    if (!r.read(ids.unitNames[i]) || !r.read(u.flatSize) ||
        !r.read(u.shardBuffer) || u.flatSize < 0)
      return false;
  }
  return true;
}

/// The parameter table (names as string ids) and its enum values.
static bool readParams(Reader &r, Plan &plan, StringIds &ids,
                       std::string &why) {
  uint32_t count = 0;
  why = "malformed parameter table";
  if (!r.readCount(count, kMinParam))
    return false;
  plan.params.resize(count);
  ids.paramNames.resize(count);
  for (size_t i = 0; i < count; ++i) {
    ParamDesc &p = plan.params[i];
    uint32_t dtype, init, noDecay;
    if (!r.read(ids.paramNames[i]) || !r.read(dtype) || !r.readShape(p.shape) ||
        !r.read(init) || !r.read(p.stddev) || !r.read(noDecay) ||
        !r.read(p.unit) || !r.read(p.unitOffset))
      return false;
    if (dtype >= plan::kNumDTypes || init > 2) {
      why = "parameter with an unknown element type or initializer";
      return false;
    }
    p.dtype = plan::DType(dtype);
    p.init = plan::InitKind(init);
    p.noWeightDecay = noDecay != 0;
  }
  return true;
}

/// The loss buffer, the gradients' sum of squares buffer and the program:
/// opcodes, operand and parameter lists (units as string ids).
static bool readProgram(Reader &r, Plan &plan, StringIds &ids,
                        std::string &why) {
  uint32_t count = 0;
  if (!r.read(plan.lossBuffer) || !r.read(plan.gradSqBuffer) ||
      !r.read(plan.evalKernels) || !r.readCount(count, kMinKernel)) {
    why = "malformed program";
    return false;
  }
  plan.program.resize(count);
  ids.kernelUnits.resize(count);
  for (size_t i = 0; i < count; ++i) {
    Instruction &inst = plan.program[i];
    uint32_t opcode, n;
    why = "malformed kernel #" + std::to_string(i);
    if (!r.read(opcode) || !(inst.kernel = plan::findKernel(opcode))) {
      why = "kernel #" + std::to_string(i) + " has an unknown opcode";
      return false;
    }
    r.read(ids.kernelUnits[i]);
    for (std::vector<uint32_t> *group : {&inst.ins, &inst.outs}) {
      if (!r.read(n) || n > 16)
        return false;
      group->resize(n);
      for (uint32_t &id : *group)
        r.read(id);
    }
    if (!r.read(n) || n > 16)
      return false;
    inst.params.resize(n);
    for (double &v : inst.params)
      r.read(v);
  }
  return true;
}

/// Every table after the summary, in file order, to the end of the
/// payload.
static bool readTables(Reader &r, Plan &plan, StringIds &ids,
                       std::vector<std::string> &strings, std::string &why) {
  if (!readBuffers(r, plan, why) || !readUnits(r, plan, ids, why) ||
      !readParams(r, plan, ids, why) || !readProgram(r, plan, ids, why))
    return false;
  uint32_t count = 0;
  if (!r.readCount(count, kMinString)) {
    why = "malformed string table";
    return false;
  }
  strings.resize(count);
  for (std::string &s : strings)
    r.readString(s);
  if (r.failed())
    why = "the payload ends in the middle of a record";
  else if (!r.atEnd())
    why = "trailing bytes after the string table";
  else
    return true;
  return false;
}

/// Whether buffer `i` is no view (base -1) or names its base: an earlier
/// buffer, itself no view, of the same kind. (Where a view lies matters to
/// the kernels, which check their operands; the base only to the trace's
/// lifetimes.)
static bool isValidBase(const Plan &plan, size_t i) {
  const BufferDesc &b = plan.buffers[i];
  if (b.base < 0)
    return b.base == -1;
  if (size_t(b.base) >= i)
    return false;
  const BufferDesc &base = plan.buffers[b.base];
  return base.base == -1 && base.kind == b.kind;
}

/// Each buffer: size against shape (overflow-free), alignment, inside the
/// arena, its owning unit, its input position (collected in plan.inputs)
/// and its base.
static bool checkBuffers(Plan &plan, std::string &why) {
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const BufferDesc &b = plan.buffers[i];
    auto bad = [&](const std::string &what) {
      why = "buffer #" + std::to_string(i) + what;
      return false;
    };
    int64_t elements = b.numElements();
    uint64_t bytes;
    if (elements < 0 ||
        __builtin_mul_overflow(uint64_t(elements), plan::dtypeSize(b.dtype),
                               &bytes))
      return bad(" has a shape whose size overflows 64 bits");
    if (b.size != bytes)
      return bad(" has a size that does not match its shape");
    // Views into a gathered parameter or a full gradient start anywhere an
    // element can.
    if (b.offset % plan::dtypeSize(b.dtype))
      return bad(" is not aligned to its element size");
    if (b.offset > plan.arenaSize || b.size > plan.arenaSize - b.offset)
      return bad(" lies outside the arena");
    bool owned = b.kind == plan::BufferKind::Param ||
                 b.kind == plan::BufferKind::AdamM ||
                 b.kind == plan::BufferKind::AdamV;
    if (owned != (b.unit >= 0) || b.unit >= int32_t(plan.units.size()))
      return bad(" has an invalid owning unit");
    if ((b.kind == plan::BufferKind::Input) != (b.input >= 0) || b.input > 64)
      return bad(" has an invalid input position");
    if (!isValidBase(plan, i))
      return bad(" names an invalid base (a view names an earlier buffer "
                 "of its kind that is no view)");
    if (b.input < 0)
      continue;
    if (plan.inputs.size() <= size_t(b.input))
      plan.inputs.resize(b.input + 1, plan::kNone);
    if (plan.inputs[b.input] != plan::kNone)
      return bad(" has input position " + std::to_string(b.input) +
                 ", which buffer #" + std::to_string(plan.inputs[b.input]) +
                 " has too");
    plan.inputs[b.input] = i;
  }
  return true;
}

/// Names from the string table, and what units, parameters, the loss and
/// kernels refer to: shard buffers, places in units, the loss buffer.
static bool resolveNames(Plan &plan, const StringIds &ids,
                         const std::vector<std::string> &strings,
                         std::string &why) {
  auto fail = [&](const std::string &what) {
    why = what;
    return false;
  };
  for (size_t i = 0; i < plan.units.size(); ++i) {
    UnitDesc &u = plan.units[i];
    if (ids.unitNames[i] >= strings.size())
      return fail("unit #" + std::to_string(i) + " has no name");
    u.name = strings[ids.unitNames[i]];
    if (u.shardBuffer >= plan.buffers.size() ||
        plan.buffers[u.shardBuffer].kind != plan::BufferKind::Param ||
        plan.buffers[u.shardBuffer].unit != int32_t(i) ||
        plan.buffers[u.shardBuffer].numElements() !=
            plan::maxShardSize(u.flatSize, plan.shardSize))
      return fail("unit '" + u.name + "' has no valid shard buffer");
  }
  for (size_t i = 0; i < plan.params.size(); ++i) {
    ParamDesc &p = plan.params[i];
    if (ids.paramNames[i] >= strings.size())
      return fail("parameter #" + std::to_string(i) + " has no name");
    p.name = strings[ids.paramNames[i]];
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
  if (plan.gradSqBuffer != plan::kNone &&
      (plan.gradSqBuffer >= plan.buffers.size() ||
       plan.buffers[plan.gradSqBuffer].numElements() != 1 ||
       plan.buffers[plan.gradSqBuffer].dtype != plan::DType::F32))
    return fail("the gradients' sum of squares buffer is not a scalar f32 "
                "buffer");
  for (size_t i = 0; i < plan.program.size(); ++i) {
    uint32_t unit = ids.kernelUnits[i];
    if (unit == plan::kNone)
      continue;
    if (unit >= strings.size())
      return fail("kernel #" + std::to_string(i) + " names no unit");
    plan.program[i].unit = strings[unit];
  }
  return true;
}

/// Operand and parameter counts against the kernel table, and operand ids.
static bool checkOperandCounts(const KernelCheck &k) {
  const plan::KernelInfo &info = k.info();
  const Instruction &inst = k.inst;
  if (inst.ins.size() < info.minInputs || inst.ins.size() > info.maxInputs ||
      inst.outs.size() != info.outputs)
    return k.bad("wrong number of operands");
  if (inst.params.size() != plan::numParams(info))
    return k.bad("wrong number of parameters");
  for (uint32_t id : inst.ins)
    if (id >= k.plan.buffers.size())
      return k.bad("reads an unknown buffer");
  for (uint32_t id : inst.outs)
    if (id >= k.plan.buffers.size())
      return k.bad("writes an unknown buffer");
  return true;
}

/// The element types `rule` admits, for errors: "f32", "f32 or bf16".
static std::string admittedTypes(plan::ElementRule rule) {
  std::string names;
  for (uint32_t t = 0; t < plan::kNumDTypes; ++t)
    if (plan::admits(rule, plan::DType(t)))
      names +=
          (names.empty() ? "" : " or ") + std::string(plan::kDTypeNames[t]);
  return names;
}

/// Operand element types by the kernel table's rules; token ids must come
/// from a step input (no kernel writes ids, so only an input, which the
/// runtime fills with checked data, holds them).
static bool checkElementTypes(const KernelCheck &k, plan::DType &elementType) {
  const plan::KernelInfo &info = k.info();
  // One element type for all Float operands: the kernel runs in it.
  std::optional<plan::DType> element;
  auto agrees = [&](plan::ElementRule rule, plan::DType dtype) {
    if (rule != plan::ElementRule::Float || !plan::isFloatType(dtype))
      return true;
    if (!element)
      element = dtype;
    return *element == dtype;
  };
  for (size_t i = 0; i < k.inst.ins.size(); ++i)
    if (!agrees(info.ins[i].rule, k.in(i).dtype))
      return k.bad("mixes f32 and bf16 operands (operand #" +
                   std::to_string(i) + ")");
  for (size_t i = 0; i < k.inst.outs.size(); ++i)
    if (!agrees(info.outs[i].rule, k.out(i).dtype))
      return k.bad("mixes f32 and bf16 operands (result #" + std::to_string(i) +
                   ")");
  elementType = element.value_or(plan::DType::F32);
  for (size_t i = 0; i < k.inst.ins.size(); ++i)
    if (!plan::admits(info.ins[i].rule, k.in(i).dtype))
      return k.bad("operand #" + std::to_string(i) +
                   " has the wrong element type");
  for (size_t i = 0; i < k.inst.outs.size(); ++i)
    if (!plan::admits(info.outs[i].rule, k.out(i).dtype))
      return k.bad("result #" + std::to_string(i) + " is not " +
                   admittedTypes(info.outs[i].rule));
  for (size_t i = 0; i < k.inst.ins.size(); ++i)
    if (info.ins[i].rule == plan::ElementRule::TokenIds &&
        k.in(i).kind != plan::BufferKind::Input)
      return k.bad("operand #" + std::to_string(i) +
                   " (token ids) is not a step input");
  return true;
}

/// linear, linear_grad_input, linear_grad_weight: x N x IC, w OC x IC,
/// y N x OC in their roles per kernel, every GEMM dimension within an int.
static bool checkLinear(const KernelCheck &k) {
  using plan::Opcode;
  Opcode opcode = k.info().opcode;
  const BufferDesc &w = opcode == Opcode::LinearGradWeight ? k.out(0) : k.in(1);
  if (w.shape.size() != 2)
    return k.bad("weight is not rank 2");
  int64_t oc = w.shape[0], ic = w.shape[1];
  const BufferDesc &x = opcode == Opcode::Linear            ? k.in(0)
                        : opcode == Opcode::LinearGradInput ? k.out(0)
                                                            : k.in(1);
  const BufferDesc &y = opcode == Opcode::Linear ? k.out(0) : k.in(0);
  if (oc == 0 || ic == 0 || x.shape.empty() || y.shape.empty() ||
      last(x) != ic || last(y) != oc ||
      x.numElements() / ic != y.numElements() / oc)
    return k.bad("inconsistent shapes");
  if (oc > kIntMax || ic > kIntMax || x.numElements() / ic > kIntMax)
    return k.bad("has a dimension past the 2^31 - 1 that BLAS takes");
  if (opcode == Opcode::Linear && k.inst.ins.size() == 3 &&
      k.in(2).numElements() != oc)
    return k.bad("bias does not match the output features");
  return true;
}

/// What each attention kernel reads and writes beyond qkv, given B x T x C
/// (act), the probabilities' B x H x T x T and the log-sum-exp's B x H x T.
static bool attentionShapesFit(const KernelCheck &k,
                               const std::vector<int64_t> &act,
                               const std::vector<int64_t> &probs,
                               const std::vector<int64_t> &lse) {
  const std::vector<int64_t> &qkv =
      k.info().opcode == plan::Opcode::Attention ||
              k.info().opcode == plan::Opcode::AttentionBlocked
          ? k.in(0).shape
          : k.in(1).shape;
  switch (k.info().opcode) {
  case plan::Opcode::Attention:
    return k.out(0).shape == act && k.out(1).shape == probs;
  case plan::Opcode::AttentionBlocked:
    return k.out(0).shape == act && k.out(1).shape == lse;
  case plan::Opcode::AttentionBackward:
    return k.in(0).shape == act && k.in(2).shape == probs &&
           k.out(0).shape == qkv &&
           k.out(1).numElements() == k.in(2).numElements();
  default: // the blocked backward
    return k.in(0).shape == act && k.in(2).shape == lse &&
           k.in(3).shape == act && k.out(0).shape == qkv;
  }
}

/// A head count parameter that is a whole number in [1, most] (NaN fails).
static bool wholeCount(double x, int64_t most) {
  return x >= 1 && x <= double(most) && x == double(int64_t(x));
}

/// attention and its backward, both forms: qkv B x T x (heads + 2 kv_heads)
/// hs (3C when kv_heads = heads), whole head counts with kv_heads dividing
/// heads, B H T rows within an int.
static bool checkAttention(const KernelCheck &k) {
  bool forward = k.info().opcode == plan::Opcode::Attention ||
                 k.info().opcode == plan::Opcode::AttentionBlocked;
  const BufferDesc &qkv = forward ? k.in(0) : k.in(1);
  const plan::Opcode op = k.info().opcode;
  double heads = k.inst.params[plan::paramIndex(op, "heads")];
  double kvHeads = k.inst.params[plan::paramIndex(op, "kv_heads")];
  // Both counts within [1, width] before they are converted.
  if (qkv.shape.size() != 3 || qkv.shape[1] == 0 || qkv.shape[2] == 0 ||
      !wholeCount(heads, qkv.shape[2]) || !wholeCount(kvHeads, qkv.shape[2]) ||
      int64_t(heads) % int64_t(kvHeads) ||
      qkv.shape[2] % (int64_t(heads) + 2 * int64_t(kvHeads)))
    return k.bad("inconsistent shapes or head count");
  int64_t H = int64_t(heads), hs = qkv.shape[2] / (H + 2 * int64_t(kvHeads));
  int64_t B = qkv.shape[0], T = qkv.shape[1], C = hs * H;
  // B H T <= B T C <= the qkv buffer's elements: no overflow here.
  if (T > kIntMax || qkv.shape[2] > kIntMax || B * H * T > kIntMax)
    return k.bad("has a dimension past the 2^31 - 1 that BLAS takes");
  if (!attentionShapesFit(k, {B, T, C}, {B, H, T, T}, {B, H, T}))
    return k.bad("inconsistent shapes");
  return true;
}

/// cross_entropy and its backward: one target per row of logits, rows
/// within an int, and one vocabulary (the logits' width) for all of them.
static bool checkCrossEntropy(const KernelCheck &k, Vocabulary &v) {
  bool forward = k.info().opcode == plan::Opcode::CrossEntropy;
  const BufferDesc &logits = forward ? k.in(0) : k.in(1);
  const BufferDesc &targets = forward ? k.in(1) : k.in(2);
  if (logits.shape.empty() || last(logits) == 0 ||
      !productIs(targets.numElements(), last(logits), logits.numElements()))
    return k.bad("inconsistent shapes");
  if (targets.numElements() > kIntMax || last(logits) > kIntMax)
    return k.bad(kTooManyRows);
  if (v.vocabulary < 0) {
    v.vocabulary = last(logits);
    v.vocabularyAt = k.index;
  } else if (last(logits) != v.vocabulary) {
    return k.bad("has a vocabulary of " + std::to_string(last(logits)) +
                 ", kernel #" + std::to_string(v.vocabularyAt) + " one of " +
                 std::to_string(v.vocabulary));
  }
  if (forward ? k.out(0).numElements() != 1 ||
                    k.out(1).numElements() != targets.numElements()
              : (k.in(0).numElements() != 1 || !same(k.out(0), logits)))
    return k.bad("inconsistent shapes");
  return true;
}

/// embedding and its backward: ids B x T, tables V x C and T' x C (T' >=
/// T), rows within an int; the forward's table size is noted in `v`.
static bool checkEmbedding(const KernelCheck &k, Vocabulary &v) {
  if (k.info().opcode == plan::Opcode::Embedding) {
    // Without a position table (Llama's), the token table alone.
    const BufferDesc &ids = k.in(0), &wte = k.in(1);
    const BufferDesc &wpe = k.inst.ins.size() == 3 ? k.in(2) : wte;
    bool positions = k.inst.ins.size() == 3;
    if (ids.shape.size() != 2 || wte.shape.size() != 2 ||
        wpe.shape.size() != 2 || (positions && wpe.shape[0] < ids.shape[1]) ||
        wte.shape[1] != wpe.shape[1] ||
        k.out(0).shape !=
            std::vector<int64_t>{ids.shape[0], ids.shape[1], wte.shape[1]})
      return k.bad("inconsistent shapes");
    if (ids.numElements() > kIntMax)
      return k.bad(kTooManyRows);
    if (v.smallestTable < 0 || wte.shape[0] < v.smallestTable) {
      v.smallestTable = wte.shape[0];
      v.smallestTableAt = k.index;
    }
    return true;
  }
  // token_embedding_backward has no position table gradient.
  bool positions = k.info().opcode == plan::Opcode::EmbeddingBackward;
  const BufferDesc &ids = k.in(1), &dwte = k.out(0);
  const BufferDesc &dwpe = positions ? k.out(1) : dwte;
  if (ids.shape.size() != 2 || dwte.shape.size() != 2 ||
      dwpe.shape.size() != 2 || (positions && dwpe.shape[0] < ids.shape[1]) ||
      k.in(0).shape !=
          std::vector<int64_t>{ids.shape[0], ids.shape[1], dwte.shape[1]} ||
      dwpe.shape[1] != dwte.shape[1])
    return k.bad("inconsistent shapes");
  if (ids.numElements() > kIntMax)
    return k.bad(kTooManyRows);
  return true;
}

/// layer_norm and its backward: rows of width C (not 0), per-row mean and
/// rstd, gains of C, rows within an int.
static bool checkLayerNorm(const KernelCheck &k) {
  if (k.info().opcode == plan::Opcode::LayerNorm) {
    const BufferDesc &x = k.in(0);
    if (x.shape.empty() || last(x) == 0 || !same(x, k.out(0)) ||
        k.in(1).numElements() != last(x) || k.in(2).numElements() != last(x) ||
        !productIs(k.out(1).numElements(), last(x), x.numElements()) ||
        k.out(2).numElements() != k.out(1).numElements())
      return k.bad("inconsistent shapes");
    if (k.out(1).numElements() > kIntMax)
      return k.bad(kTooManyRows);
    return true;
  }
  const BufferDesc &x = k.in(1);
  if (x.shape.empty() || last(x) == 0 || !same(k.in(0), x) ||
      !same(x, k.out(0)) || k.in(2).numElements() != last(x) ||
      !productIs(k.in(3).numElements(), last(x), x.numElements()) ||
      k.in(4).numElements() != k.in(3).numElements() ||
      k.out(1).numElements() != last(x) || k.out(2).numElements() != last(x))
    return k.bad("inconsistent shapes");
  if (k.in(3).numElements() > kIntMax)
    return k.bad(kTooManyRows);
  return true;
}

/// rms_norm and its backward: rows of width C (not 0), one f32 rstd per
/// row, a weight of C, rows within an int.
static bool checkRmsNorm(const KernelCheck &k) {
  bool forward = k.info().opcode == plan::Opcode::RmsNorm;
  const BufferDesc &x = forward ? k.in(0) : k.in(1);
  const BufferDesc &weight = forward ? k.in(1) : k.in(2);
  const BufferDesc &rstd = forward ? k.out(1) : k.in(3);
  if (x.shape.empty() || last(x) == 0 || !same(x, k.out(0)) ||
      weight.numElements() != last(x) ||
      !productIs(rstd.numElements(), last(x), x.numElements()))
    return k.bad("inconsistent shapes");
  if (!forward && (!same(k.in(0), x) || k.out(1).numElements() != last(x)))
    return k.bad("inconsistent shapes");
  if (rstd.numElements() > kIntMax)
    return k.bad(kTooManyRows);
  return true;
}

/// rope and its backward: B x T x (heads + 2 kv_heads) hs with whole head
/// counts of at least 1, an even hs, the result of the operand's shape and
/// a positive finite theta.
static bool checkRope(const KernelCheck &k) {
  plan::Opcode opcode = k.info().opcode;
  double heads = k.inst.params[plan::paramIndex(opcode, "heads")];
  double kvHeads = k.inst.params[plan::paramIndex(opcode, "kv_heads")];
  double theta = k.inst.params[plan::paramIndex(opcode, "theta")];
  const BufferDesc &qkv = k.in(0);
  // The counts within [1, width] before they are converted (NaN fails).
  if (qkv.shape.size() != 3 || !same(qkv, k.out(0)) ||
      !(heads >= 1 && heads <= double(qkv.shape[2])) ||
      !(kvHeads >= 1 && kvHeads <= double(qkv.shape[2])) ||
      heads != double(int64_t(heads)) || kvHeads != double(int64_t(kvHeads)))
    return k.bad("inconsistent shapes or head counts");
  int64_t columns = int64_t(heads) + 2 * int64_t(kvHeads);
  if (qkv.shape[2] % columns != 0 || (qkv.shape[2] / columns) % 2 != 0)
    return k.bad("inconsistent shapes or head counts");
  if (!(theta > 0.0) || std::isinf(theta))
    return k.bad("has a theta that is not positive and finite");
  return true;
}

/// The sharded kernels: an all_gather of a unit's shard into its flat
/// size, a reduce_scatter into a shard, an adamw_shard of exactly a unit's
/// shard and its moments.
static bool checkSharded(const KernelCheck &k) {
  const Plan &plan = k.plan;
  switch (k.info().opcode) {
  case plan::Opcode::AllGather:
    if (k.in(0).kind != plan::BufferKind::Param || k.in(0).unit < 0 ||
        k.out(0).numElements() != plan.units[k.in(0).unit].flatSize ||
        k.in(0).numElements() !=
            plan::maxShardSize(k.out(0).numElements(), plan.shardSize))
      return k.bad("does not gather a unit's shard into its flat size");
    return true;
  case plan::Opcode::ReduceScatter:
    if (k.out(0).numElements() !=
        plan::maxShardSize(k.in(0).numElements(), plan.shardSize))
      return k.bad("the shard does not match the flat gradient");
    return true;
  case plan::Opcode::AllReduceMean: {
    // In place, on a shard of the unit it names.
    auto unit = std::find_if(
        plan.units.begin(), plan.units.end(), [&](const UnitDesc &u) {
          return !k.inst.unit.empty() && u.name == k.inst.unit;
        });
    if (unit == plan.units.end() || k.inst.ins[0] != k.inst.outs[0] ||
        k.in(0).numElements() !=
            plan::maxShardSize(unit->flatSize, plan.shardSize))
      return k.bad("does not average a shard of its unit in place");
    return true;
  }
  default: // AdamWShard
    if (k.out(0).kind != plan::BufferKind::Param || k.out(0).unit < 0 ||
        k.out(1).kind != plan::BufferKind::AdamM ||
        k.out(2).kind != plan::BufferKind::AdamV ||
        k.out(1).unit != k.out(0).unit || k.out(2).unit != k.out(0).unit ||
        !same(k.in(0), k.out(0)) || !same(k.out(0), k.out(1)) ||
        !same(k.out(0), k.out(2)) ||
        k.out(0).numElements() !=
            plan::maxShardSize(plan.units[k.out(0).unit].flatSize,
                               plan.shardSize))
      return k.bad("does not update a unit's shard and its moments");
    if (k.inst.ins.size() == 2 && k.in(1).numElements() != 1)
      return k.bad("scales its gradient by a buffer that is not a scalar");
    return true;
  }
}

/// Gradient clipping: a grad_sq_sum of a gradient shard of the unit it
/// names, with that unit's flat size (each rank counts its own elements
/// of the shard by it), into a scalar, its scratch the GPU's per-block
/// partial sums; all_reduce_sum and clip_coefficient on scalars, with a
/// positive finite max_norm.
static bool checkClipping(const KernelCheck &k) {
  using plan::Opcode;
  const Plan &plan = k.plan;
  auto scalar = [](const BufferDesc &b) { return b.numElements() == 1; };
  if (k.info().opcode == Opcode::GradSqSum) {
    double flat =
        k.inst.params[plan::paramIndex(Opcode::GradSqSum, "flat_size")];
    auto unit = std::find_if(
        plan.units.begin(), plan.units.end(), [&](const UnitDesc &u) {
          return !k.inst.unit.empty() && u.name == k.inst.unit;
        });
    if (unit == plan.units.end() || double(unit->flatSize) != flat)
      return k.bad("flat_size " + text(flat) +
                   " is not the flat size of its unit '" + k.inst.unit + "'");
    if (k.in(0).numElements() !=
        plan::maxShardSize(unit->flatSize, plan.shardSize))
      return k.bad("the gradient is not a shard of unit '" + unit->name + "'");
    if ((k.inst.ins.size() == 2 && !scalar(k.in(1))) || !scalar(k.out(0)) ||
        k.out(1).numElements() != plan::kGradSqSumScratch)
      return k.bad("inconsistent shapes");
    return true;
  }
  if (!scalar(k.in(0)) || !scalar(k.out(0)))
    return k.bad("inconsistent shapes");
  // The sum of squares counts each element once: over the shard group
  // (replicas hold the same shard).
  if (k.info().opcode == Opcode::AllReduceSum &&
      k.inst.params[plan::kAllReduceSumAxis] != double(plan::CommAxis::Shard))
    return k.bad("runs over axis " +
                 text(k.inst.params[plan::kAllReduceSumAxis]) +
                 ", not 0 (shard), the axis of all_reduce_sum");
  if (k.info().opcode == Opcode::ClipCoefficient) {
    double maxNorm =
        k.inst.params[plan::paramIndex(Opcode::ClipCoefficient, "max_norm")];
    if (!(maxNorm > 0.0) || std::isinf(maxNorm))
      return k.bad("has a max_norm that is not positive and finite");
  }
  return true;
}

/// The shapes each kernel assumes, by opcode: no width a kernel divides by
/// is zero, every dimension that reaches a BLAS call or a CUDA grid fits in
/// an int.
static bool checkShapes(const KernelCheck &k, Vocabulary &vocabulary) {
  using plan::Opcode;
  switch (k.info().opcode) {
  case Opcode::Embedding:
  case Opcode::EmbeddingBackward:
  case Opcode::TokenEmbeddingBackward:
    return checkEmbedding(k, vocabulary);
  case Opcode::LayerNorm:
  case Opcode::LayerNormBackward:
    return checkLayerNorm(k);
  case Opcode::Linear:
  case Opcode::LinearGradInput:
  case Opcode::LinearGradWeight:
    return checkLinear(k);
  case Opcode::BiasGrad:
    if (k.in(0).shape.empty() || last(k.in(0)) == 0 ||
        k.out(0).numElements() != last(k.in(0)))
      return k.bad("inconsistent shapes");
    return true;
  case Opcode::Add:
  case Opcode::GeluBackward:
  case Opcode::ReluBackward:
    if (!same(k.in(0), k.in(1)) || !same(k.in(0), k.out(0)))
      return k.bad("inconsistent shapes");
    return true;
  case Opcode::Gelu:
  case Opcode::Relu:
    if (!same(k.in(0), k.out(0)))
      return k.bad("inconsistent shapes");
    return true;
  case Opcode::Attention:
  case Opcode::AttentionBackward:
  case Opcode::AttentionBlocked:
  case Opcode::AttentionBackwardBlocked:
    return checkAttention(k);
  case Opcode::CrossEntropy:
  case Opcode::CrossEntropyBackward:
    return checkCrossEntropy(k, vocabulary);
  case Opcode::AdamW:
    if (!same(k.in(0), k.out(0)) || !same(k.in(0), k.out(1)) ||
        !same(k.in(0), k.out(2)) || k.out(0).kind != plan::BufferKind::Param ||
        k.out(1).kind != plan::BufferKind::AdamM ||
        k.out(2).kind != plan::BufferKind::AdamV)
      return k.bad("does not update a parameter and its moments");
    return true;
  case Opcode::AllGather:
  case Opcode::ReduceScatter:
  case Opcode::AllReduceMean:
  case Opcode::AdamWShard:
    return checkSharded(k);
  case Opcode::RmsNorm:
  case Opcode::RmsNormBackward:
    return checkRmsNorm(k);
  case Opcode::SwiGlu:
  case Opcode::SwiGluBackward:
    if (!same(k.in(0), k.in(1)) || !same(k.in(0), k.out(0)) ||
        (k.info().opcode == Opcode::SwiGluBackward &&
         (!same(k.in(0), k.in(2)) || !same(k.in(0), k.out(1)))))
      return k.bad("inconsistent shapes");
    return true;
  case Opcode::Rope:
  case Opcode::RopeBackward:
    return checkRope(k);
  case Opcode::Copy:
  case Opcode::Cast:
    if (k.in(0).numElements() != k.out(0).numElements())
      return k.bad("inconsistent shapes");
    if (overlap(k.in(0), k.out(0)))
      return k.bad("copies between overlapping buffers");
    return true;
  case Opcode::Fill:
  case Opcode::Wait:
    return true; // a wait: validateStreams matches it with its start
  case Opcode::GradSqSum:
  case Opcode::AllReduceSum:
  case Opcode::ClipCoefficient:
    return checkClipping(k);
  }
  return k.bad("has an unknown opcode"); // findKernel allowed no other
}

/// Every embedding table has a row for each id below the cross-entropies'
/// vocabulary (what the data is checked against); sets plan.vocabulary.
static bool checkVocabulary(Plan &plan, const Vocabulary &v, std::string &why) {
  if (v.smallestTable >= 0 && v.vocabulary >= 0 &&
      v.smallestTable < v.vocabulary) {
    why = "kernel #" + std::to_string(v.smallestTableAt) +
          " (embedding): a table of " + std::to_string(v.smallestTable) +
          " rows for ids below the vocabulary of " +
          std::to_string(v.vocabulary) + " (kernel #" +
          std::to_string(v.vocabularyAt) + ")";
    return false;
  }
  plan.vocabulary =
      v.vocabulary >= 0 ? v.vocabulary : std::max<int64_t>(v.smallestTable, 0);
  return true;
}

/// The gradients' sum of squares buffer is what a clip_coefficient reads:
/// the runtime reports its square root as the gradient norm.
static bool checkGradSqBuffer(const Plan &plan, std::string &why) {
  if (plan.gradSqBuffer == plan::kNone)
    return true;
  for (const Instruction &inst : plan.program)
    if (inst.kernel->opcode == plan::Opcode::ClipCoefficient &&
        inst.ins[0] == plan.gradSqBuffer)
      return true;
  why = "the gradients' sum of squares buffer is not what a "
        "clip_coefficient reads";
  return false;
}

/// Every kernel's operands: counts, ids, element types and shapes, as the
/// CPU and CUDA kernels assume them; token ids come from a step input and
/// index tables that hold the vocabulary; collectives and sharded updates
/// cover exactly a unit's shard; then the streams.
static bool validateKernels(Plan &plan, std::string &why) {
  Vocabulary vocabulary;
  for (size_t i = 0; i < plan.program.size(); ++i) {
    KernelCheck k{plan, plan.program[i], i, why};
    if (!checkOperandCounts(k) ||
        !checkElementTypes(k, plan.program[i].elementType) ||
        !checkShapes(k, vocabulary))
      return false;
  }
  return checkVocabulary(plan, vocabulary, why) && validateStreams(plan, why) &&
         checkGradSqBuffer(plan, why) && checkEvalStep(plan, why);
}

/// True when buffers a and b share an arena byte.
static bool overlap(const BufferDesc &a, const BufferDesc &b) {
  return a.offset < b.offset + b.size && b.offset < a.offset + a.size;
}

namespace {
/// A started collective, until its wait.
struct Started {
  size_t at;
  uint32_t source, result;
};
using InFlight = std::map<int64_t, Started>;

bool isCount(double v, double limit) {
  return v >= 0 && v < limit && v == double(int64_t(v));
}
} // namespace

/// No kernel writes the input or touches the output of a collective in
/// flight (a wait reads them both: that is what it is for).
static bool checkInFlightUses(const KernelCheck &k, const InFlight &inFlight) {
  const Plan &plan = k.plan;
  for (const auto &[token, started] : inFlight) {
    const BufferDesc &source = plan.buffers[started.source],
                     &result = plan.buffers[started.result];
    bool writesSource = false, touchesResult = false;
    for (uint32_t id : k.inst.outs) {
      writesSource |= overlap(plan.buffers[id], source);
      touchesResult |= overlap(plan.buffers[id], result);
    }
    if (k.info().opcode != plan::Opcode::Wait)
      for (uint32_t id : k.inst.ins)
        touchesResult |= overlap(plan.buffers[id], result);
    if (writesSource || touchesResult)
      return k.bad(std::string(writesSource ? "overwrites the input"
                                            : "uses the output") +
                   " of " + std::string(plan.program[started.at].kernel->name) +
                   " #" + std::to_string(started.at) + " (token " +
                   std::to_string(token) + ") before its wait");
  }
  return true;
}

/// A collective's stream, token and group; a started one (stream >= 1)
/// goes in flight under its token, which must be new.
static bool checkCollective(const KernelCheck &k, InFlight &inFlight,
                            std::set<int64_t> &used) {
  plan::CollectiveParams p = plan::collectiveParams(k.inst.params.data());
  if (!isCount(p.stream, plan::kNumStreams))
    return k.bad("invalid stream " + text(p.stream));
  if (!isCount(p.token, 4294967296.0) || (p.stream == 0) != (p.token == 0))
    return k.bad("invalid token " + text(p.token) + " on stream " +
                 text(p.stream));
  if (p.group != 0 && p.group != 1)
    return k.bad("invalid group " + text(p.group));
  // The sharding collectives run over the shard group, the replica
  // all-reduce over the replica group.
  plan::CommAxis expected = k.info().opcode == plan::Opcode::AllReduceMean
                                ? plan::CommAxis::Replicate
                                : plan::CommAxis::Shard;
  if (p.axis != double(uint32_t(expected)))
    return k.bad("runs over axis " + text(p.axis) + ", not " +
                 std::to_string(uint32_t(expected)) + " (" +
                 std::string(plan::kCommAxisNames[uint32_t(expected)]) +
                 "), the axis of " + std::string(k.info().name));
  if (p.group == 1) {
    const Instruction *previous =
        k.index > 0 ? &k.plan.program[k.index - 1] : nullptr;
    if (p.stream == 0 || !previous ||
        previous->kernel->opcode != k.info().opcode ||
        plan::collectiveParams(previous->params.data()).stream != p.stream)
      return k.bad("is grouped but does not follow a started " +
                   std::string(k.info().name) + " on its stream");
  }
  if (p.stream == 0)
    return true;
  if (!used.insert(int64_t(p.token)).second)
    return k.bad("token " + std::to_string(int64_t(p.token)) +
                 " is started twice");
  inFlight[int64_t(p.token)] = {k.index, k.inst.ins[0], k.inst.outs[0]};
  return true;
}

/// A wait: its token is in flight and it names that collective's buffers.
static bool checkWait(const KernelCheck &k, InFlight &inFlight) {
  double token = plan::waitToken(k.inst.params.data());
  auto found = isCount(token, 4294967296.0) ? inFlight.find(int64_t(token))
                                            : inFlight.end();
  if (found == inFlight.end())
    return k.bad("waits for token " + text(token) + ", which is not in flight");
  if (k.inst.ins[0] != found->second.source ||
      k.inst.ins[1] != found->second.result)
    return k.bad("does not name the buffers of the collective it waits for");
  inFlight.erase(found);
  return true;
}

/// The asynchronous collectives: each started one (stream >= 1) has a
/// unique token and exactly one later wait naming its buffers, and until
/// that wait no kernel writes what it reads or touches what it writes (a
/// corrupt plan would otherwise race with the collective's thread or
/// stream, silently).
static bool validateStreams(Plan &plan, std::string &why) {
  using plan::Opcode;
  InFlight inFlight;
  std::set<int64_t> used;
  for (size_t i = 0; i < plan.program.size(); ++i) {
    KernelCheck k{plan, plan.program[i], i, why};
    Opcode opcode = k.info().opcode;
    if (!checkInFlightUses(k, inFlight))
      return false;
    if ((opcode == Opcode::AllGather || opcode == Opcode::ReduceScatter ||
         opcode == Opcode::AllReduceMean) &&
        !checkCollective(k, inFlight, used))
      return false;
    if (opcode == Opcode::Wait && !checkWait(k, inFlight))
      return false;
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
  os << "plan " << plan.path << ": world size " << plan.worldSize;
  if (plan.shardSize != plan.worldSize)
    os << " (mesh " << plan.replicas() << "x" << plan.shardSize << ")";
  os << ", " << plan.params.size() << " parameters (" << paramElements
     << " elements), " << plan.buffers.size() << " buffers, "
     << plan.program.size() << " kernels\n"
     << "  arena " << plan.arenaSize << " bytes, predicted peak "
     << plan.peakBytes << " bytes at kernel #" << plan.peakKernel << " (params "
     << plan.peak.params << ", grads " << plan.peak.grads << ", optimizer "
     << plan.peak.optimizer << ", activations " << plan.peak.activations
     << ", scratch " << plan.peak.scratch << ", gathered " << plan.peak.gathered
     << ", inputs " << plan.peak.inputs << ")\n"
     << "  outside the arena (predicted): cpu " << plan.outsideArenaCpu
     << " bytes of heap, " << plan.outsideArenaCpuMapped << " mapped and "
     << plan.blasBytesPerThread << " per BLAS thread, cuda "
     << plan.outsideArenaCuda << " bytes of device memory\n"
     << "  model FLOPs per rank and step " << plan.modelFlops << "\n"
     << "  memory budget "
     << (plan.memoryBudget ? std::to_string(plan.memoryBudget) + " bytes"
                           : std::string("none"))
     << "\n";
  if (plan.evalKernels)
    os << "  evaluation step: kernels #0..#" << plan.evalKernels - 1 << " of "
       << plan.program.size() << " (the forward and the loss), "
       << plan.evalDrainTokens.size() << " collectives finished at its end\n";
  else
    os << "  evaluation step: none marked\n";
  for (const UnitDesc &u : plan.units)
    os << "  unit " << u.name << ": " << u.flatSize << " elements, shard of "
       << plan::maxShardSize(u.flatSize, plan.shardSize) << "\n";
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
