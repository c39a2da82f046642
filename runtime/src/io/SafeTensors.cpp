//===- SafeTensors.cpp - safetensors files mapped, checked and written ----===//
//
// The format's binary half: the mapping, the checks of the offsets against
// the data, the element conversions and the writer. The JSON half is in
// SafeTensorsJson.cpp (SafeTensorsNoJson.cpp in a build without
// nlohmann-json).
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/io/SafeTensors.h"
#include "fsdp/runtime/support/OutputFile.h"

#include "fsdp/runtime/support/BFloat16.h"
#include "fsdp/runtime/support/RegularFile.h"
#include "io/SafeTensorsHeader.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fsdp::rt {
namespace {
struct DTypeInfo {
  TensorDType dtype;
  const char *name;
  uint64_t bytes;
};
constexpr DTypeInfo kDTypes[] = {
    {TensorDType::Bool, "BOOL", 1},      {TensorDType::U8, "U8", 1},
    {TensorDType::I8, "I8", 1},          {TensorDType::F8E4M3, "F8_E4M3", 1},
    {TensorDType::F8E5M2, "F8_E5M2", 1}, {TensorDType::I16, "I16", 2},
    {TensorDType::U16, "U16", 2},        {TensorDType::F16, "F16", 2},
    {TensorDType::BF16, "BF16", 2},      {TensorDType::I32, "I32", 4},
    {TensorDType::U32, "U32", 4},        {TensorDType::F32, "F32", 4},
    {TensorDType::I64, "I64", 8},        {TensorDType::U64, "U64", 8},
    {TensorDType::F64, "F64", 8},
};

/// The reference library's limit: a larger header is refused before it
/// is parsed.
constexpr uint64_t kMaxHeaderBytes = 100000000;

uint64_t fnv1a(const unsigned char *p, uint64_t n, uint64_t h) {
  for (uint64_t i = 0; i < n; ++i)
    h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}

/// IEEE binary16 to binary32, exactly (subnormals, infinities, NaNs).
float widenF16(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1Fu,
           mantissa = h & 0x3FFu;
  if (exponent == 0) { // zero or subnormal: mantissa x 2^-24
    float value = std::ldexp(float(mantissa), -24);
    return sign ? -value : value;
  }
  uint32_t word = exponent == 0x1F
                      ? sign | 0x7F800000u | (mantissa << 13)
                      : sign | ((exponent + 112) << 23) | (mantissa << 13);
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}

/// Bytes of one tensor: numElements x its dtype's size, or false when
/// that overflows 64 bits.
bool tensorBytes(const TensorInfo &t, uint64_t &bytes) {
  int64_t elements = t.numElements();
  return elements >= 0 && !__builtin_mul_overflow(uint64_t(elements),
                                                  dtypeBytes(t.dtype), &bytes);
}

/// Each tensor's size against its offsets and the data section.
bool checkSizes(const std::vector<TensorInfo> &tensors, uint64_t dataBytes,
                std::string &why) {
  for (const TensorInfo &t : tensors) {
    std::string offsets = "data_offsets [" + std::to_string(t.begin) + ", " +
                          std::to_string(t.end) + "]";
    uint64_t bytes;
    if (!tensorBytes(t, bytes))
      why = "its shape " + shapeText(t.shape) +
            " has more bytes than 64 "
            "bits count";
    else if (t.end < t.begin)
      why = offsets + " end before they begin";
    else if (t.end - t.begin != bytes)
      why = offsets + " hold " + std::to_string(t.end - t.begin) +
            " bytes, but " + dtypeName(t.dtype) + " " + shapeText(t.shape) +
            " is " + std::to_string(bytes);
    else if (t.end > dataBytes)
      why = offsets + " run past the data, which has " +
            std::to_string(dataBytes) + " bytes";
    else
      continue;
    why = "tensor '" + t.name + "': " + why;
    return false;
  }
  return true;
}

/// The tensors, in data order, tile the data section: no gap, no overlap,
/// nothing after the last (the reference library's rule).
bool checkTiling(std::vector<TensorInfo> &tensors, uint64_t dataBytes,
                 std::string &why) {
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const TensorInfo &a, const TensorInfo &b) {
                     return a.begin != b.begin ? a.begin < b.begin
                                               : a.end < b.end;
                   });
  uint64_t at = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo &t = tensors[i];
    if (t.begin < at) {
      why = "tensor '" + t.name + "' overlaps '" + tensors[i - 1].name +
            "' (bytes " + std::to_string(t.begin) + " to " +
            std::to_string(std::min(at, t.end)) + " of the data)";
      return false;
    }
    if (t.begin > at) {
      why = "bytes " + std::to_string(at) + " to " + std::to_string(t.begin) +
            " of the data, before tensor '" + t.name + "', belong to no tensor";
      return false;
    }
    at = t.end;
  }
  if (at != dataBytes) {
    why = std::to_string(dataBytes - at) +
          " bytes after the last tensor belong to no tensor";
    return false;
  }
  return true;
}
} // namespace

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

