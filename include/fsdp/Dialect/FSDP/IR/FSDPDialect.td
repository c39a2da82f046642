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
    on static tensors at the granularity of llm.c's GPT-2 (embedding,
    layer_norm, linear, attention, gelu, relu, residual add, cross-entropy).

    FSDP units are explicit: `fsdp.unit` names the parameters that are
    flattened and gathered together, and `fsdp.compute` regions hold the ops
    that compute with one unit's parameters, in the forward or the backward
    phase. Every differentiable op builds its own backward through
    `DifferentiableOpInterface`; `--fsdp-autodiff` uses it to build
    `@train_step` (forward, backward and an AdamW update).
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

class FSDP_Op<string mnemonic, list<Trait> traits = []>
    : Op<FSDP_Dialect, mnemonic, traits>;

#endif // FSDP_DIALECT_TD
