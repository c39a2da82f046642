//===- PlanWriter.cpp - the step program as a plan file -------------------===//
//
// A direct serialisation of the fsdprt program: buffers in declaration
// order (their index is their id), parameters, then kernels in program
// order. Everything little-endian; a CRC-32 in the header covers the whole
// file (the header with the CRC field zeroed, then the payload). The layout
// is documented in docs/plan-format.md and defined by
// runtime/include/fsdp/runtime/PlanFormat.h.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Target/PlanWriter.h"

#include "fsdp/Dialect/FSDP/IR/FSDP.h"
#include "fsdp/Dialect/FSDP/IR/ModelConfig.h"
#include "fsdp/Dialect/Runtime/IR/PlanTypes.h"
#include "fsdp/Dialect/Runtime/IR/Runtime.h"
#include "fsdp/runtime/PlanFormat.h"

#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Endian.h"

using namespace mlir;
using namespace mlir::fsdp;
namespace plan = ::fsdp::plan;

namespace {
/// The bytes outside the arena the summary holds, in file order
/// (docs/plan-format.md): the CPU's heap, its mapped memory, that per BLAS
/// thread, and CUDA's device memory.
constexpr StringLiteral kOutsideArenaBackends[] = {"cpu", "cpu_mapped",
                                                   "cpu_blas_thread", "cuda"};

class PayloadWriter {
public:
  template <typename T> void put(T value) {
    char bytes[sizeof(T)];
    llvm::support::endian::write<T, llvm::endianness::little>(bytes, value);
    data.append(bytes, sizeof(T));
  }
  void putF64(double value) {
    uint64_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    put<uint64_t>(bits);
  }
  void putShape(ArrayRef<int64_t> shape) {
    put<uint32_t>(shape.size());
    for (int64_t d : shape)
      put<int64_t>(d);
  }
  uint32_t string(StringRef s) {
    auto [it, inserted] = stringIds.try_emplace(s, strings.size());
    if (inserted)
      strings.push_back(s.str());
    return it->second;
  }

  std::string data;
  std::vector<std::string> strings;
  llvm::StringMap<uint32_t> stringIds;
};

std::optional<plan::DType> dtypeOf(Type type) {
  return fsdprt::getPlanDType(type);
}
} // namespace

namespace {
/// writePlan's phases and what they share: the step program and its planned
/// memory, the units, and the buffers and kernels in program order.
class PlanBuilder {
public:
  explicit PlanBuilder(ModuleOp module) : module(module) {}

  /// Finds the step program and its planned memory; fails, saying which
  /// pass to run, where either is missing.
  LogicalResult findProgram();
  /// Numbers the units and the program's buffers and views, and lists its
  /// kernels; fails on a buffer a plan cannot hold.
  LogicalResult collectBuffers();
  /// The summary: world size, arena and peak bytes by class.
  void writeSummary();
  /// The buffer table (a view is a buffer at its base's offset plus its
  /// own); notes each unit's shard buffer for the unit table.
  void writeBuffers();
  /// The unit table: the flat parameters whose shards this rank holds; notes
  /// where each parameter lies in its unit for the parameter table.
  LogicalResult writeUnits();
  /// The parameter table: what the runtime needs to initialise and name them.
  LogicalResult writeParams();
  /// The program: the loss buffer, then the kernels in program order.
  void writeProgram();
  /// The string table, then the header with its CRC-32, then the payload.
  void writeFile(llvm::raw_ostream &os);

private:
  ModuleOp module;
  func::FuncOp program;
  IntegerAttr arena;
  DictionaryAttr peak;
  /// Bytes outside the arena per backend (--fsdp-lower-to-runtime).
  DictionaryAttr outside;
  /// One rank's model FLOPs per step (--fsdp-lower-to-runtime).
  FloatAttr modelFlops;
  PayloadWriter w;
  SmallVector<UnitOp> units;
  llvm::StringMap<uint32_t> unitIndex;
  llvm::DenseMap<Value, uint32_t> bufferIds;
  SmallVector<Operation *> buffers; // fsdprt.buffer and fsdprt.view ops
  SmallVector<fsdprt::KernelOp> kernels;
  /// The kernels of the evaluation step (those above fsdprt.eval_end; 0:
  /// the program marks none).
  uint32_t evalKernels = 0;
  llvm::DenseMap<Value, int64_t> offsetOf;
  llvm::DenseMap<Attribute, uint32_t> shardBuffer;
  llvm::DenseMap<Attribute, std::pair<uint32_t, int64_t>> placeOfParam;
};
} // namespace

