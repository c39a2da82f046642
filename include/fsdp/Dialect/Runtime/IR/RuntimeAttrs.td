//===- RuntimeAttrs.td - fsdprt enums and attributes -------*- tablegen -*-===//

#ifndef FSDPRT_ATTRS_TD
#define FSDPRT_ATTRS_TD

include "fsdp/Dialect/Runtime/IR/RuntimeDialect.td"
include "mlir/IR/EnumAttr.td"

// Values match fsdp::plan::BufferKind (runtime/include/fsdp/runtime/PlanFormat.h).
def Runtime_BufferKind : I32EnumAttr<"BufferKind", "what a buffer holds", [
  I32EnumAttrCase<"Input", 0, "input">,
  I32EnumAttrCase<"Param", 1, "param">,
  I32EnumAttrCase<"Grad", 2, "grad">,
  I32EnumAttrCase<"AdamM", 3, "adam_m">,
  I32EnumAttrCase<"AdamV", 4, "adam_v">,
  I32EnumAttrCase<"Activation", 5, "activation">,
  I32EnumAttrCase<"Scratch", 6, "scratch">,
  I32EnumAttrCase<"Gathered", 7, "gathered">,
  I32EnumAttrCase<"ShardCopy", 8, "shard_copy">
]> {
  let cppNamespace = "::mlir::fsdprt";
  let genSpecializedAttr = 0;
}

def Runtime_BufferKindAttr : EnumAttr<FSDPRuntime_Dialect, Runtime_BufferKind,
                                      "kind"> {
  let assemblyFormat = "`<` $value `>`";
}

#endif // FSDPRT_ATTRS_TD
