//===- ByteSize.h - a byte count as a pass option ---------------*- C++ -*-===//
//
// memory-budget= takes what people write: 40GB, 37.5GiB, 512MiB, 4e10, or
// plain bytes. GB, MB, KB are powers of ten (as the memory report prints
// them), GiB, MiB, KiB powers of two. Its own library (MLIRFSDPSupport):
// the fsdp passes, the runtime dialect's passes and the pipelines take a
// budget, and none of them should link the others to get it.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_SUPPORT_BYTESIZE_H
#define FSDP_SUPPORT_BYTESIZE_H

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>

namespace mlir::fsdp {

/// A byte count that converts to and from int64_t.
struct ByteSize {
  int64_t bytes = 0;
  ByteSize(int64_t bytes = 0) : bytes(bytes) {}
  operator int64_t() const { return bytes; }
};

/// The bytes `text` names, or nothing when it is not a non-negative size
/// within int64_t.
std::optional<int64_t> parseByteSize(llvm::StringRef text);

inline llvm::raw_ostream &operator<<(llvm::raw_ostream &os, ByteSize size) {
  return os << size.bytes;
}

} // namespace mlir::fsdp

namespace llvm::cl {
template <>
class parser<mlir::fsdp::ByteSize> : public basic_parser<mlir::fsdp::ByteSize> {
public:
  parser(Option &option) : basic_parser(option) {}
  bool parse(Option &option, StringRef, StringRef arg,
             mlir::fsdp::ByteSize &value) {
    std::optional<int64_t> bytes = mlir::fsdp::parseByteSize(arg);
    if (!bytes)
      return option.error("'" + arg +
                          "' is not a size (bytes, or a number with GB, MB, "
                          "KB, GiB, MiB or KiB)");
    value = *bytes;
    return false;
  }
  StringRef getValueName() const override { return "size"; }
  void printOptionDiff(const Option &option, mlir::fsdp::ByteSize value,
                       const OptVal &, size_t globalWidth) const {
    printOptionName(option, globalWidth);
    outs() << "= " << value.bytes << "\n";
  }
  void anchor() override {}
};
} // namespace llvm::cl

#endif // FSDP_SUPPORT_BYTESIZE_H
