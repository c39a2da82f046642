//===- ByteSize.cpp - parsing byte counts ---------------------------------===//

#include "fsdp/Support/ByteSize.h"

#include "llvm/ADT/StringSwitch.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

std::optional<int64_t> mlir::fsdp::parseByteSize(llvm::StringRef text) {
  text = text.trim();
  size_t unitAt = text.find_first_not_of("0123456789.eE+-");
  llvm::StringRef number = text.take_front(unitAt),
                  unit = text.drop_front(number.size());
  double scale = llvm::StringSwitch<double>(unit.trim())
                     .Case("", 1.0)
                     .Case("B", 1.0)
                     .Case("KB", 1e3)
                     .Case("MB", 1e6)
                     .Case("GB", 1e9)
                     .Case("TB", 1e12)
                     .Case("KiB", 1024.0)
                     .Case("MiB", 1024.0 * 1024)
                     .Case("GiB", 1024.0 * 1024 * 1024)
                     .Case("TiB", 1024.0 * 1024 * 1024 * 1024)
                     .Default(-1.0);
  if (number.empty() || scale < 0)
    return std::nullopt;
  std::string digits = number.str();
  char *end = nullptr;
  errno = 0;
  double value = std::strtod(digits.c_str(), &end);
  if (end != digits.c_str() + digits.size() || errno == ERANGE ||
      !std::isfinite(value) || value < 0)
    return std::nullopt;
  double bytes = std::round(value * scale);
  // Not a size that silently becomes 0 (no budget) or overflows int64.
  if (bytes >= 9.2e18 || (value > 0 && bytes == 0))
    return std::nullopt;
  return int64_t(bytes);
}