/// The summary's mesh: the world size (every axis; 1 without a mesh), then
/// the shard axis (since version 12: the ranks of a shard group, whose
/// layout the shards follow; the world size under full sharding), then
/// the expert axis (since version 16: an expert group's ranks, 1 without).
static void putWorldSize(ModuleOp module, PayloadWriter &w) {
  w.put<uint32_t>(getNumRanks(module));
  w.put<uint32_t>(getShardSize(module));
  MeshAttr mesh = getMesh(module);
  w.put<uint32_t>(mesh ? mesh.getExpertSize() : 1);
}

LogicalResult PlanBuilder::findProgram() {
  for (func::FuncOp func : module.getOps<func::FuncOp>())
    if (func->hasAttr(fsdprt::FSDPRuntimeDialect::kProgramAttrName))
      program = func;
  if (!program)
    return emitError(module.getLoc())
           << "no step program to write: run --fsdp-lower-to-runtime and "
              "--fsdp-plan-memory (or --fsdp-train-pipeline) first";
  arena = program->getAttrOfType<IntegerAttr>(
      fsdprt::FSDPRuntimeDialect::kArenaSizeAttrName);
  peak = program->getAttrOfType<DictionaryAttr>(
      fsdprt::FSDPRuntimeDialect::kPeakAttrName);
  if (!arena || !peak)
    return emitError(program.getLoc())
           << "memory is not planned: run --fsdp-plan-memory first";
  outside = program->getAttrOfType<DictionaryAttr>(
      fsdprt::FSDPRuntimeDialect::kOutsideArenaAttrName);
  if (!outside || !llvm::all_of(kOutsideArenaBackends, [&](StringRef backend) {
        return llvm::isa_and_nonnull<IntegerAttr>(outside.get(backend));
      }))
    return emitError(program.getLoc())
           << "the step program has no '"
           << fsdprt::FSDPRuntimeDialect::kOutsideArenaAttrName
           << "' = {cpu, cuda} (--fsdp-lower-to-runtime records it)";
  modelFlops = program->getAttrOfType<FloatAttr>(
      fsdprt::FSDPRuntimeDialect::kModelFlopsAttrName);
  if (!modelFlops || !(modelFlops.getValueAsDouble() >= 0.0))
    return emitError(program.getLoc())
           << "the step program has no '"
           << fsdprt::FSDPRuntimeDialect::kModelFlopsAttrName
           << "' (--fsdp-lower-to-runtime records it)";
  return success();
}

LogicalResult PlanBuilder::collectBuffers() {
  Block &body = program.getBody().front();
  units = SmallVector<UnitOp>(module.getOps<UnitOp>());
  for (auto [i, unit] : llvm::enumerate(units))
    unitIndex[unit.getSymName()] = i;

  for (Operation &op : body) {
    if (auto buffer = llvm::dyn_cast<fsdprt::BufferOp>(op)) {
      if (!buffer.getOffset())
        return buffer.emitOpError() << "has no offset: run --fsdp-plan-memory";
      if (!dtypeOf(buffer.getType().getElementType()))
        return buffer.emitOpError() << "has an element type plans cannot hold";
      if (buffer.getParam() && !unitIndex.count(*buffer.getParam()))
        return buffer.emitOpError()
               << "holds a whole parameter: the step program is not sharded "
                  "(run --fsdp-shard, also for a single rank)";
      offsetOf[buffer.getBuffer()] = *buffer.getOffset();
    } else if (auto view = llvm::dyn_cast<fsdprt::ViewOp>(op)) {
      MemRefType type = view.getResult().getType();
      offsetOf[view.getResult()] =
          offsetOf.lookup(view.getBase()) +
          int64_t(view.getOffset()) *
              llvm::divideCeil(type.getElementTypeBitWidth(), 8);
    } else if (auto kernel = llvm::dyn_cast<fsdprt::KernelOp>(op)) {
      kernels.push_back(kernel);
      continue;
    } else if (llvm::isa<fsdprt::EvalEndOp>(op)) {
      evalKernels = kernels.size();
      continue;
    } else {
      continue;
    }
    bufferIds[op.getResult(0)] = buffers.size();
    buffers.push_back(&op);
  }
  return success();
}

