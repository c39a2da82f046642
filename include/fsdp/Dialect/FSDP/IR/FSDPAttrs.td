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

#endif // FSDP_ATTRS_TD
