//===- LowerToRuntime.cpp - @train_step to buffers and kernel calls -------===//
//
// One buffer per tensor value, one kernel call per op, in program order.
// The graph level has already decided everything that matters (which ops,
// which order, which values the backward keeps); this pass only makes
// storage explicit so that --fsdp-plan-memory can lay it out.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Conversion/Passes.h"
#include "fsdp/Dialect/FSDP/Analysis/RuntimeOverhead.h"
#include "fsdp/Dialect/FSDP/Analysis/UnitRegions.h"
#include "fsdp/runtime/PlanFormat.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPLOWERTORUNTIMEPASS
#include "fsdp/Conversion/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
namespace plan = ::fsdp::plan;
using namespace mlir::fsdp;
using fsdprt::BufferKind;
using plan::Opcode;

namespace {
MemRefType toMemRef(Type type) {
  auto tensor = llvm::cast<RankedTensorType>(type);
  return MemRefType::get(tensor.getShape(), tensor.getElementType());
}

/// Values that are parameter gradients: AdamW's operands, and the partial
/// sums (fsdp.add) that feed them. They get the `grad` kind so that the
/// memory report counts them as gradients.
llvm::DenseSet<Value> findParamGradients(Block &block) {
  llvm::DenseSet<Value> grads;
  SmallVector<Value> worklist;
  for (auto adamw : block.getOps<AdamWOp>())
    worklist.push_back(adamw.getGrad());
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    if (!grads.insert(v).second)
      continue;
    if (auto add = v.getDefiningOp<AddOp>())
      worklist.append({add.getLhs(), add.getRhs()});
  }
  return grads;
}

class ProgramBuilder {
public:
  ProgramBuilder(OpBuilder &builder, const UnitTagMap &tags,
                 const llvm::DenseSet<Value> &grads)
      : builder(builder), tags(tags), grads(grads) {}

  Value buffer(Location loc, BufferKind kind, MemRefType type,
               FlatSymbolRefAttr param = {}, IntegerAttr input = {}) {
    return fsdprt::BufferOp::create(
        builder, loc, type,
        fsdprt::BufferKindAttr::get(builder.getContext(), kind), param, input,
        IntegerAttr());
  }

  void bindParam(FlatSymbolRefAttr param, Value buffer) {
    paramBuffers[param] = buffer;
  }

  /// The buffer that holds `v` (created for results as they are defined).
  Value of(Value v) const { return buffers.lookup(v); }
  void bind(Value v, Value buffer) { buffers[v] = buffer; }

  Value resultBuffer(Value result) {
    // A gradient that only feeds a pack is written straight into its slot
    // of the unit's full-size gradient.
    if (auto it = packSlots.find(result); it != packSlots.end()) {
      Value b = fsdprt::ViewOp::create(
          builder, result.getLoc(), toMemRef(result.getType()),
          packBuffer(it->second.first),
          builder.getI64IntegerAttr(it->second.second));
      bind(result, b);
      return b;
    }
    Value b =
        buffer(result.getLoc(),
               isGradient(result) ? BufferKind::Grad : BufferKind::Activation,
               toMemRef(result.getType()));
    bind(result, b);
    return b;
  }

  /// Whether `v` is a gradient of parameters: an unsharded AdamW's, a
  /// unit's full-size one cast to the reduce type, or a reduced shard cast
  /// to the master type (mixed precision).
  bool isGradient(Value v) const {
    if (grads.contains(v) || isFullGradient(v))
      return true;
    auto cast = v.getDefiningOp<CastOp>();
    return cast && getScatteredShard(cast.getSource().getDefiningOp());
  }

  /// The buffer of a pack's result (a unit's full-size gradient).
  Value packBuffer(PackOp pack) {
    Value &b = buffers[pack.getResult()];
    if (!b)
      b = buffer(pack.getLoc(), BufferKind::Grad, toMemRef(pack.getType()));
    return b;
  }

