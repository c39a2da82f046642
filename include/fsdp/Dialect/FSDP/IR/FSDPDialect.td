//===- FSDPDialect.td - The fsdp dialect definition --------*- tablegen -*-===//
//
// The dialect record only; ops, types, attributes and interfaces live in
// their own files.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_TD
#define FSDP_DIALECT_TD

include "mlir/IR/OpBase.td"

def FSDP_Dialect : Dialect {
  let name = "fsdp";
  let cppNamespace = "::mlir::fsdp";
  let summary = "Fully Sharded Data Parallel training as a compiler's job";
  let description = [{
    The `fsdp` dialect describes a model for training: parameters are
    module-level symbols (`fsdp.param`) read with `fsdp.load`, the model is a
    function `@forward` returning a scalar loss, built from value-semantic ops
    on static tensors, one op per runtime kernel as llm.c has them (the
    operations below cover GPT-2 and Llama).

    FSDP units are explicit: `fsdp.unit` names the parameters that are
    flattened and gathered together, and `fsdp.compute` regions hold the ops
    that compute with one unit's parameters, in the forward or the backward
    phase. Every differentiable op builds its own backward through
    `DifferentiableOpInterface`; `--fsdp-autodiff` uses it to build
    `@train_step` (forward, backward and an AdamW update).

    Sizes are counted in int64: every parameter, every tensor an op takes
    or gives and every input of `@forward` or `@train_step` has a byte size
    that fits, and a unit's parameters together do too. The verifiers
    reject anything larger, so that the passes compute sizes of verified IR
    without overflow; sums over many tensors (a rank's memory, an arena)
    are checked where they are computed.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect"];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
    /// Marks the function that computes the loss from the inputs.
    static constexpr ::llvm::StringLiteral kForwardAttrName = "fsdp.forward";
    /// Marks the function built by --fsdp-autodiff.
    static constexpr ::llvm::StringLiteral kTrainStepAttrName =
        "fsdp.train_step";
  }];
}

/// Every tensor an fsdp op takes or gives has a byte size that fits int64,
/// so that the passes may compute sizes without overflow checks per use.
def FSDP_TensorSizesFit : NativeOpTrait<"TensorSizesFit"> {
  let cppNamespace = "::mlir::fsdp";
}

class FSDP_Op<string mnemonic, list<Trait> traits = []>
    : Op<FSDP_Dialect, mnemonic, !listconcat(traits, [FSDP_TensorSizesFit])>;

#endif // FSDP_DIALECT_TD
