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

def FSDP_KernelOpInterface : OpInterface<"KernelOpInterface"> {
  let cppNamespace = "::mlir::fsdp";
  let description = [{
    A compute op that lowers to one runtime kernel: everything the compiler
    needs to know about the op besides its semantics lives here, next to
    the op. `--fsdp-lower-to-runtime` asks it for the plan kernel and the
    scratch outputs (the kernel's operands are the op's operands, then its
    results, then the scratch buffers), `--fsdp-simulate` for its FLOPs and
    bytes moved. Ops derive from the ODS class `FSDP_KernelOp`, which names
    the kernel and declares the methods; fsdp-tblgen checks the op's ODS
    against its kernel (FSDPKernels.td): the kernel's name is the op's, its
    inputs are the op's operands, its results the op's results. The
    verifier checks what ODS cannot tell: the scratch buffers that follow
    the results, the element types (`plan::ElementRule`) and the shapes
    (the kernel record's `shapes`, `dimChecks` and `derive`, evaluated by
    the runtime's `plan::checkKernelShapes` as the plan loader does).
  }];
  let methods = [
    InterfaceMethod<[{
        The plan kernel this op lowers to: `uint32_t(fsdp::plan::Opcode::K)`
        for the enumerator `K` named in `FSDP_KernelOp` (the value a plan
        stores; `plan::findKernel` maps it to the table entry). An integer
        so that the dialect's headers need not include PlanFormat.h.
      }],
      "uint32_t", "getKernelOpcode">,
    InterfaceMethod<[{
        Which of the op's implementations the kernel is, for an op with
        several (attention's `impl`): empty for the default one, whose
        kernel is named after the op, else the suffix of the kernel's
        name (`attention_blocked`).
      }],
      "::llvm::StringRef", "getKernelVariant", (ins), [{}],
      [{ return {}; }]>,
    InterfaceMethod<[{
        Appends the types of the scratch buffers that the kernel writes
        after the op's results (the table's `Scratch` outputs, in order),
        derived from the op's operand and result types. None by default.
      }],
      "void", "getKernelScratch",
      (ins "::llvm::SmallVectorImpl<::mlir::RankedTensorType> &":$scratch),
      [{}], [{ (void)scratch; }]>,
    InterfaceMethod<[{
        The floating-point operations the cost model charges the op: the
        multiply-adds of its GEMMs (2 FLOPs each). Element-wise and
        reduction ops keep the default, 0: the simulator charges them by
        bytes moved, which bounds them on every machine it models. An op
        whose kernel is a GEMM (`gemm` in FSDPKernels.td) lists `getFlops`
        in its `kernelMethods`, and only such an op (fsdp-tblgen checks
        it).
      }],
      "double", "getFlops", (ins), [{}], [{ return 0.0; }]>,
    InterfaceMethod<[{
        Bytes the kernel reads and writes: by default every operand read
        once and every result written once (scratch is not counted).
      }],
      "double", "getBytesMoved", (ins), [{}], [{
        double bytes = 0.0;
        for (::mlir::Value v : $_op->getOperands())
          bytes += double(::mlir::fsdp::getSizeInBytes(v.getType()));
        for (::mlir::Value v : $_op->getResults())
          bytes += double(::mlir::fsdp::getSizeInBytes(v.getType()));
        return bytes;
      }]>
  ];
  let verify = [{ return ::mlir::fsdp::detail::verifyKernelOp($_op); }];
}

#endif // FSDP_INTERFACES_TD