  /// Operands of packs that can be produced in place: used by the pack
  /// only, and produced by an op of the step.
  void findPackSlots(Block &block) {
    for (auto pack : block.getOps<PackOp>()) {
      int64_t offset = 0;
      for (Value operand : pack.getValues()) {
        if (operand.hasOneUse() && operand.getDefiningOp() &&
            !packSlots.count(operand))
          packSlots[operand] = {pack, offset};
        offset +=
            llvm::cast<RankedTensorType>(operand.getType()).getNumElements();
      }
    }
  }

  /// The local shard buffers of a sharded unit of `flatSize` elements:
  /// parameter, AdamW moments, and the shard's copy where it keeps one.
  void bindUnit(UnitOp unit, int64_t flatSize, int64_t shardSize,
                Type elementType) {
    auto ref = FlatSymbolRefAttr::get(unit.getSymNameAttr());
    auto type = MemRefType::get({shardSize}, elementType);
    flatSizes[ref] = flatSize;
    Location loc = unit.getLoc();
    auto &shards = unitBuffers[ref];
    shards = {buffer(loc, BufferKind::Param, type, ref),
              buffer(loc, BufferKind::AdamM, type, ref),
              buffer(loc, BufferKind::AdamV, type, ref), Value()};
    if (std::optional<Type> copyType = unit.getShardCopy())
      shards[3] = buffer(loc, BufferKind::ShardCopy,
                         MemRefType::get({shardSize}, *copyType), ref);
  }
  /// What a gather of `unit` into `gathered` reads: the unit's shard copy
  /// where it is in the gathered type, else its shard.
  Value gatherSource(Attribute unit, Value gathered) {
    auto &shards = unitBuffers[unit];
    Type element = llvm::cast<ShapedType>(gathered.getType()).getElementType();
    if (shards[3] &&
        llvm::cast<MemRefType>(shards[3].getType()).getElementType() == element)
      return shards[3];
    return shards[0];
  }

  void kernel(Operation *op, Opcode opcode, ValueRange ins, ValueRange outs,
              DictionaryAttr params, StringAttr unit = {}) {
    if (!unit)
      unit = tags.lookup(op).unit;
    if (auto symbol = op->getAttrOfType<FlatSymbolRefAttr>("unit"))
      unit = symbol.getAttr(); // collectives and the shard's AdamW
    fsdprt::KernelOp::create(builder, op->getLoc(),
                             StringRef(plan::kernelName(opcode)), ins, outs,
                             params, unit);
  }

  /// `values` as kernel `opcode`'s parameters, under the table's names.
  DictionaryAttr integerParams(Opcode opcode, ArrayRef<double> values) {
    const plan::KernelInfo &info = plan::kernelInfo(opcode);
    assert(values.size() == plan::numParams(info));
    SmallVector<NamedAttribute> attrs;
    for (auto [i, value] : llvm::enumerate(values))
      attrs.push_back(
          builder.getNamedAttr(StringRef(info.params[i].name),
                               builder.getI64IntegerAttr(int64_t(value))));
    return builder.getDictionaryAttr(attrs);
  }

  /// A collective kernel: synchronous (stream 0, token 0) for the plain
  /// ops, started on the op's stream under a fresh token for the `_start`
  /// forms, whose wait looks the token up; group 1 for a `grouped` start.
  LogicalResult collective(Operation *op, Opcode opcode, Value source,
                           Value result) {
    FailureOr<DictionaryAttr> params =
        collectiveParams(op, opcode, source, result);
    if (failed(params))
      return failure();
    kernel(op, opcode, source, result, *params);
    return success();
  }
  /// The parameters of collective `op` (the stream it starts on, its
  /// token, its bucket flag, its axis); a start's token is recorded with
  /// the buffers its wait must keep alive, `source` and `result`.
  FailureOr<DictionaryAttr> collectiveParams(Operation *op, Opcode opcode,
                                             Value source, Value result) {
    plan::CollectiveParams params;
    if (auto attr = op->getAttrOfType<IntegerAttr>("stream")) {
      if (attr.getInt() < 1 || attr.getInt() >= int64_t(plan::kNumStreams))
        return op->emitOpError()
               << "starts on stream " << attr.getInt()
               << ", but plans have streams 1 to " << plan::kNumStreams - 1;
      // The expert stream is the row all-to-alls' alone, and theirs.
      if ((attr.getInt() == plan::kExpertStream) !=
          (opcode == Opcode::AllToAll))
        return op->emitOpError()
               << "starts on stream " << attr.getInt() << ", but stream "
               << plan::kExpertStream
               << " is the row all-to-alls' own, and theirs alone";
      params.stream = double(attr.getInt());
      params.token = double(++lastToken);
      params.group = op->hasAttr("grouped");
      FlatSymbolRefAttr unit = getCollectiveUnit(op); // none: all-to-all
      started[op->getResult(0)] = {lastToken, source, result,
                                   unit ? unit.getAttr() : StringAttr()};
    }
    params.axis = double(axisOf(op));
    return integerParams(opcode, plan::collectiveParamValues(params));
  }

