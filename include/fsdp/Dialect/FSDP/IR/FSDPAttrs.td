//===- FSDPAttrs.td - fsdp dialect attributes and enums ----*- tablegen -*-===//

#ifndef FSDP_ATTRS_TD
#define FSDP_ATTRS_TD

include "fsdp/Dialect/FSDP/IR/FSDPDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

class FSDP_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<FSDP_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def FSDP_InitKind : I32EnumAttr<"InitKind", "parameter initializer kind", [
  I32EnumAttrCase<"Zeros", 0, "zeros">,
  I32EnumAttrCase<"Ones", 1, "ones">,
  I32EnumAttrCase<"Normal", 2, "normal">
]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}

def FSDP_Phase : I32EnumAttr<"Phase", "training phase of a unit region", [
  I32EnumAttrCase<"Forward", 0, "forward">,
  I32EnumAttrCase<"Backward", 1, "backward">
]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}

def FSDP_PhaseAttr : EnumAttr<FSDP_Dialect, FSDP_Phase, "phase"> {
  let assemblyFormat = "$value";
}

def FSDP_AttentionImpl : I32EnumAttr<"AttentionImpl",
    "what attention saves for its backward", [
  I32EnumAttrCase<"Materialized", 0, "materialized">,
  I32EnumAttrCase<"Blocked", 1, "blocked">
]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}

def FSDP_AttentionImplAttr
    : EnumAttr<FSDP_Dialect, FSDP_AttentionImpl, "attention_impl"> {
  let summary = "materialized (saves the T x T probabilities) or blocked "
                "(saves one log-sum-exp per row and recomputes them)";
  let assemblyFormat = "`<` $value `>`";
}

def FSDP_RopeScaling : I64EnumAttr<"RopeScaling",
    "how rope scales its frequencies (Hugging Face's rope_type)", [
  I64EnumAttrCase<"Default", 0, "default">,
  I64EnumAttrCase<"Linear", 1, "linear">,
  I64EnumAttrCase<"Llama3", 2, "llama3">,
  I64EnumAttrCase<"Yarn", 3, "yarn">
]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}

/// The values are the plan's (plan::RopeScalingKind, RopeScaling.h): the
/// lowering stores the attribute as that integer.
def FSDP_RopeScalingAttr
    : EnumAttr<FSDP_Dialect, FSDP_RopeScaling, "rope_scaling"> {
  let summary = "default, linear, llama3 or yarn (rope's frequencies)";
  let assemblyFormat = "`<` $value `>`";
}

def FSDP_MoeScoring : I64EnumAttr<"MoeScoring",
    "how a mixture-of-experts router scores the experts", [
  I64EnumAttrCase<"Softmax", 0, "softmax">,
  I64EnumAttrCase<"Sigmoid", 1, "sigmoid">
]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}

/// The values are the plan's (fsdp::moe::Scoring, MoeRouter.h): the
/// lowering stores the attribute as that integer.
def FSDP_MoeScoringAttr
    : EnumAttr<FSDP_Dialect, FSDP_MoeScoring, "moe_scoring"> {
  let summary = "softmax (Mixtral, Qwen3-MoE) or sigmoid with a selection "
                "bias (DeepSeek-V3)";
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

def FSDP_InitAttr : FSDP_Attr<"Init", "init"> {
  let summary = "how a parameter is initialised";
  let description = [{
    Names the distribution a parameter's elements are drawn from when the
    runtime creates it: `#fsdp.init<zeros>`, `#fsdp.init<ones>`, or
    `#fsdp.init<normal, std = 0.02>` (mean 0). The runtime draws from a
    seeded generator so that initialisation is deterministic.
  }];
  let parameters = (ins "InitKind":$kind,
                        APFloatParameter<"standard deviation (normal only)">:$std);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let skipDefaultBuilders = 1;
  let builders = [
    AttrBuilder<(ins "InitKind":$kind, CArg<"double", "0.0">:$std), [{
      return $_get($_ctxt, kind, ::llvm::APFloat(std));
    }]>
  ];
}

def FSDP_MeshAxisAttr : FSDP_Attr<"MeshAxis", "mesh_axis"> {
  let summary = "one named axis of the device mesh";
  let description = [{
    An axis of `#fsdp.mesh`: a name and the number of ranks along it, for
    example `#fsdp.mesh_axis<"shard" = 4>`. Inside a mesh it is written
    without the wrapper, as `"shard" = 4`.
  }];
  let parameters = (ins StringRefParameter<"axis name">:$name,
                        "int64_t":$size);
  let assemblyFormat = "`<` $name `=` $size `>`";
  let genVerifyDecl = 1;
}

def FSDP_MeshAttr : FSDP_Attr<"Mesh", "mesh"> {
  let summary = "the device mesh a module is compiled for";
  let description = [{
    The ranks a training step runs on, as named axes (as Shardy's
    `sdy.mesh`): `#fsdp.mesh<["shard" = 4]>` is four ranks that each hold a
    quarter of every unit (FSDP's full sharding); `#fsdp.mesh<["replicate"
    = 2, "shard" = 4]>` is two replicas of that (hybrid sharding), eight
    ranks in all, rank = replica * 4 + shard index.

    The axes fsdp knows are `replicate` (outer) and `shard` (inner), each
    at most once, in that order; a missing axis has size 1. A third,
    `expert` (expert parallelism, docs/moe.md), splits the shard axis
    instead of adding ranks: `#fsdp.mesh<["shard" = 4, "expert" = 2]>` is
    four ranks in two expert groups of two (shard indices 0-1 and 2-3);
    shard index s holds expert slice s mod 2 of every mixture-of-experts
    layer, and its size must divide the shard axis's. The module
    carries the mesh as `fsdp.mesh`, set once by `--fsdp-mesh` (the
    training pipeline's `world-size` option), and every pass that needs the
    number of ranks reads it from there, so no two passes can disagree.
  }];
  let parameters = (ins ArrayRefParameter<"MeshAxisAttr", "mesh axes">:$axes);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Ranks along axis `name`, 1 when the mesh has no such axis.
    int64_t getAxisSize(::llvm::StringRef name) const;
    /// Ranks a unit is sharded over (the `shard` axis).
    int64_t getShardSize() const { return getAxisSize(kShardAxis); }
    /// Replicas of every shard (the `replicate` axis).
    int64_t getReplicateSize() const { return getAxisSize(kReplicateAxis); }
    /// Ranks of an expert group (the `expert` axis, a split of the shard
    /// axis): 1 without expert parallelism.
    int64_t getExpertSize() const { return getAxisSize(kExpertAxis); }
    /// All ranks: the product of the replicate and shard axes' sizes.
    int64_t getNumRanks() const;

    static constexpr ::llvm::StringLiteral kShardAxis = "shard";
    static constexpr ::llvm::StringLiteral kReplicateAxis = "replicate";
    static constexpr ::llvm::StringLiteral kExpertAxis = "expert";
    /// The collectives' group of an expert-parallel unit: the ranks of a
    /// shard group that hold the same expert slice (no axis of its own).
    static constexpr ::llvm::StringLiteral kExpertShardGroup = "expert_shard";
  }];
}

#endif // FSDP_ATTRS_TD
