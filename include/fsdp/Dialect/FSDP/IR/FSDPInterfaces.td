//===- FSDPInterfaces.td - fsdp dialect interfaces ---------*- tablegen -*-===//

#ifndef FSDP_INTERFACES_TD
#define FSDP_INTERFACES_TD

include "mlir/IR/OpBase.td"

def FSDP_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::mlir::fsdp";
  let description = [{
    An op that knows its own reverse-mode derivative. `--fsdp-autodiff`
    walks the forward in reverse and asks each op to build, at the builder's
    insertion point, the ops that turn the gradients of its results into the
    gradients of its operands. Saved activations are ordinary SSA values of
    the forward (ops whose backward needs statistics return them as extra
    results), so the backward reads them explicitly.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the backward of this op. `resultGrads` has one entry per
        result, null where the result has no gradient. On success
        `operandGrads` has one entry per operand: the gradient of that
        operand, or null for an operand that is not differentiable (token
        ids, targets). Fails, with a diagnostic on the op, when a gradient
        reaches a result that cannot carry one (a saved statistic).
      }],
      "::llvm::LogicalResult", "buildBackward",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

#endif // FSDP_INTERFACES_TD
