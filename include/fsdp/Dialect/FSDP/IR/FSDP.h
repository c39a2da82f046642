//===- FSDP.h - The fsdp dialect --------------------------------*- C++ -*-===//
//
// One include for the dialect, its attributes, types, interfaces and ops.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_FSDP_IR_FSDP_H
#define FSDP_DIALECT_FSDP_IR_FSDP_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::fsdp {
/// The memory-effect resource of parameter state (see FSDP_ParamResource).
struct ParamResource : public SideEffects::Resource::Base<ParamResource> {
  llvm::StringRef getName() final { return "fsdp.param"; }
};
/// The order of collectives and frees (see FSDP_CollectiveResource).
struct CollectiveResource
    : public SideEffects::Resource::Base<CollectiveResource> {
  llvm::StringRef getName() final { return "fsdp.collective"; }
};
} // namespace mlir::fsdp

#include "fsdp/Dialect/FSDP/IR/FSDPOpsDialect.h.inc"

#include "fsdp/Dialect/FSDP/IR/FSDPEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPOpsTypes.h.inc"

namespace mlir::fsdp {
int64_t getSizeInBytes(Type type);
namespace detail {
/// KernelOpInterface's verifier: the op against its kernel's table entry.
LogicalResult verifyKernelOp(Operation *op);
} // namespace detail
} // namespace mlir::fsdp

#include "fsdp/Dialect/FSDP/IR/FSDPInterfaces.h.inc"

namespace mlir::fsdp {
/// Fails, with an error at `op` naming `what` ("operand #0", "result #1"),
/// unless `type` has a byte size that fits int64 (see getSizeInBytes).
LogicalResult verifySizeFits(Operation *op, const llvm::Twine &what, Type type);
LogicalResult verifyTensorSizesFit(Operation *op);

/// The trait behind FSDP_TensorSizesFit: every operand and result of the op
/// has a byte size that fits int64.
template <typename ConcreteType>
class TensorSizesFit : public OpTrait::TraitBase<ConcreteType, TensorSizesFit> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    return verifyTensorSizesFit(op);
  }
};
} // namespace mlir::fsdp

#define GET_OP_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h.inc"

