//===- FSDPTestOps.td - fsdp_test, a test-only dialect -----*- tablegen -*-===//
//
// Kernel ops that declare KernelOpInterface wrongly on purpose. Every fsdp
// op satisfies the interface's verifier (mlir::fsdp::detail::verifyKernelOp)
// by construction, so no fsdp IR reaches its errors; these ops do, one error
// each (test/Dialect/FSDP/kernel-interface-invalid.mlir). They derive from
// the class the fsdp ops use (FSDP_KernelOpBase), so the tests check the
// same generated code. fsdp-opt registers the dialect for tests only.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_TEST_OPS_TD
#define FSDP_TEST_OPS_TD

include "fsdp/Dialect/FSDP/IR/FSDPKernelOpBase.td"

def FSDPTest_Dialect : Dialect {
  let name = "fsdp_test";
  let cppNamespace = "::mlir::fsdp_test";
  let summary = "Test-only ops for the verifiers of the fsdp interfaces";
}

/// A kernel op of the test dialect. Operands and results are any ranked
/// tensors: only their counts matter to the interface's verifier.
class FSDPTest_KernelOp<string mnemonic, string kernel,
                        list<string> kernelMethods = []>
    : FSDP_KernelOpBase<FSDPTest_Dialect, mnemonic, kernel, [],
                        kernelMethods> {
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
}

/// Right: named after its kernel, with its one input and one result. The
/// test uses it to show that the ops below fail for what they get wrong.
def FSDPTest_GeluOp : FSDPTest_KernelOp<"gelu", "Gelu"> {
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
}

/// Lowers to gelu under another name.
def FSDPTest_NotGeluOp : FSDPTest_KernelOp<"not_gelu", "Gelu"> {
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
}

/// Any number of operands, where the kernel takes 2 or 3 (the bias is
/// optional).
def FSDPTest_LinearOp : FSDPTest_KernelOp<"linear", "Linear"> {
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs);
  let results = (outs AnyRankedTensor:$result);
}

/// Leaves out getKernelScratch: one output short of the kernel's result
/// and `dprobs` scratch.
def FSDPTest_AttentionBackwardOp :
    FSDPTest_KernelOp<"attention_backward", "AttentionBackward"> {
  let arguments = (ins AnyRankedTensor:$grad, AnyRankedTensor:$qkv,
                       AnyRankedTensor:$probs);
  let results = (outs AnyRankedTensor:$result);
}

/// The kernel's `row_losses` scratch as a result: as many outputs as the
/// kernel, in the wrong role.
def FSDPTest_CrossEntropyOp :
    FSDPTest_KernelOp<"cross_entropy", "CrossEntropy"> {
  let arguments = (ins AnyRankedTensor:$logits, AnyRankedTensor:$targets);
  let results = (outs AnyRankedTensor:$loss, AnyRankedTensor:$row_losses);
}

/// Scratch for a kernel that has none (getKernelScratch returns one buffer
/// of the result's type).
def FSDPTest_ReluOp : FSDPTest_KernelOp<"relu", "Relu", ["getKernelScratch"]> {
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
}

/// An opcode past the kernel table. FSDP_KernelOpBase cannot express one
/// (it names a plan::Opcode enumerator), so this op declares the interface
/// itself and returns plan::kNumOpcodes from a hand-written
/// getKernelOpcode().
def FSDPTest_NoKernelOp : Op<FSDPTest_Dialect, "no_kernel", [
    DeclareOpInterfaceMethods<FSDP_KernelOpInterface>]> {
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs);
  let results = (outs Variadic<AnyRankedTensor>:$outputs);
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
}

#endif // FSDP_TEST_OPS_TD