void PlanBuilder::writeSummary() {
  putWorldSize(module, w);
  w.put<uint64_t>(arena.getInt());
  w.put<uint64_t>(llvm::cast<IntegerAttr>(peak.get("bytes")).getInt());
  w.put<uint64_t>(llvm::cast<IntegerAttr>(peak.get("kernel")).getInt());
  for (StringRef row : {"params", "grads", "optimizer", "activations",
                        "scratch", "gathered", "inputs"})
    w.put<uint64_t>(llvm::cast<IntegerAttr>(peak.get(row)).getInt());
  for (StringRef backend : kOutsideArenaBackends)
    w.put<uint64_t>(llvm::cast<IntegerAttr>(outside.get(backend)).getInt());
  w.putF64(modelFlops.getValueAsDouble());
  // The budget it was compiled for (0: none), for fsdp-run's trace.
  auto budget = program->getAttrOfType<IntegerAttr>(
      fsdprt::FSDPRuntimeDialect::kMemoryBudgetAttrName);
  w.put<uint64_t>(budget ? uint64_t(budget.getInt()) : 0);
  // The model's Hugging Face config (fsdp-gen's; empty: none), which
  // fsdp-run --export DIR writes as config.json.
  auto config =
      module->getAttrOfType<StringAttr>(mlir::fsdp::kHFConfigAttrName);
  StringRef text = config ? config.getValue() : StringRef();
  w.put<uint32_t>(uint32_t(text.size()));
  w.data.append(text.data(), text.size());
}

void PlanBuilder::writeBuffers() {
  w.put<uint32_t>(buffers.size());
  for (Operation *op : buffers) {
    auto type = llvm::cast<MemRefType>(op->getResult(0).getType());
    fsdprt::BufferKind kind = fsdprt::BufferKind::Activation;
    int32_t owner = -1, input = -1, base = -1;
    if (auto buffer = llvm::dyn_cast<fsdprt::BufferOp>(op)) {
      kind = buffer.getKind();
      if (buffer.getParam()) {
        owner = unitIndex.lookup(*buffer.getParam());
        if (kind == fsdprt::BufferKind::Param)
          shardBuffer[buffer.getParamAttr()] = bufferIds[buffer.getBuffer()];
      }
      if (buffer.getInput())
        input = int32_t(*buffer.getInput());
    } else {
      Value root = llvm::cast<fsdprt::ViewOp>(op).getBase();
      while (auto view = root.getDefiningOp<fsdprt::ViewOp>())
        root = view.getBase();
      auto rootBuffer = root.getDefiningOp<fsdprt::BufferOp>();
      kind = rootBuffer.getKind();
      base = int32_t(bufferIds.lookup(root));
      // A view of a unit's own buffer (its parameters read in place from
      // the shard, over a shard group of one) belongs to the unit too.
      if (rootBuffer.getParam())
        owner = unitIndex.lookup(*rootBuffer.getParam());
    }
    w.put<uint32_t>(uint32_t(fsdprt::toPlanBufferKind(kind)));
    w.put<uint32_t>(uint32_t(*dtypeOf(type.getElementType())));
    w.put<uint64_t>(offsetOf.lookup(op->getResult(0)));
    w.put<uint64_t>(type.getNumElements() *
                    llvm::divideCeil(type.getElementTypeBitWidth(), 8));
    w.putShape(type.getShape());
    w.put<int32_t>(owner);
    w.put<int32_t>(input);
    w.put<int32_t>(base);
  }
}

LogicalResult PlanBuilder::writeUnits() {
  w.put<uint32_t>(units.size());
  SymbolTable symbols(module); // one table, not a module scan per lookup
  for (auto [i, unit] : llvm::enumerate(units)) {
    int64_t size = 0;
    for (Attribute ref : unit.getParams()) {
      auto param =
          symbols.lookup<ParamOp>(llvm::cast<FlatSymbolRefAttr>(ref).getAttr());
      placeOfParam[ref] = {uint32_t(i), size};
      size += param.getNumElements();
    }
    auto it = shardBuffer.find(FlatSymbolRefAttr::get(unit.getSymNameAttr()));
    if (it == shardBuffer.end())
      return unit.emitOpError() << "has no shard buffer in the step program";
    w.put<uint32_t>(w.string(unit.getSymName()));
    w.put<uint64_t>(size);
    w.put<uint32_t>(it->second);
    w.put<uint32_t>(unit.getExpertParallel() ? plan::kUnitExpertParallel : 0);
  }
  return success();
}

LogicalResult PlanBuilder::writeParams() {
  SmallVector<ParamOp> params(module.getOps<ParamOp>());
  w.put<uint32_t>(params.size());
  for (ParamOp param : params) {
    auto place =
        placeOfParam.find(FlatSymbolRefAttr::get(param.getSymNameAttr()));
    if (place == placeOfParam.end())
      return param.emitOpError() << "is in no unit; plans hold units";
    std::optional<plan::DType> dtype =
        dtypeOf(param.getTensorType().getElementType());
    if (!dtype)
      return param.emitOpError() << "has an element type plans cannot hold";
    w.put<uint32_t>(w.string(param.getSymName()));
    w.put<uint32_t>(uint32_t(*dtype));
    w.putShape(param.getTensorType().getShape());
    w.put<uint32_t>(uint32_t(param.getInit().getKind()));
    w.putF64(param.getInit().getStd().convertToDouble());
    // Flags: bit 0 no weight decay, bit 1 a selection bias with its rate.
    FloatAttr selection = param.getSelectionBiasAttr();
    w.put<uint32_t>((param.getNoWeightDecay() ? 1 : 0) | (selection ? 2 : 0));
    w.putF64(selection ? selection.getValueAsDouble() : 0.0);
    w.put<uint32_t>(place->second.first);
    w.put<uint64_t>(place->second.second);
  }
  return success();
}