  /// The group a collective runs over, as the plan numbers it.
  static plan::CommAxis axisOf(Operation *op) {
    StringRef axis = getCollectiveAxis(op);
    for (uint32_t i = 0; i < plan::kNumCommAxes; ++i)
      if (axis == StringRef(plan::kCommAxisNames[i]))
        return plan::CommAxis(i);
    return plan::CommAxis::Shard; // the verifiers admit no other name
  }

  /// The numeric parameters the kernel table names, copied from `op`; one
  /// that the IR leaves out takes the table's default (the op's
  /// DefaultValuedAttr, or another parameter's value: kv_heads is heads).
  /// Fails on a parameter with neither.
  FailureOr<DictionaryAttr> paramsOf(Operation *op,
                                     const plan::KernelInfo &info) {
    SmallVector<NamedAttribute> attrs;
    for (size_t i = 0, e = plan::numParams(info); i < e; ++i) {
      const plan::ParamInfo &param = info.params[i];
      StringRef key(param.name);
      Attribute value = op->getAttr(key);
      if (!value && !param.sameAs.empty())
        value = op->getAttr(StringRef(param.sameAs));
      // An enum attribute (rope's scaling) is stored as its integer.
      if (std::optional<int64_t> code = enumParamValue(value))
        value = builder.getI64IntegerAttr(*code);
      if (!value && param.hasDefault)
        value =
            param.type == plan::ParamType::F32
                ? Attribute(builder.getF32FloatAttr(float(param.defaultValue)))
            : param.type == plan::ParamType::F64
                ? Attribute(builder.getF64FloatAttr(param.defaultValue))
                : Attribute(
                      builder.getI64IntegerAttr(int64_t(param.defaultValue)));
      if (!value)
        return op->emitOpError()
               << "has no '" << key << "', which kernel '"
               << StringRef(info.name) << "' takes and has no default for";
      attrs.push_back(builder.getNamedAttr(key, value));
    }
    return attrs.empty() ? DictionaryAttr() : builder.getDictionaryAttr(attrs);
  }

  LogicalResult lower(Operation *op);

private:
  /// A float splat constant: a fill kernel into the result's buffer.
  LogicalResult lowerConstant(arith::ConstantOp constant);
  /// AdamW of a whole parameter, with its moments created at first use.
  LogicalResult lowerAdamW(AdamWOp adamw);
  /// The wait of a started collective: reads the collective's buffers.
  LogicalResult lowerWait(WaitOp wait);
  /// A pack: copies into the full-size gradient the operands that were not
  /// produced in place.
  LogicalResult lowerPack(PackOp pack);
  /// A unit's gradient sum of squares: its kernel takes the unit's flat
  /// size (each rank counts its own elements of the shard).
  LogicalResult lowerGradSqSum(GradSqSumOp op);
  /// The shard's AdamW, with the clipping scale when it has one.
  LogicalResult lowerAdamWShard(AdamWShardOp op);
  /// Expert parallelism's exchanges: the counts', the rows' (in place or
  /// started).
  LogicalResult lowerExchange(Operation *op);
  /// Any other op: its KernelOpInterface names the kernel and its scratch.
  LogicalResult lowerByInterface(Operation *op);

