//===- FSDPKernelOpBase.td - base class of kernel ops ------*- tablegen -*-===//
//
// The ODS class behind every op that lowers to one runtime kernel, for any
// dialect. It lives apart from FSDPOps.td so that another dialect can
// derive kernel ops from it without defining every fsdp op again: the test
// dialect fsdp_test (test/lib/Dialect/FSDPTest) uses it to build ops that
// declare KernelOpInterface wrongly on purpose, the fsdp ops use it through
// FSDP_KernelOp.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_KERNEL_OP_BASE_TD
#define FSDP_KERNEL_OP_BASE_TD

include "mlir/IR/OpBase.td"
include "fsdp/Dialect/FSDP/IR/FSDPInterfaces.td"

/// An op of `dialect` that lowers to the runtime kernel `kernel` (a
/// plan::Opcode enumerator). It declares KernelOpInterface, generates
/// getKernelOpcode() from the enumerator (a misspelled one does not
/// compile), and leaves getFlops() and the methods named in
/// `kernelMethods` (such as getKernelScratch or getBytesMoved) to the
/// dialect's C++: an op without them does not link. The generated code
/// names plan::Opcode, so the dialect's library links fsdp_plan_format.
///
/// An op with several implementations, one kernel each (attention's
/// `impl`), passes an empty `kernel`: its C++ defines getKernelOpcode()
/// and getKernelVariant() instead, and the verifier requires the kernel
/// to be named `<op>_<variant>` for every variant but the default.
class FSDP_KernelOpBase<Dialect dialect, string mnemonic, string kernel,
                        list<Trait> traits = [],
                        list<string> kernelMethods = []>
    : Op<dialect, mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<FSDP_KernelOpInterface,
            !if(!empty(kernel),
                !listconcat(kernelMethods,
                            ["getKernelOpcode", "getKernelVariant"]),
                kernelMethods)>])> {
  let extraClassDefinition = !if(!empty(kernel), "", [{
    uint32_t $cppClass::getKernelOpcode() {
      return uint32_t(::fsdp::plan::Opcode::}] # kernel # [{);
    }
  }]);
}

#endif // FSDP_KERNEL_OP_BASE_TD
