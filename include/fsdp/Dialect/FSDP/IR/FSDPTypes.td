//===- FSDPTypes.td - fsdp dialect types -------------------*- tablegen -*-===//

#ifndef FSDP_TYPES_TD
#define FSDP_TYPES_TD

include "fsdp/Dialect/FSDP/IR/FSDPDialect.td"
include "mlir/IR/AttrTypeBase.td"

class FSDP_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<FSDP_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def FSDP_TokenType : FSDP_Type<"Token", "token"> {
  let summary = "completion token of an asynchronous operation";
  let description = [{
    A value of type `!fsdp.token` stands for the completion of an
    asynchronous operation, for example a collective started on its own
    stream. It carries no data; an op that consumes it waits for the
    operation that produced it. At the graph level every op is synchronous
    and no token appears; the schedule level gives collectives start/wait
    pairs linked by tokens.
  }];
}

#endif // FSDP_TYPES_TD