const char *dtypeName(TensorDType dtype) {
  for (const DTypeInfo &d : kDTypes)
    if (d.dtype == dtype)
      return d.name;
  return "?";
}

bool parseDTypeName(const std::string &name, TensorDType &dtype) {
  for (const DTypeInfo &d : kDTypes)
    if (name == d.name) {
      dtype = d.dtype;
      return true;
    }
  return false;
}

uint64_t dtypeBytes(TensorDType dtype) {
  for (const DTypeInfo &d : kDTypes)
    if (d.dtype == dtype)
      return d.bytes;
  return 0;
}

bool isFloatDType(TensorDType dtype) {
  return dtype == TensorDType::F16 || dtype == TensorDType::BF16 ||
         dtype == TensorDType::F32 || dtype == TensorDType::F64;
}

int64_t TensorInfo::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      return -1;
  return n;
}

std::string safeTensorsUnavailableReason() {
  return "this fsdp-run was built without nlohmann-json, which safetensors "
         "files need (install nlohmann-json3-dev and rebuild)";
}

SafeTensorsReader::~SafeTensorsReader() { close(); }

void SafeTensorsReader::close() {
  if (map)
    munmap(const_cast<unsigned char *>(map), mapBytes);
  map = nullptr;
  mapBytes = dataStart = headerHash = 0;
  entries.clear();
  meta.clear();
}

const TensorInfo *SafeTensorsReader::find(const std::string &name) const {
  for (const TensorInfo &t : entries)
    if (t.name == name)
      return &t;
  return nullptr;
}

bool SafeTensorsReader::open(const std::string &path, std::string &error) {
  close();
  filePath = path;
  std::string why;
  auto fail = [&](const std::string &reason) {
    close();
    error = path + ": " + reason;
    return false;
  };
  int fd = openRegularFile(path, "", why);
  if (fd < 0)
    return fail(why);
  struct stat info;
  if (fstat(fd, &info) != 0) {
    ::close(fd);
    return fail(std::string("cannot open: ") + std::strerror(errno));
  }
  uint64_t size = uint64_t(info.st_size);
  void *mapped = size >= 8 ? mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0)
                           : MAP_FAILED;
  int mapErrno = errno;
  ::close(fd);
  if (size < 8)
    return fail(std::to_string(size) + " bytes: too short for a safetensors "
                                       "file (8 bytes of header length, then "
                                       "the header)");
  if (mapped == MAP_FAILED)
    return fail(std::string("cannot map: ") + std::strerror(mapErrno));
  map = static_cast<const unsigned char *>(mapped);
  mapBytes = size;
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i) // little-endian whatever the host
    headerBytes = headerBytes << 8 | map[i];
  if (headerBytes > size - 8)
    return fail("the header length " + std::to_string(headerBytes) +
                " runs past the end of the file (" + std::to_string(size) +
                " bytes): truncated, or not a safetensors file");
  if (headerBytes > kMaxHeaderBytes)
    return fail("the header length " + std::to_string(headerBytes) +
                " is over the format's limit of " +
                std::to_string(kMaxHeaderBytes) + " bytes");
  if (!parseSafeTensorsHeader(reinterpret_cast<const char *>(map) + 8,
                              size_t(headerBytes), entries, meta, why) ||
      !checkSizes(entries, size - 8 - headerBytes, why) ||
      !checkTiling(entries, size - 8 - headerBytes, why))
    return fail(why);
  dataStart = 8 + headerBytes;
  headerHash = fnv1a(map, dataStart, 0xCBF29CE484222325ull ^ size);
  return true;
}