  OpBuilder &builder;
  const UnitTagMap &tags;
  const llvm::DenseSet<Value> &grads;
  llvm::DenseMap<Value, Value> buffers;
  llvm::DenseMap<Attribute, Value> paramBuffers;
  llvm::DenseMap<Attribute, std::pair<Value, Value>> moments;
  llvm::DenseMap<Value, std::pair<PackOp, int64_t>> packSlots;
  /// A unit's shard, its moments and its shard copy (null: none).
  llvm::DenseMap<Attribute, std::array<Value, 4>> unitBuffers;
  llvm::DenseMap<Attribute, int64_t> flatSizes; ///< unit -> elements
  /// Started collectives by token value: their plan token and buffers.
  struct Started {
    int64_t token = 0;
    Value source, result;
    StringAttr unit;
  };
  llvm::DenseMap<Value, Started> started;
  llvm::DenseSet<Value> elided; ///< tokens of started local copies
  int64_t lastToken = 0;
};

LogicalResult ProgramBuilder::lower(Operation *op) {
  Location loc = op->getLoc();
  if (auto load = llvm::dyn_cast<LoadOp>(op)) {
    // Reading a parameter is no copy: the kernel reads its buffer.
    bind(load.getResult(), paramBuffers.lookup(load.getParamAttr()));
    return success();
  }
  if (auto constant = llvm::dyn_cast<arith::ConstantOp>(op))
    return lowerConstant(constant);
  if (auto adamw = llvm::dyn_cast<AdamWOp>(op))
    return lowerAdamW(adamw);
  // A started collective keeps its stream and gets a token; its wait reads
  // the collective's input and output, so the memory planner keeps both
  // alive (and unshared) until the runtime has finished it.
  // Over a shard group of one rank a gather and a reduce-scatter are
  // copies: the parameters are read from the shard in place, and the
  // full-size gradient is the gradient shard (its wait is elided too).
  if (isLocalCopy(op)) {
    Value gathered = getGatheredTensor(op);
    Value in = gathered ? gatherSource(getCollectiveUnit(op), gathered)
                        : of(op->getOperand(0));
    bind(op->getResults().back(), in);
    if (op->getNumResults() == 2)
      elided.insert(op->getResult(0));
    return success();
  }
  if (Value gathered = getGatheredTensor(op)) {
    Value out = buffer(loc, BufferKind::Gathered, toMemRef(gathered.getType()));
    bind(gathered, out);
    return collective(op, Opcode::AllGather,
                      gatherSource(getCollectiveUnit(op), gathered), out);
  }
  if (auto wait = llvm::dyn_cast<WaitOp>(op))
    return lowerWait(wait);
  if (auto view = llvm::dyn_cast<ViewOp>(op)) {
    bind(view.getResult(),
         fsdprt::ViewOp::create(builder, loc, toMemRef(view.getType()),
                                of(view.getSource()), view.getOffsetAttr()));
    return success();
  }
  if (auto pack = llvm::dyn_cast<PackOp>(op))
    return lowerPack(pack);
  if (Value shard = getScatteredShard(op)) {
    Value out = buffer(loc, BufferKind::Grad, toMemRef(shard.getType()));
    bind(shard, out);
    return collective(op, Opcode::ReduceScatter, of(op->getOperand(0)), out);
  }
  if (Value mean = getReplicaMean(op)) {
    // In place: the averaged shard is the reduce-scatter's buffer.
    Value shard = of(op->getOperand(0));
    bind(mean, shard);
    return collective(op, Opcode::AllReduceMean, shard, shard);
  }
  if (llvm::isa<FreeOp>(op))
    return success(); // lifetimes end at the last use; the planner sees it
  if (auto adamw = llvm::dyn_cast<AdamWShardOp>(op))
    return lowerAdamWShard(adamw);
  if (auto reduce = llvm::dyn_cast<AllReduceSumOp>(op)) {
    // Synchronous: it runs where it stands, on the compute stream.
    std::array<double, 1> axis = {double(axisOf(op))};
    kernel(op, Opcode::AllReduceSum, of(reduce.getValue()),
           resultBuffer(reduce.getResult()),
           integerParams(Opcode::AllReduceSum, axis));
    return success();
  }
  if (auto sum = llvm::dyn_cast<GradSqSumOp>(op))
    return lowerGradSqSum(sum);
  if (llvm::isa<AllToAllCountsOp, AllToAllOp, AllToAllStartOp>(op))
    return lowerExchange(op);
  return lowerByInterface(op);
}

