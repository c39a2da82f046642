//===- Mesh.cpp - set the module's device mesh ----------------------------===//
//
// The one place the number of ranks enters the compiler: every later pass
// reads the module's #fsdp.mesh instead of an option of its own.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPMESHPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
struct FsdpMeshPass : public mlir::fsdp::impl::FsdpMeshPassBase<FsdpMeshPass> {
  using FsdpMeshPassBase::FsdpMeshPassBase;
  void runOnOperation() override;
};
} // namespace

/// `text` as RxS: two positive decimal integers around an `x`.
static bool parseMeshSpec(StringRef text, int64_t &replicas, int64_t &shards) {
  auto [left, right] = text.split('x');
  if (right.empty() || left.empty())
    return false;
  unsigned long long r = 0, s = 0;
  if (llvm::getAsUnsignedInteger(left, 10, r) ||
      llvm::getAsUnsignedInteger(right, 10, s) || r < 1 || s < 1 ||
      r > uint64_t(INT32_MAX) || s > uint64_t(INT32_MAX))
    return false;
  replicas = int64_t(r);
  shards = int64_t(s);
  return true;
}

void FsdpMeshPass::runOnOperation() {
  ModuleOp module = getOperation();
  MLIRContext *context = module.getContext();
  if (!spec.empty()) {
    int64_t r = 0, s = 0;
    if (!parseMeshSpec(spec, r, s)) {
      emitError(module.getLoc())
          << "fsdp-mesh: mesh must be RxS, replicas x shards (positive "
             "integers: 1x8 is full sharding over 8 ranks, 2x4 hybrid, 8x1 "
             "DDP), got '"
          << spec << "'";
      return signalPassFailure();
    }
    if (worldSize != 0 && worldSize != r * s) {
      emitError(module.getLoc())
          << "fsdp-mesh: world-size=" << int64_t(worldSize)
          << " contradicts mesh=" << spec << " (" << r * s
          << " ranks); give one of them";
      return signalPassFailure();
    }
    replicate = r;
    shard = s;
  }
  SmallVector<MeshAxisAttr> axes;
  // An axis of size 1 is left out (a missing axis has size 1), so that
  // `replicate=1` prints the same mesh as no replicate option at all.
  for (auto [name, size] :
       {std::pair<StringRef, int64_t>{MeshAttr::kReplicateAxis, replicate},
        {MeshAttr::kShardAxis, shard}}) {
    if (size < 1) {
      emitError(module.getLoc())
          << "fsdp-mesh: " << name << " must be at least 1, got " << size;
      return signalPassFailure();
    }
    if (size > 1 || name == MeshAttr::kShardAxis)
      axes.push_back(MeshAxisAttr::get(context, name, size));
  }
  if (expert == kExpertOptionNotANumber) {
    emitError(module.getLoc())
        << "fsdp-mesh: expert must be a whole number of ranks (or, in "
           "--fsdp-train-pipeline, auto)";
    return signalPassFailure();
  }
  if (expert < 1) {
    emitError(module.getLoc())
        << "fsdp-mesh: expert must be at least 1, got " << int64_t(expert);
    return signalPassFailure();
  }
  if (expert > 1)
    axes.push_back(MeshAxisAttr::get(context, MeshAttr::kExpertAxis, expert));
  auto mesh = MeshAttr::getChecked(
      [&] { return emitError(module.getLoc()) << "fsdp-mesh: "; }, context,
      ArrayRef<MeshAxisAttr>(axes));
  if (!mesh)
    return signalPassFailure();
  if (MeshAttr existing = getMesh(module); existing && existing != mesh) {
    emitError(module.getLoc())
        << "fsdp-mesh: the module is already compiled for the mesh " << existing
        << ", not " << mesh << " (start again from the model for another mesh)";
    return signalPassFailure();
  }
  module->setAttr(kMeshAttrName, mesh);
}
