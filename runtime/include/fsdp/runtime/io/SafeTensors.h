//===- SafeTensors.h - the safetensors format, read and written -*- C++ -*-===//
//
// A safetensors file: an 8-byte little-endian header length N, N bytes of
// JSON ({"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin,
// end]}, .., optional "__metadata__": {string: string}}), then the data,
// the offsets relative to its start. The reader memory-maps the file and
// checks everything before a byte of data is read: the header length
// against the file, the JSON, every entry's dtype, shape and offsets (in
// bounds, size = prod(shape) x dtype size without overflow, the tensors
// tiling the data without gap or overlap, as the reference library
// requires), so that a corrupt file is one error naming the file and the
// reason. Reading a tensor then touches only the pages it reads: a rank
// that loads its shard reads its shard's bytes, not the file.
//
// The JSON needs nlohmann-json; a runtime built without it (a GPU machine
// without the package) has the format's functions all the same, and they
// fail with an error saying so (safeTensorsAvailable() is false).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_SAFETENSORS_H
#define FSDP_RUNTIME_SAFETENSORS_H

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace fsdp::rt {

class OutputFile;

/// The format's element types (names as in the header: "F32", "BF16"..).
enum class TensorDType : uint8_t {
  Bool,
  U8,
  I8,
  F8E4M3,
  F8E5M2,
  I16,
  U16,
  F16,
  BF16,
  I32,
  U32,
  F32,
  I64,
  U64,
  F64,
};
const char *dtypeName(TensorDType dtype);
bool parseDTypeName(const std::string &name, TensorDType &dtype);
uint64_t dtypeBytes(TensorDType dtype);
/// F16, BF16, F32, F64: the types a parameter can be read from.
bool isFloatDType(TensorDType dtype);
/// "[2, 3]", as the loaders' errors print a tensor's shape.
std::string shapeText(const std::vector<int64_t> &shape);

using TensorMetadata = std::vector<std::pair<std::string, std::string>>;

/// One tensor of a file: [begin, end) are its bytes in the data section.
struct TensorInfo {
  std::string name;
  TensorDType dtype = TensorDType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
  int64_t numElements() const;
};

/// Whether this build reads and writes safetensors (it has nlohmann-json).
bool safeTensorsAvailable();
/// What a build without it says.
std::string safeTensorsUnavailableReason();

class SafeTensorsReader {
public:
  SafeTensorsReader() = default;
  SafeTensorsReader(const SafeTensorsReader &) = delete;
  SafeTensorsReader &operator=(const SafeTensorsReader &) = delete;
  ~SafeTensorsReader();

  /// Maps and validates `path`; on failure returns false with `error`
  /// naming the file and the reason (and holds nothing).
  bool open(const std::string &path, std::string &error);
  void close();

  const std::string &path() const { return filePath; }
  /// Every tensor, in the order of their data.
  const std::vector<TensorInfo> &tensors() const { return entries; }
  const TensorInfo *find(const std::string &name) const;
  const TensorMetadata &metadata() const { return meta; }
  /// A hash of the header and the file's size: what ranks compare to know
  /// they read the same file without reading its data.
  uint64_t fingerprint() const { return headerHash; }

  /// `count` elements of float tensor `t` from element `first`, `stride`
  /// elements apart, widened or rounded to f32 into `out`. The caller
  /// keeps first + (count - 1) stride below t.numElements().
  void readFloats(const TensorInfo &t, int64_t first, int64_t count,
                  int64_t stride, float *out) const;

private:
  std::string filePath;
  std::vector<TensorInfo> entries;
  TensorMetadata meta;
  const unsigned char *map = nullptr;
  uint64_t mapBytes = 0, dataStart = 0, headerHash = 0;
};

/// One tensor to write: `fill` writes its numElements x dtypeBytes bytes
/// (little-endian) into the buffer it is given.
struct TensorToWrite {
  std::string name;
  TensorDType dtype = TensorDType::F32;
  std::vector<int64_t> shape;
  std::function<void(char *bytes)> fill;
};

/// The exact size of the file writeSafeTensors writes: 8 bytes, the JSON
/// header padded with spaces to a multiple of 8 (so that the data starts
/// aligned, as the format suggests), the data in the order given.
uint64_t safeTensorsFileBytes(const std::vector<TensorToWrite> &tensors,
                              const TensorMetadata &metadata);
/// Writes the file through `output` (reserved: a temporary, fsynced and
/// renamed over the path); false with `error` on failure, the previous
/// file unchanged.
bool writeSafeTensors(const std::vector<TensorToWrite> &tensors,
                      const TensorMetadata &metadata, OutputFile &output,
                      std::string &error);
/// Reserves `path` and writes it.
bool writeSafeTensorsFile(const std::string &path,
                          const std::vector<TensorToWrite> &tensors,
                          const TensorMetadata &metadata, std::string &error);

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_SAFETENSORS_H