LogicalResult ProgramBuilder::lowerExchange(Operation *op) {
  // The counts' exchange: synchronous, on the compute stream.
  if (auto counts = llvm::dyn_cast<AllToAllCountsOp>(op)) {
    std::array<double, 1> axis = {double(axisOf(op))};
    kernel(op, Opcode::AllToAllCounts, of(counts.getCounts()),
           resultBuffer(counts.getRecv()),
           integerParams(Opcode::AllToAllCounts, axis));
    return success();
  }
  // The rows' exchange: in place, or started on its stream (its wait
  // keeps the rows sent and received alive; the counts are read at the
  // start).
  Value input = of(op->getOperand(0));
  Value result = resultBuffer(op->getResults().back());
  FailureOr<DictionaryAttr> params =
      collectiveParams(op, Opcode::AllToAll, input, result);
  if (failed(params))
    return failure();
  kernel(op, Opcode::AllToAll,
         ValueRange{input, of(op->getOperand(1)), of(op->getOperand(2))},
         result, *params);
  return success();
}

LogicalResult ProgramBuilder::lowerAdamWShard(AdamWShardOp adamw) {
  Operation *op = adamw;
  auto &shards = unitBuffers[adamw.getUnitAttr()];
  SmallVector<Value> ins = {of(adamw.getGrad())};
  if (Value scale = adamw.getScale())
    ins.push_back(of(scale));
  FailureOr<DictionaryAttr> params =
      paramsOf(op, plan::kernelInfo(Opcode::AdamWShard));
  if (failed(params))
    return failure();
  SmallVector<Value, 4> outs = {shards[0], shards[1], shards[2]};
  if (shards[3])
    outs.push_back(shards[3]); // rounded into as the shard is updated
  kernel(op, Opcode::AdamWShard, ins, outs, *params);
  return success();
}

LogicalResult ProgramBuilder::lowerGradSqSum(GradSqSumOp sum) {
  Operation *op = sum;
  auto flat = flatSizes.find(sum.getUnitAttr());
  if (flat == flatSizes.end())
    return op->emitOpError() << "sums the gradient of " << sum.getUnitAttr()
                             << ", which is no sharded unit of the step";
  SmallVector<Value> ins = {of(sum.getGrad())};
  if (Value acc = sum.getAcc())
    ins.push_back(of(acc));
  SmallVector<RankedTensorType> scratch;
  sum.getKernelScratch(scratch);
  SmallVector<Value> outs = {resultBuffer(sum.getResult())};
  for (RankedTensorType type : scratch)
    outs.push_back(buffer(op->getLoc(), BufferKind::Scratch, toMemRef(type)));
  std::array<double, 1> params = {double(flat->second)};
  kernel(op, Opcode::GradSqSum, ins, outs,
         integerParams(Opcode::GradSqSum, params));
  return success();
}

LogicalResult ProgramBuilder::lowerConstant(arith::ConstantOp constant) {
  Operation *op = constant;
  auto splat = llvm::dyn_cast<SplatElementsAttr>(constant.getValue());
  if (!splat || !llvm::isa<FloatType>(splat.getElementType()))
    return op->emitOpError()
           << "only float splat constants lower to the runtime";
  Value out = resultBuffer(constant.getResult());
  kernel(op, Opcode::Fill, {}, out,
         builder.getDictionaryAttr(builder.getNamedAttr(
             "value", builder.getF32FloatAttr(
                          splat.getSplatValue<APFloat>().convertToFloat()))));
  return success();
}

