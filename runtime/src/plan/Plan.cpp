//===- Plan.cpp - reading plan files and checking their structure ---------===//
//
// loadPlan never throws and never trusts a field: every count is bounded by
// the bytes left to hold its records, every size and product is computed
// with overflow checks before anything is allocated, and every relation a
// kernel relies on (docs/plan-format.md, "What the reader checks") is
// checked before anything runs. This file reads the header and the tables
// and checks buffers, units, parameters and names; the kernels' checks are
// PlanKernelChecks.cpp's, the streams' PlanStreamChecks.cpp's.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/plan/Plan.h"
#include "fsdp/runtime/support/RegularFile.h"
#include "plan/PlanChecks.h"

#include <cmath>
#include <cstring>
#include <exception>
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
} // namespace

int64_t BufferDesc::numElements() const { return product(shape); }
int64_t ParamDesc::numElements() const { return product(shape); }

namespace {
/// String indices the tables hold until the string table, the last one, is
/// read: units' and parameters' names, kernels' units.
struct StringIds {
  std::vector<uint32_t> unitNames, paramNames, kernelUnits;
};
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
  r.read(plan.expertSize); // version 16
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
  r.readString(plan.modelConfig);
  if (r.failed())
    why = "the payload ends in the middle of a record";
  else if (!(plan.modelFlops >= 0.0 && plan.modelFlops <= 1e30))
    why = "invalid model FLOPs per step " + std::to_string(plan.modelFlops);
  else if (plan.worldSize < 1 || plan.worldSize > (1u << 20))
    why = "invalid world size " + std::to_string(plan.worldSize);
  else if (plan.shardSize < 1 || plan.worldSize % plan.shardSize != 0)
    why = "invalid mesh: a shard group of " + std::to_string(plan.shardSize) +
          " ranks in a world of " + std::to_string(plan.worldSize);
  else if (plan.expertSize < 1 || plan.shardSize % plan.expertSize != 0)
    why = "invalid expert parallelism: an expert group of " +
          std::to_string(plan.expertSize) + " ranks does not divide the " +
          std::to_string(plan.shardSize) + " ranks of a shard group";
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
constexpr size_t kMinBuffer = 40, kMinUnit = 20, kMinParam = 48,
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

/// The unit table (names as string ids) and its flags (version 16: bit 0
/// expert-parallel, which needs expert groups of more than one rank).
static bool readUnits(Reader &r, Plan &plan, StringIds &ids, std::string &why) {
  uint32_t count = 0;
  why = "malformed unit table";
  if (!r.readCount(count, kMinUnit))
    return false;
  plan.units.resize(count);
  ids.unitNames.resize(count);
  for (size_t i = 0; i < count; ++i) {
    UnitDesc &u = plan.units[i];
    uint32_t flags = 0;
    if (!r.read(ids.unitNames[i]) || !r.read(u.flatSize) ||
        !r.read(u.shardBuffer) || !r.read(flags) || u.flatSize < 0)
      return false;
    if ((flags & ~plan::kUnitExpertParallel) != 0) {
      why = "unit #" + std::to_string(i) + " has unknown flags " +
            std::to_string(flags) +
            " (bit 0, expert-parallel, is the only "
            "one; recompile the model)";
      return false;
    }
    if ((flags & plan::kUnitExpertParallel) && plan.expertSize == 1) {
      why = "unit #" + std::to_string(i) +
            " is expert-parallel in a plan "
            "without expert groups (expert_size 1)";
      return false;
    }
    u.expertParallel = (flags & plan::kUnitExpertParallel) != 0;
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
    uint32_t dtype, init, flags;
    double rate = 0;
    if (!r.read(ids.paramNames[i]) || !r.read(dtype) || !r.readShape(p.shape) ||
        !r.read(init) || !r.read(p.stddev) || !r.read(flags) || !r.read(rate) ||
        !r.read(p.unit) || !r.read(p.unitOffset))
      return false;
    if (dtype >= plan::kNumDTypes || init > 2) {
      why = "parameter with an unknown element type or initializer";
      return false;
    }
    // Flags: bit 0 no weight decay, bit 1 a selection bias (version 15),
    // whose update rate is finite and non-negative, f32 and 1-D.
    bool selection = flags & 2;
    if (flags > 3 || (selection && (!(rate >= 0) || std::isinf(rate) ||
                                    dtype != uint32_t(plan::DType::F32) ||
                                    p.shape.size() != 1))) {
      why = "parameter with unknown flags or a malformed selection bias";
      return false;
    }
    p.dtype = plan::DType(dtype);
    p.init = plan::InitKind(init);
    p.noWeightDecay = flags & 1;
    p.selectionBiasRate = selection ? rate : -1;
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
    bool owned = plan::isUnitState(b.kind);
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
            plan::maxShardSize(u.flatSize, plan.unitShards(uint32_t(i))))
      return fail("unit '" + u.name + "' has no valid shard buffer");
  }
  // A unit's shard copy: one at most, bf16, the shard's size (views of
  // it, the regions' parameters, are its kind too).
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const BufferDesc &copy = plan.buffers[b];
    if (copy.kind != plan::BufferKind::ShardCopy || copy.base >= 0)
      continue;
    UnitDesc &u = plan.units[copy.unit];
    if (u.copyBuffer != plan::kNone)
      return fail("unit '" + u.name + "' has two shard copies");
    if (copy.dtype != plan::DType::BF16 ||
        copy.numElements() != plan.buffers[u.shardBuffer].numElements())
      return fail("unit '" + u.name +
                  "' has a shard copy that is not its shard's size in bf16");
    u.copyBuffer = uint32_t(b);
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
    if (plan.units[p.unit].expertParallel) {
      // A slice of G: its full parameter's first dim, G times its own,
      // must not overflow either.
      int64_t full = 0;
      if (p.shape.empty() ||
          __builtin_mul_overflow(elements, int64_t(plan.expertSize), &full))
        return fail("parameter '" + p.name + "' of expert-parallel unit '" +
                    plan.units[p.unit].name +
                    "' has no rows to slice, or too many");
      p.expertSlices = plan.expertSize;
    }
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
} // namespace fsdp::rt
