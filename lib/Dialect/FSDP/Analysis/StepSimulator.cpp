//===- StepSimulator.cpp - the cost model of a scheduled step -------------===//

#include "fsdp/Dialect/FSDP/Analysis/StepSimulator.h"

using namespace mlir;
using namespace mlir::fsdp;

static double bytesOf(Value v) { return double(getSizeInBytes(v.getType())); }

std::optional<Hardware> mlir::fsdp::lookupHardware(StringRef name) {
  if (name == "h100-nvlink")
    return Hardware{400e12, 370e9, 3000e9, 5e-6, 800e12};
  if (name == "ib-400g")
    return Hardware{400e12, 47e9, 3000e9, 15e-6, 800e12};
  return std::nullopt;
}

NetworkTopology mlir::fsdp::singleLevelNetwork(const Hardware &hw,
                                               int64_t worldSize) {
  NetworkTopology net;
  net.worldSize = worldSize;
  net.intraBusBytes = hw.busBytes;
  net.intraLatency = hw.latency;
  return net;
}

double mlir::fsdp::computeTime(Operation *op, const Hardware &hw) {
  // A compute op's costs are its own (KernelOpInterface); the shard's
  // AdamW reads p, g, m, v and writes p, m, v; what else is left of the
  // dialect here (adamw of an unsharded parameter) moves its operands.
  double flops = 0.0, bytes = 0.0, rate = hw.flops;
  if (auto kernelOp = llvm::dyn_cast<KernelOpInterface>(op)) {
    flops = kernelOp.getFlops();
    bytes = kernelOp.getBytesMoved();
    // A GEMM's operands share the kernel's element type: the first says.
    if (op->getNumOperands() > 0 &&
        llvm::cast<ShapedType>(op->getOperand(0).getType())
            .getElementType()
            .isBF16())
      rate = hw.bf16Flops;
  } else if (auto adamw = llvm::dyn_cast<AdamWShardOp>(op)) {
    bytes = 7.0 * bytesOf(adamw.getGrad());
  } else if (llvm::isa<AdamWOp>(op)) {
    bytes = bytesOf(llvm::cast<AdamWOp>(op).getGrad());
  } else {
    return -1.0;
  }
  return std::max(flops / rate, bytes / hw.memoryBytes);
}

GroupShape StepSimulator::groupOf(Operation *op) const {
  // The group a collective names (hybrid sharding): its shard group, S
  // consecutive ranks, or its replica group, R ranks S apart. Without a
  // replicate axis the one group is every rank.
  // Expert parallelism splits a shard group: expert groups of G
  // consecutive ranks, and the S / G ranks G apart that hold one slice.
  MeshAttr mesh = getMesh(op);
  StringRef axis = getCollectiveAxis(op);
  int64_t experts = mesh ? mesh.getExpertSize() : 1;
  if (axis == MeshAttr::kExpertAxis)
    return {experts, 1};
  if (axis == MeshAttr::kExpertShardGroup)
    return {mesh.getShardSize() / experts, experts};
  if (!mesh || mesh.getReplicateSize() == 1)
    return {net.worldSize, 1};
  int64_t shards = mesh.getShardSize();
  if (axis == MeshAttr::kReplicateAxis)
    return {mesh.getReplicateSize(), shards};
  return {shards, 1};
}

void StepSimulator::collective(Operation *op, int stream, CollectiveKind kind,
                               double bytes, Value token) {
  double start = std::max(freeAt[0], freeAt[stream]);
  GroupShape group = groupOf(op);
  LinkLevel level = net.levelOf(group);
  // A grouped start is part of its bucket's one fused collective: it adds
  // its bytes, not another latency.
  double end = start + collectiveTime(kind, bytes, group, net) -
               (op->hasAttr("grouped") ? level.latency : 0.0);
  freeAt[stream] = end;
  commBusy[level.crossesNodes] += end - start;
  ++commCount[level.crossesNodes];
  std::string name = op->getName().stripDialect().str();
  if (FlatSymbolRefAttr unit = getCollectiveUnit(op))
    name += " @" + unit.getValue().str();
  events.push_back({name, stream, start, end - start});
  if (token)
    doneAt[token] = end;
  else // a synchronous collective: compute waits for it at once
    freeAt[0] = std::max(freeAt[0], end);
}