LogicalResult ProgramBuilder::lowerAdamW(AdamWOp adamw) {
  Operation *op = adamw;
  Location loc = op->getLoc();
  // A selection bias's update runs per shard segment (adamw_shard), where
  // the plan's parameter table says which elements are one.
  auto declared =
      SymbolTable::lookupNearestSymbolFrom<ParamOp>(op, adamw.getParamAttr());
  if (declared && declared.getSelectionBiasAttr())
    return adamw.emitOpError()
           << "updates selection bias " << adamw.getParamAttr()
           << ", whose update needs the sharded step (--fsdp-shard)";
  Value param = paramBuffers.lookup(adamw.getParamAttr());
  MemRefType type = llvm::cast<MemRefType>(param.getType());
  auto &[m, v] = moments[adamw.getParamAttr()];
  if (!m) {
    m = buffer(loc, BufferKind::AdamM, type, adamw.getParamAttr());
    v = buffer(loc, BufferKind::AdamV, type, adamw.getParamAttr());
  }
  FailureOr<DictionaryAttr> params =
      paramsOf(op, plan::kernelInfo(Opcode::AdamW));
  if (failed(params))
    return failure();
  kernel(op, Opcode::AdamW, of(adamw.getGrad()), {param, m, v}, *params);
  return success();
}

LogicalResult ProgramBuilder::lowerWait(WaitOp wait) {
  Operation *op = wait;
  if (elided.contains(wait.getToken()))
    return success(); // a local copy's: nothing ran
  Started start = started.lookup(wait.getToken());
  if (!start.token)
    return op->emitOpError() << "waits for a token no collective started";
  std::array<double, plan::numParams(plan::kernelInfo(Opcode::Wait))> token{};
  token[plan::kWaitToken] = double(start.token);
  kernel(op, Opcode::Wait, {start.source, start.result}, {},
         integerParams(Opcode::Wait, token), start.unit);
  return success();
}

LogicalResult ProgramBuilder::lowerPack(PackOp pack) {
  Operation *op = pack;
  Location loc = op->getLoc();
  Value flat = packBuffer(pack);
  int64_t offset = 0;
  for (Value operand : pack.getValues()) {
    Value source = of(operand);
    auto view = source.getDefiningOp<fsdprt::ViewOp>();
    if (!view || view.getBase() != flat) {
      Value slot = fsdprt::ViewOp::create(
          builder, loc, llvm::cast<MemRefType>(source.getType()), flat,
          builder.getI64IntegerAttr(offset));
      kernel(op, Opcode::Copy, source, slot, {});
    }
    offset += llvm::cast<RankedTensorType>(operand.getType()).getNumElements();
  }
  return success();
}

LogicalResult ProgramBuilder::lowerByInterface(Operation *op) {
  Location loc = op->getLoc();
  auto kernelOp = llvm::dyn_cast<KernelOpInterface>(op);
  if (!kernelOp)
    return op->emitOpError() << "has no runtime kernel";
  // The verifier checked the opcode and the operands against the table.
  const plan::KernelInfo *info = plan::findKernel(kernelOp.getKernelOpcode());
  SmallVector<Value> ins, outs;
  for (Value operand : op->getOperands())
    ins.push_back(of(operand));
  for (Value result : op->getResults())
    outs.push_back(resultBuffer(result));
  SmallVector<RankedTensorType> scratch;
  kernelOp.getKernelScratch(scratch);
  for (RankedTensorType type : scratch)
    outs.push_back(buffer(loc, BufferKind::Scratch, toMemRef(type)));
  FailureOr<DictionaryAttr> params = paramsOf(op, *info);
  if (failed(params))
    return failure();
  kernel(op, info->opcode, ins, outs, *params);
  return success();
}

struct FsdpLowerToRuntimePass
    : public mlir::fsdp::impl::FsdpLowerToRuntimePassBase<
          FsdpLowerToRuntimePass> {
  void runOnOperation() override;
};
} // namespace

/// What the runtime program returns: the loss, where the step clips its
/// gradients the global sum of their squares (the input of its
/// fsdp.clip_coefficient), which the runtime reports as the gradient norm,
/// and the pairs each capacity dropped, which it sums and reports.
/// Returned, so that the memory planner keeps them until the step's end.
static SmallVector<Value> programResults(Block &block) {
  SmallVector<Value> results = {block.getTerminator()->getOperand(0)};
  for (auto clip : block.getOps<ClipCoefficientOp>()) {
    results.push_back(clip.getSumSq());
    break;
  }
  for (auto trim : block.getOps<MoeCapacityTrimOp>())
    results.push_back(trim.getDropped());
  return results;
}