namespace mlir::fsdp {
/// The block a parameter belongs to under the per-block policy: the dotted
/// prefix of its name up to and including the first all-digit component
/// ("h.3.attn.w" -> "h.3"), or an empty string when the name has none.
llvm::StringRef getBlockPrefix(llvm::StringRef paramName);

/// Size in bytes of one element of `type` (bf16 -> 2, f32 -> 4, ...).
int64_t getElementSizeInBytes(Type type);
/// The elements of a static shape, or nullopt when their count overflows
/// int64 (ShapedType::getNumElements wraps around instead).
std::optional<int64_t> getCheckedNumElements(ArrayRef<int64_t> shape);
/// Size in bytes of a statically shaped tensor or memref type (0 for any
/// other type, such as tokens), or nullopt when it overflows int64.
std::optional<int64_t> getCheckedSizeInBytes(Type type);
/// Size in bytes of a ranked tensor type; 0 for any other type (tokens).
/// The verifiers reject every fsdp op, parameter and step input whose type
/// does not fit (TensorSizesFit), so on verified IR this cannot overflow.
int64_t getSizeInBytes(Type type);

/// The seed's shard layout: rank `rank` of `worldSize` owns elements
/// [begin, end) of a flat tensor of `size` elements, begin =
/// floor(rank * size / worldSize).
struct ShardRange {
  int64_t begin, end;
};
ShardRange getShardRange(int64_t size, int64_t rank, int64_t worldSize);
/// The largest shard: ceil(size / worldSize).
int64_t getMaxShardSize(int64_t size, int64_t worldSize);

/// A gather of a unit's flat parameter, synchronous (fsdp.all_gather) or
/// started (fsdp.all_gather_start): the gathered tensor, or null.
Value getGatheredTensor(Operation *op);
/// A reduce-scatter, synchronous or started: the gradient shard, or null.
Value getScatteredShard(Operation *op);

/// A gather or reduce-scatter (in place or started) that exchanges nothing:
/// over a shard group of one rank (world size 1, or a mesh R x 1), in the
/// parameters' element type (or a gather in the type of the unit's shard
/// copy), of a unit that is not expert-parallel (whose
/// reduce-scatter scales by 1 / G). It is a copy the lowering elides: the
/// gathered parameters are the shard itself, the gradient shard is the
/// full-size gradient; the memory profile and the simulator count
/// nothing for it.
bool isLocalCopy(Operation *op);
/// The unit a gather, reduce-scatter or replica all-reduce (either form)
/// works on, or null.
FlatSymbolRefAttr getCollectiveUnit(Operation *op);
/// A replica all-reduce (fsdp.all_reduce_mean, synchronous or started):
/// the averaged shard, or null.
Value getReplicaMean(Operation *op);
/// The mesh axis whose groups a collective runs over: its `axis`
/// attribute, or "shard" where it has none (a mesh without a replicate
/// axis has one group, every rank); empty for an op that is no collective.
StringRef getCollectiveAxis(Operation *op);
/// The function --fsdp-autodiff built (marked fsdp.train_step), or null.
func::FuncOp getTrainStep(ModuleOp module);

/// True when `block` (a @train_step body) has been sharded.
bool isShardedStep(Block &block);

/// The first op of `block` that reads `value` (itself, or the op of the
/// block that holds the user), or the block's terminator when none does:
/// where a started collective's wait goes.
Operation *getFirstReader(Block &block, Value value);

/// Whether `v` is a unit's full-size gradient: a pack, or a pack cast to
/// another type (the reduce type of mixed precision).
bool isFullGradient(Value v);

/// Walks `block` in order, calling visit(op, inflight) with the gathers in
/// flight just after `op` (started and not yet freed; a bucket, a start and
/// the `grouped` starts after it, counts as one while any of its members is
/// unfreed), until visit returns false.
void walkInflightGathers(Block &block,
                         llvm::function_ref<bool(Operation *, int64_t)> visit);

/// The module attribute --fsdp-mesh sets: the device mesh (#fsdp.mesh).
constexpr llvm::StringLiteral kMeshAttrName = "fsdp.mesh";
/// The device mesh of `op`'s module (of `op` itself when it is a module),
/// or null when the module has none, which means a single rank.
MeshAttr getMesh(Operation *op);
/// Ranks each unit is sharded over: the mesh's `shard` axis (1 without a
/// mesh).
int64_t getShardSize(Operation *op);
/// Ranks the step runs on: every axis of the mesh (1 without a mesh).
int64_t getNumRanks(Operation *op);
/// The attribute --fsdp-data-parallel sets on @forward once it has
/// divided the batch by the mesh's ranks (so that a second run does not).
constexpr llvm::StringLiteral kBatchSplitAttrName = "fsdp.batch_split";
/// The integer a kernel parameter held by an enum attribute stands for in
/// the plan (rope's #fsdp.rope_scaling<...>, moe_router's scoring; a flag
/// is 0 or 1); none for any other attribute.
std::optional<int64_t> enumParamValue(Attribute attr);
/// Rebuilds `op` in form `impl`, with the saved result's type of that form
/// (its saved result must be unused: its type changes).
void setAttentionImpl(AttentionOp op, AttentionImpl impl);
/// Whether both backends run `op` blocked: heads of at most 128 (the CUDA
/// kernels' widest tile; the CPU's wider heads take a slow scalar path)
/// and at most 65535 tiles of 16 query rows.
bool hasBlockedKernels(AttentionOp op);
/// The unit attribute --fsdp-fit-memory sets and --fsdp-remat follows:
/// the unit's recomputation policy ("none", "full", "selective").
constexpr llvm::StringLiteral kRematAttrName = "fsdp.remat";
/// On a grouped linear (and its backward) whose rows are expert
/// parallelism's bound: the rows routing fills on average, which its FLOPs
/// count (set by --fsdp-expert-parallel).
constexpr llvm::StringLiteral kActiveRowsAttrName = "fsdp.active_rows";
/// The module attribute --fsdp-fit-memory sets and --fsdp-schedule takes
/// over its own options: {forward_prefetch, backward_prefetch,
/// bucket_bytes, reshard_after_forward}.
constexpr llvm::StringLiteral kScheduleChoiceAttrName = "fsdp.schedule_choice";
/// The module attribute a model asks for mixed precision with (`fsdp-gen
/// --dtype bf16` sets it): the compute type, f32 or bf16, that
/// --fsdp-mixed-precision takes when its param-dtype is not given. The
/// parameters themselves stay f32 (the master weights).
constexpr llvm::StringLiteral kParamDtypeAttrName = "fsdp.param_dtype";
/// The compute type `module` asks for (kParamDtypeAttrName), or null.
Type getRequestedParamDtype(ModuleOp module);
/// The module attribute --fsdp-schedule sets: gathers allowed in flight.
constexpr llvm::StringLiteral kMaxInflightGathersAttrName =
    "fsdp.max_inflight_gathers";
} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_IR_FSDP_H
