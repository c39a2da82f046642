//===- FSDPKernelOpBase.td - base class of kernel ops ------*- tablegen -*-===//
//
// The ODS class behind every op that lowers to one runtime kernel; the
// fsdp ops use it through FSDP_KernelOp. fsdp-tblgen reads its fields
// (fsdpKernel, fsdpKernelVariants, fsdpKernelMethods) to check each op
// against its kernel records (FSDPKernels.td).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_KERNEL_OP_BASE_TD
#define FSDP_KERNEL_OP_BASE_TD

include "mlir/IR/OpBase.td"
include "fsdp/Dialect/FSDP/IR/FSDPInterfaces.td"

/// An op of `dialect` that lowers to the runtime kernel `kernel` (a
/// plan::Opcode enumerator). It declares KernelOpInterface, generates
/// getKernelOpcode() from the enumerator (a misspelled one does not
/// compile), and leaves the methods named in `kernelMethods` (getFlops for
/// a GEMM, getKernelScratch, getBytesMoved) to the dialect's C++: an op
/// without them does not link. The generated code names plan::Opcode, so
/// the dialect's library links fsdp_plan_format.
///
/// An op with several implementations, one kernel each (attention's
/// `impl`), passes an empty `kernel`: its C++ defines getKernelOpcode()
/// and getKernelVariant() instead, and lists the kernels in
/// `fsdpKernelVariants`: fsdp-tblgen requires them to be named `<op>` or
/// `<op>_<variant>`.
class FSDP_KernelOpBase<Dialect dialect, string mnemonic, string kernel,
                        list<Trait> traits = [],
                        list<string> kernelMethods = []>
    : Op<dialect, mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<FSDP_KernelOpInterface,
            !if(!empty(kernel),
                !listconcat(kernelMethods,
                            ["getKernelOpcode", "getKernelVariant"]),
                kernelMethods)>])> {
  // Read by fsdp-tblgen, which checks the op against its kernel records
  // (FSDPKernels.td): `fsdpKernel` is named after the op; an op with
  // several implementations lists them in `fsdpKernelVariants` instead.
  string fsdpKernel = kernel;
  list<string> fsdpKernelVariants = [];
  list<string> fsdpKernelMethods = kernelMethods;
  let extraClassDefinition = !if(!empty(kernel), "", [{
    uint32_t $cppClass::getKernelOpcode() {
      return uint32_t(::fsdp::plan::Opcode::}] # kernel # [{);
    }
  }]);
}

#endif // FSDP_KERNEL_OP_BASE_TD