/// The runtime program's function, returning the buffers of `results`,
/// with the builder at the start of its body.
static func::FuncOp createProgram(OpBuilder &builder, func::FuncOp step,
                                  ValueRange results) {
  SmallVector<Type> types;
  for (Value v : results)
    types.push_back(toMemRef(v.getType()));
  auto program =
      func::FuncOp::create(builder, step.getLoc(), "__fsdprt_train_step",
                           builder.getFunctionType({}, types));
  program->setAttr(fsdprt::FSDPRuntimeDialect::kProgramAttrName,
                   builder.getUnitAttr());
  Block *body = program.addEntryBlock();
  builder.setInsertionPointToStart(body);
  return program;
}

/// What the runtime will hold outside the arena, per backend, from the
/// graph-level step: the plan carries it so that fsdp-run can print the
/// prediction next to what it measures.
static void recordOutsideArena(ModuleOp module, func::FuncOp step,
                               func::FuncOp program) {
  Builder builder(module.getContext());
  RuntimeOverhead cpu = estimateRuntimeOverhead(module, step, "cpu");
  RuntimeOverhead cuda = estimateRuntimeOverhead(module, step, "cuda");
  auto entry = [&](StringRef key, int64_t value) {
    return builder.getNamedAttr(key, builder.getI64IntegerAttr(value));
  };
  NamedAttribute bytes[] = {
      entry("cpu", cpu.total(OverheadKind::Heap)),
      entry("cpu_mapped", cpu.total(OverheadKind::Mapped)),
      entry("cpu_blas_thread", cpu.total(OverheadKind::MappedPerThread)),
      entry("cuda", cuda.total())};
  program->setAttr(fsdprt::FSDPRuntimeDialect::kOutsideArenaAttrName,
                   builder.getDictionaryAttr(bytes));
}

/// The model FLOPs of one rank's step, as MFU counts them (PaLM's
/// convention): the FLOPs of the forward's kernels times three (the
/// backward's GEMMs are twice the forward's), where only matmuls and
/// attention have FLOPs; what a backward region recomputes is not counted.
/// Counted before the regions are inlined: their phases tell what is
/// recomputed.
static double countModelFlops(func::FuncOp step) {
  double forward = 0.0;
  step.walk([&](Operation *op) {
    if (!llvm::isa<DifferentiableOpInterface>(op))
      return;
    auto region = op->getParentOfType<ComputeOp>();
    if (region && region.getPhase() == Phase::Backward)
      return; // recomputed: hardware FLOPs, not the model's
    if (auto kernel = llvm::dyn_cast<KernelOpInterface>(op))
      forward += kernel.getFlops();
  });
  return 3.0 * forward;
}

/// One input buffer per tensor argument of the step, tagged with its
/// argument number so that the runtime knows what to load into it.
static void bindInputs(Block &block, ProgramBuilder &lowering,
                       OpBuilder &builder) {
  for (BlockArgument arg : block.getArguments()) {
    if (!llvm::isa<RankedTensorType>(arg.getType()))
      continue; // the step number: the runtime passes it to AdamW
    lowering.bind(
        arg, lowering.buffer(arg.getLoc(), BufferKind::Input,
                             toMemRef(arg.getType()), FlatSymbolRefAttr(),
                             builder.getI64IntegerAttr(arg.getArgNumber())));
  }
}

/// A sharded step's shard buffers, one set per unit, sized by the ranks it
/// is sharded over (the shard axis, or an expert-parallel unit's group).
static void bindUnitShards(ModuleOp module, ProgramBuilder &lowering) {
  // The ranks hold shards of units, never whole parameters.
  SymbolTable symbols(module); // one table, not a module scan per lookup
  for (UnitOp unit : module.getOps<UnitOp>()) {
    int64_t size = 0;
    Type element;
    for (Attribute ref : unit.getParams()) {
      auto param =
          symbols.lookup<ParamOp>(llvm::cast<FlatSymbolRefAttr>(ref).getAttr());
      size += param.getNumElements();
      element = param.getTensorType().getElementType();
    }
    lowering.bindUnit(unit, size,
                      getMaxShardSize(size, unit.getShardGroupSize()), element);
  }
}

