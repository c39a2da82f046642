//===- FSDPTestDialect.h - fsdp_test, a test-only dialect -------*- C++ -*-===//
//
// Ops that implement the fsdp interfaces wrongly on purpose, so that the
// lit tests reach their verifiers' errors (see FSDPTestOps.td). Only
// fsdp-opt links it, for tests; no pass or pipeline knows its ops.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_TEST_LIB_DIALECT_FSDPTEST_FSDPTESTDIALECT_H
#define FSDP_TEST_LIB_DIALECT_FSDPTEST_FSDPTESTDIALECT_H

#include "fsdp/Dialect/FSDP/IR/FSDP.h"

#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"

#include "FSDPTestOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "FSDPTestOps.h.inc"

namespace mlir::fsdp_test {
/// Adds the fsdp_test dialect to `registry` (fsdp-opt declares this
/// function itself rather than include this header, as mlir-opt does for
/// upstream's test dialect).
void registerFSDPTestDialect(DialectRegistry &registry);
} // namespace mlir::fsdp_test

#endif // FSDP_TEST_LIB_DIALECT_FSDPTEST_FSDPTESTDIALECT_H