LogicalResult StepSimulator::compute(Operation *op) {
  double duration = computeTime(op, hw);
  if (duration < 0.0) {
    op->emitOpError() << "has no cost in fsdp-simulate (a compute op "
                         "implements KernelOpInterface)";
    return failure();
  }
  events.push_back(
      {op->getName().stripDialect().str(), 0, freeAt[0], duration});
  freeAt[0] += duration;
  computeBusy += duration;
  return success();
}

LogicalResult StepSimulator::visit(Operation *op) {
  if (isLocalCopy(op)) // a shard group of one: the lowering elides it
    return success();
  if (auto start = llvm::dyn_cast<AllGatherStartOp>(op)) {
    collective(op, 1, CollectiveKind::AllGather, bytesOf(start.getResult()),
               start.getToken());
    return success();
  }
  if (auto gather = llvm::dyn_cast<AllGatherOp>(op)) {
    collective(op, 1, CollectiveKind::AllGather, bytesOf(gather.getResult()),
               Value());
    return success();
  }
  if (auto start = llvm::dyn_cast<ReduceScatterStartOp>(op)) {
    collective(op, 2, CollectiveKind::ReduceScatter, bytesOf(start.getSource()),
               start.getToken());
    return success();
  }
  if (auto scatter = llvm::dyn_cast<ReduceScatterOp>(op)) {
    collective(op, 2, CollectiveKind::ReduceScatter,
               bytesOf(scatter.getSource()), Value());
    return success();
  }
  // Hybrid sharding's replica all-reduce of a gradient shard, on stream 3,
  // over its replica group (groupOf).
  if (auto start = llvm::dyn_cast<AllReduceMeanStartOp>(op)) {
    collective(op, 3, CollectiveKind::AllReduce, bytesOf(start.getSource()),
               start.getToken());
    return success();
  }
  if (auto mean = llvm::dyn_cast<AllReduceMeanOp>(op)) {
    collective(op, 3, CollectiveKind::AllReduce, bytesOf(mean.getSource()),
               Value());
    return success();
  }
  // Gradient clipping's scalar all-reduce runs on the compute stream, where
  // it stands: an all-reduce moves 2 (N - 1) / N of its bytes.
  if (auto reduce = llvm::dyn_cast<AllReduceSumOp>(op)) {
    collective(op, 0, CollectiveKind::AllReduce, bytesOf(reduce.getValue()),
               Value());
    return success();
  }
  // The expert group's exchanges: in place they block the compute
  // stream; started (--fsdp-schedule) they run on stream 4 while compute
  // goes on to their wait. A dispatch sends the pairs' rows and receives
  // at most its bound; the return the reverse: both move the pairs' rows
  // (the smaller side), (G - 1) / G of them to other ranks when routing
  // is even.
  if (auto exchange = llvm::dyn_cast<AllToAllOp>(op)) {
    collective(
        op, 0, CollectiveKind::AllToAll,
        std::min(bytesOf(exchange.getInput()), bytesOf(exchange.getResult())),
        Value());
    return success();
  }
  if (auto start = llvm::dyn_cast<AllToAllStartOp>(op)) {
    collective(op, int(start.getStream()), CollectiveKind::AllToAll,
               std::min(bytesOf(start.getInput()), bytesOf(start.getResult())),
               start.getToken());
    return success();
  }
  if (auto counts = llvm::dyn_cast<AllToAllCountsOp>(op)) {
    collective(op, 0, CollectiveKind::AllToAll, bytesOf(counts.getCounts()),
               Value());
    return success();
  }
  if (auto wait = llvm::dyn_cast<WaitOp>(op)) {
    freeAt[0] = std::max(freeAt[0], doneAt.lookup(wait.getToken()));
    return success();
  }
  if (llvm::isa<ComputeOp, YieldOp, ViewOp, LoadOp, PackOp, FreeOp,
                func::FuncOp, func::ReturnOp>(op) ||
      op->getDialect() != op->getContext()->getLoadedDialect<FSDPDialect>())
    return success();
  return compute(op);
}

LogicalResult StepSimulator::run(func::FuncOp step) {
  bool noCost = false;
  step.walk<WalkOrder::PreOrder>([&](Operation *op) {
    issuedAt[op] = freeAt[0];
    if (failed(visit(op)))
      noCost = true;
  });
  return failure(noCost);
}