/// An unsharded step's parameter buffers, one per whole parameter.
static void bindParams(ModuleOp module, ProgramBuilder &lowering) {
  for (ParamOp param : module.getOps<ParamOp>()) {
    auto ref = FlatSymbolRefAttr::get(param.getSymNameAttr());
    lowering.bindParam(ref, lowering.buffer(param.getLoc(), BufferKind::Param,
                                            toMemRef(param.getType()), ref));
  }
}

/// Moves the buffer declarations before the kernels, keeping their order.
static void hoistDeclarations(Block *body) {
  SmallVector<fsdprt::BufferOp> declared(body->getOps<fsdprt::BufferOp>());
  for (fsdprt::BufferOp buffer : llvm::reverse(declared))
    buffer->moveBefore(body, body->begin());
}

/// Marks the evaluation step: fsdprt.eval_end right after the last kernel
/// that writes the loss, so that the kernels above it are the forward and
/// the loss. Nothing is marked when no kernel writes the loss.
static void markEvalStep(Block *body, Value loss, OpBuilder &builder) {
  fsdprt::KernelOp last;
  for (auto kernel : body->getOps<fsdprt::KernelOp>())
    if (llvm::is_contained(kernel.getOuts(), loss))
      last = kernel;
  if (!last)
    return;
  builder.setInsertionPointAfter(last);
  fsdprt::EvalEndOp::create(builder, last.getLoc());
}

/// Erases the graph-level step and forward, and names the program
/// @train_step in their place; fails if another @train_step is left.
static LogicalResult replaceTrainStep(ModuleOp module, func::FuncOp program) {
  for (func::FuncOp func :
       llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
    if (func->hasAttr(FSDPDialect::kTrainStepAttrName) ||
        func->hasAttr(FSDPDialect::kForwardAttrName))
      func.erase();
  if (module.lookupSymbol("train_step"))
    return emitError(module.getLoc())
           << "fsdp-lower-to-runtime: a symbol named @train_step "
              "is left in the module";
  program.setSymName("train_step");
  return success();
}

void FsdpLowerToRuntimePass::runOnOperation() {
  ModuleOp module = getOperation();
  func::FuncOp step = getTrainStep(module);
  if (!step || !step.getBody().hasOneBlock()) {
    emitError(module.getLoc())
        << "fsdp-lower-to-runtime: no single-block function "
           "marked fsdp.train_step (run --fsdp-autodiff first)";
    return signalPassFailure();
  }
  Block &block = step.getBody().front();
  double modelFlops = countModelFlops(step);
  UnitTagMap tags;
  inlineComputeRegions(block, tags);
  llvm::DenseSet<Value> grads = findParamGradients(block);
  auto ret = llvm::cast<func::ReturnOp>(block.getTerminator());
  SmallVector<Value> results = programResults(block);

  OpBuilder builder(step);
  func::FuncOp program = createProgram(builder, step, results);
  recordOutsideArena(module, step, program);
  program->setAttr(fsdprt::FSDPRuntimeDialect::kModelFlopsAttrName,
                   builder.getF64FloatAttr(modelFlops));
  Block *body = &program.getBody().front();
  ProgramBuilder lowering(builder, tags, grads);
  bindInputs(block, lowering, builder);
  bool sharded = isShardedStep(block);
  if (sharded) {
    bindUnitShards(module, lowering);
    lowering.findPackSlots(block);
  } else {
    bindParams(module, lowering);
  }
  for (Operation &op : block.without_terminator())
    if (failed(lowering.lower(&op)))
      return signalPassFailure();
  SmallVector<Value> returned;
  for (Value v : results)
    returned.push_back(lowering.of(v));
  func::ReturnOp::create(builder, ret.getLoc(), returned);

  // Declarations first, then the kernels in program order.
  hoistDeclarations(body);
  markEvalStep(body, returned.front(), builder);
  if (failed(replaceTrainStep(module, program)))
    return signalPassFailure();
}