void PlanBuilder::writeProgram() {
  Block &body = program.getBody().front();
  Operation *ret = body.getTerminator();
  w.put<uint32_t>(bufferIds.lookup(ret->getOperand(0))); // the loss
  // The global sum of squares of the gradients, where the step clips: the
  // clipping coefficient's input (the program returns it, and anything
  // else the runtime reads after the step, to keep it alive).
  uint32_t gradSq = plan::kNone;
  for (fsdprt::KernelOp kernel : kernels)
    if (kernel.getName() ==
        StringRef(plan::kernelName(plan::Opcode::ClipCoefficient)))
      gradSq = bufferIds.lookup(kernel.getIns().front());
  w.put<uint32_t>(gradSq);
  w.put<uint32_t>(evalKernels);
  w.put<uint32_t>(kernels.size());
  for (fsdprt::KernelOp kernel : kernels) {
    const plan::KernelInfo *info = plan::findKernel(kernel.getName().str());
    w.put<uint32_t>(uint32_t(info->opcode));
    w.put<uint32_t>(kernel.getUnit() ? w.string(*kernel.getUnit())
                                     : plan::kNone);
    for (ValueRange group :
         {ValueRange(kernel.getIns()), ValueRange(kernel.getOuts())}) {
      w.put<uint32_t>(group.size());
      for (Value v : group)
        w.put<uint32_t>(bufferIds.lookup(v));
    }
    size_t count = plan::numParams(*info);
    w.put<uint32_t>(count);
    for (size_t i = 0; i < count; ++i) {
      Attribute value =
          kernel.getParams()->get(StringRef(info->params[i].name));
      if (auto f = llvm::dyn_cast<FloatAttr>(value))
        w.putF64(f.getValueAsDouble());
      else
        w.putF64(double(llvm::cast<IntegerAttr>(value).getInt()));
    }
  }
}

void PlanBuilder::writeFile(llvm::raw_ostream &os) {
  // Strings last: everything above may have added some.
  PayloadWriter tail;
  tail.put<uint32_t>(w.strings.size());
  for (const std::string &s : w.strings) {
    tail.put<uint32_t>(s.size());
    tail.data += s;
  }
  std::string payload = w.data + tail.data;

  PayloadWriter header;
  header.data.append(plan::kMagic, sizeof(plan::kMagic));
  header.put<uint32_t>(plan::kPlanVersion);
  header.put<uint32_t>(0); // flags
  header.put<uint64_t>(payload.size());
  header.put<uint32_t>(0); // the CRC-32, filled in below
  header.put<uint32_t>(0);
  header.put<uint64_t>(0);
  header.put<uint64_t>(0);
  assert(header.data.size() == plan::kHeaderSize);
  uint32_t crc =
      plan::planChecksum(header.data.data(), payload.data(), payload.size());
  llvm::support::endian::write<uint32_t, llvm::endianness::little>(
      header.data.data() + plan::kCrcOffset, crc);
  os << header.data << payload;
}

LogicalResult mlir::fsdp::writePlan(ModuleOp module, llvm::raw_ostream &os) {
  PlanBuilder builder(module);
  if (failed(builder.findProgram()) || failed(builder.collectBuffers()))
    return failure();
  builder.writeSummary();
  builder.writeBuffers();
  if (failed(builder.writeUnits()) || failed(builder.writeParams()))
    return failure();
  builder.writeProgram();
  builder.writeFile(os);
  return success();
}

void mlir::fsdp::registerToPlanTranslation() {
  TranslateFromMLIRRegistration registration(
      "fsdp-to-plan", "Write the step program as an fsdp-run plan file",
      [](Operation *op, llvm::raw_ostream &os) {
        auto module = llvm::dyn_cast<ModuleOp>(op);
        if (!module)
          return LogicalResult(emitError(op->getLoc()) << "expected a module");
        return writePlan(module, os);
      },
      [](DialectRegistry &registry) {
        registry.insert<FSDPDialect, fsdprt::FSDPRuntimeDialect,
                        func::FuncDialect, arith::ArithDialect>();
      });
}