void SafeTensorsReader::readFloats(const TensorInfo &t, int64_t first,
                                   int64_t count, int64_t stride,
                                   float *out) const {
  const unsigned char *base = map + dataStart + t.begin;
  const uint64_t size = dtypeBytes(t.dtype);
  // memcpy per element: the format aligns nothing.
  auto at = [&](int64_t i) {
    return base + uint64_t(first + i * stride) * size;
  };
  for (int64_t i = 0; i < count; ++i) {
    switch (t.dtype) {
    case TensorDType::F32:
      std::memcpy(&out[i], at(i), 4);
      break;
    case TensorDType::BF16:
    case TensorDType::F16: {
      uint16_t bits;
      std::memcpy(&bits, at(i), 2);
      out[i] = t.dtype == TensorDType::BF16 ? widenBF16(bits) : widenF16(bits);
      break;
    }
    case TensorDType::F64: {
      double value;
      std::memcpy(&value, at(i), 8);
      out[i] = float(value);
      break;
    }
    default:
      out[i] = 0.0f; // not a float type: the caller checked isFloatDType
    }
  }
}

uint64_t safeTensorsFileBytes(const std::vector<TensorToWrite> &tensors,
                              const TensorMetadata &metadata) {
  uint64_t bytes = emitSafeTensorsHeader(tensors, metadata).size();
  bytes = 8 + (bytes + 7) / 8 * 8;
  for (const TensorToWrite &t : tensors) {
    uint64_t n = dtypeBytes(t.dtype);
    for (int64_t d : t.shape)
      n *= uint64_t(d);
    bytes += n;
  }
  return bytes;
}

bool writeSafeTensors(const std::vector<TensorToWrite> &tensors,
                      const TensorMetadata &metadata, OutputFile &output,
                      std::string &error) {
  if (!safeTensorsAvailable()) {
    error = safeTensorsUnavailableReason();
    return false;
  }
  std::string header = emitSafeTensorsHeader(tensors, metadata);
  // Spaces to a multiple of 8: the data (8 + header bytes on) then starts
  // 8-byte aligned, as the format suggests.
  header.resize((header.size() + 7) / 8 * 8, ' ');
  return output.write(
      [&](std::ostream &out) {
        unsigned char length[8];
        for (int i = 0; i < 8; ++i)
          length[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
        out.write(reinterpret_cast<const char *>(length), 8);
        out.write(header.data(), std::streamsize(header.size()));
        std::vector<char> bytes;
        for (const TensorToWrite &t : tensors) {
          uint64_t n = dtypeBytes(t.dtype);
          for (int64_t d : t.shape)
            n *= uint64_t(d);
          bytes.resize(n);
          t.fill(bytes.data());
          out.write(bytes.data(), std::streamsize(n));
        }
      },
      error);
}

bool writeSafeTensorsFile(const std::string &path,
                          const std::vector<TensorToWrite> &tensors,
                          const TensorMetadata &metadata, std::string &error) {
  if (!safeTensorsAvailable()) {
    error = path + ": " + safeTensorsUnavailableReason();
    return false;
  }
  OutputFile output;
  return output.reserve(path, "weights",
                        safeTensorsFileBytes(tensors, metadata), error) &&
         writeSafeTensors(tensors, metadata, output, error);
}

} // namespace fsdp::rt
