//===- Weights.cpp - --init-from and --export -----------------------------===//

#include "fsdp/runtime/io/Weights.h"

#include "fsdp/runtime/support/BFloat16.h"
#include "fsdp/runtime/support/OutputFile.h"
#include "fsdp/runtime/support/RegularFile.h"
#include "io/SafeTensorsHeader.h"
#include "io/WeightNames.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <map>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace fsdp::rt {

/// A file tensor that holds some of a parameter's rows.
struct InitialWeights::Source {
  WeightTensor view;
  const SafeTensorsReader *file = nullptr;
  const TensorInfo *tensor = nullptr;
  int64_t columns = 1; ///< elements per row of the parameter
};

namespace {
/// "3 missing (a, b, c)": the first few and how many more.
std::string listed(const std::vector<std::string> &items, const char *what) {
  constexpr size_t kShown = 4;
  std::string text = std::to_string(items.size()) + " " + what + " (";
  for (size_t i = 0; i < items.size() && i < kShown; ++i)
    text += (i ? ", " : "") + items[i];
  if (items.size() > kShown)
    text += " and " + std::to_string(items.size() - kShown) + " more";
  return text + ")";
}

/// What matching a file to the plan found wrong, and what it skipped.
struct Mismatches {
  std::vector<std::string> missing, extra, misshaped, skipped;
  bool empty() const {
    return missing.empty() && extra.empty() && misshaped.empty();
  }
  std::string text() const {
    std::string out;
    for (auto [items, what] :
         {std::pair{&missing, "missing"},
          {&extra, "extra"},
          {&misshaped, "mis-shaped or not floating-point"}})
      if (!items->empty())
        out += (out.empty() ? "" : ", ") + listed(*items, what);
    return out;
  }
};

const char *namingText(WeightNaming naming, ModelFamily family) {
  if (naming == WeightNaming::Ours)
    return "our names";
  return family == ModelFamily::GPT2 ? "Hugging Face GPT-2 names"
                                     : "Hugging Face Llama names";
}

/// A file's tensor, with the file it is in.
struct FileTensor {
  const SafeTensorsReader *file;
  const TensorInfo *tensor;
};

/// Hugging Face's names when any of the files' tensors has one, else ours.
WeightNaming detectNaming(const Plan &plan, ModelFamily family,
                          const std::vector<FileTensor> &tensors) {
  std::vector<WeightTensor> hf;
  std::string why;
  if (!weightTensors(plan, family, WeightNaming::HuggingFace, hf, why))
    return WeightNaming::Ours;
  std::set<std::string> keys;
  for (const WeightTensor &w : hf)
    keys.insert(w.key);
  for (const FileTensor &t : tensors)
    if (keys.count(hfKey(family, t.tensor->name)))
      return WeightNaming::HuggingFace;
  return WeightNaming::Ours;
}

/// Whether `t` can be `want`: the same shape, a float dtype.
bool fits(const TensorInfo &t, const WeightTensor &want, Mismatches &problems) {
  if (t.shape == want.shape && isFloatDType(t.dtype))
    return true;
  problems.misshaped.push_back(t.name + ": " + dtypeName(t.dtype) + " " +
                               shapeText(t.shape) + " in the file, " +
                               shapeText(want.shape) + " expected");
  return false;
}

/// The converted dtypes, for the log ("BF16 widened to f32").
std::string conversions(const std::vector<FileTensor> &tensors) {
  std::string text;
  for (TensorDType d :
       {TensorDType::BF16, TensorDType::F16, TensorDType::F64}) {
    bool any =
        std::any_of(tensors.begin(), tensors.end(),
                    [&](const FileTensor &t) { return t.tensor->dtype == d; });
    if (any)
      text += std::string(", ") + dtypeName(d) +
              (d == TensorDType::F64 ? " rounded" : " widened") + " to f32";
  }
  return text;
}

constexpr const char *kSingleName = "model.safetensors";
constexpr const char *kIndexName = "model.safetensors.index.json";
/// An index larger than this is no index (a trillion-parameter model's
/// is a few MB).
constexpr uint64_t kMaxIndexBytes = 256ull << 20;

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool isDirectory(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

bool exists(const std::string &path) {
  struct stat info;
  return lstat(path.c_str(), &info) == 0;
}

std::string directoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

std::string joinPath(const std::string &dir, const std::string &name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}
} // namespace

InitialWeights::InitialWeights() = default;
InitialWeights::~InitialWeights() = default;

uint64_t InitialWeights::fingerprint() const {
  uint64_t h = 0xCBF29CE484222325ull;
  for (const auto &f : files)
    h = (h ^ f->fingerprint()) * 0x100000001B3ull;
  return h;
}

/// Opens one file, or the index and every shard it names, checking the
/// shards' tensors against the index.
bool InitialWeights::openFiles(const std::string &given, std::string &error) {
  files.clear();
  indexPath.clear();
  std::string path = given;
  if (isDirectory(path)) {
    if (exists(joinPath(path, kSingleName)))
      path = joinPath(path, kSingleName);
    else if (exists(joinPath(path, kIndexName)))
      path = joinPath(path, kIndexName);
    else {
      error = path + ": a directory without " + kSingleName + " or " +
              kIndexName + " (a checkpoint directory has one of them)";
      return false;
    }
  }
  if (!endsWith(path, ".index.json")) {
    files.push_back(std::make_unique<SafeTensorsReader>());
    return files.back()->open(path, error);
  }
  indexPath = path;
  std::string text, why;
  if (!readRegularFile(path, "checkpoint index", kMaxIndexBytes, text, why)) {
    error = why;
    return false;
  }
  std::vector<std::pair<std::string, std::string>> map;
  if (!parseSafeTensorsIndex(text.data(), text.size(), map, why)) {
    error = path + ": not a safetensors index: " + why;
    return false;
  }
  // Shards in the order the index first names them; each tensor's shard.
  std::map<std::string, size_t> shardOf, tensorShard;
  std::vector<std::string> shardNames;
  for (const auto &[tensor, file] : map) {
    auto [at, added] = shardOf.emplace(file, shardNames.size());
    if (added)
      shardNames.push_back(file);
    tensorShard[tensor] = at->second;
  }
  const std::string dir = directoryOf(path);
  for (const std::string &name : shardNames) {
    files.push_back(std::make_unique<SafeTensorsReader>());
    if (!files.back()->open(joinPath(dir, name), error)) {
      error += " (a shard " + path + " names)";
      return false;
    }
  }
  for (size_t i = 0; i < files.size(); ++i) {
    std::set<std::string> held;
    for (const TensorInfo &t : files[i]->tensors()) {
      held.insert(t.name);
      auto at = tensorShard.find(t.name);
      if (at == tensorShard.end() || at->second != i) {
        error =
            files[i]->path() + ": holds tensor '" + t.name +
            "', which the index " +
            (at == tensorShard.end() ? std::string("does not list")
                                     : "maps to " + shardNames[at->second]) +
            ": the shard and " + path + " disagree";
        return false;
      }
    }
    for (const auto &[tensor, shard] : tensorShard)
      if (shard == i && !held.count(tensor)) {
        error = path + ": maps tensor '" + tensor + "' to " + shardNames[i] +
                ", which does not hold it: the shard and the index disagree";
        return false;
      }
  }
  return true;
}

bool InitialWeights::open(const Plan &plan, const std::string &path,
                          std::string &error) {
  if (!openFiles(path, error)) {
    close();
    return false;
  }
  const std::string where = indexPath.empty() ? files[0]->path() : indexPath;
  std::vector<FileTensor> all;
  for (const auto &f : files)
    for (const TensorInfo &t : f->tensors())
      all.push_back({f.get(), &t});
  ModelFamily family = detectFamily(plan);
  WeightNaming naming = detectNaming(plan, family, all);
  std::vector<WeightTensor> want;
  weightTensors(plan, family, naming, want, error); // ours never fails
  std::map<std::string, size_t> byKey;
  for (size_t i = 0; i < want.size(); ++i)
    byKey[want[i].key] = i;
  std::vector<FileTensor> found(want.size(), FileTensor{nullptr, nullptr});
  Mismatches problems;
  for (const FileTensor &ft : all) {
    const TensorInfo &t = *ft.tensor;
    std::string key =
        naming == WeightNaming::Ours ? t.name : hfKey(family, t.name);
    auto at = byKey.find(key);
    if (at != byKey.end() && !found[at->second].tensor) {
      fits(t, want[at->second], problems); // a misfit is not missing too
      found[at->second] = ft;
    } else if (naming == WeightNaming::HuggingFace &&
               isHFBuffer(plan, family, key, t.shape))
      problems.skipped.push_back(t.name);
    else
      problems.extra.push_back(t.name);
  }
  for (size_t i = 0; i < want.size(); ++i)
    if (!found[i].tensor)
      problems.missing.push_back(want[i].name);
  if (!problems.empty()) {
    error = where + ": does not match the plan's parameters (" +
            namingText(naming, family) + "): " + problems.text();
    close();
    return false;
  }
  sources.assign(plan.params.size(), {});
  paramNames.clear();
  for (const ParamDesc &p : plan.params)
    paramNames.push_back(p.name);
  for (size_t i = 0; i < want.size(); ++i) {
    const ParamDesc &p = plan.params[want[i].param];
    int64_t rows = p.shape.empty() ? 1 : p.shape[0];
    sources[want[i].param].push_back({want[i], found[i].file, found[i].tensor,
                                      rows ? p.numElements() / rows : 0});
  }
  note = std::to_string(all.size()) + " tensors";
  if (!indexPath.empty())
    note += " in " + std::to_string(files.size()) + " shards";
  note += ", " + std::string(namingText(naming, family)) + conversions(all);
  if (!problems.skipped.empty())
    note += "; skipped " + listed(problems.skipped, "non-parameter tensors");
  return true;
}

bool InitialWeights::reportNonFinite(uint32_t param, int64_t begin,
                                     int64_t count, const float *values,
                                     std::string &error) const {
  for (int64_t i = 0; i < count; ++i) {
    if (std::isfinite(values[i]))
      continue;
    const int64_t element = begin + i;
    std::string tensor;
    for (const Source &s : sources[param])
      if (element >= s.view.rowBegin * s.columns &&
          element < (s.view.rowBegin + s.view.rows) * s.columns)
        tensor = s.tensor->name;
    std::string path;
    for (const Source &s : sources[param])
      if (s.tensor->name == tensor)
        path = s.file->path();
    error = path + ": tensor '" + tensor + "' holds " +
            (std::isnan(values[i]) ? "a NaN" : "an infinity") + " (element " +
            std::to_string(element) + " of parameter '" + paramNames[param] +
            "'): a corrupt file, or the weights of a diverged run";
    return false;
  }
  return true;
}

bool InitialWeights::read(uint32_t param, int64_t begin, int64_t count,
                          float *out, std::string &error) const {
  for (const Source &s : sources[param]) {
    const int64_t cols = s.columns, first = s.view.rowBegin * cols;
    const int64_t lo = std::max(begin, first);
    const int64_t hi = std::min(begin + count, first + s.view.rows * cols);
    if (lo >= hi)
      continue;
    if (!s.view.transposed) {
      s.file->readFloats(*s.tensor, lo - first, hi - lo, 1, out + (lo - begin));
      continue;
    }
    // The file holds [columns, rows]: each of our rows is a column there,
    // read with a stride of `rows`.
    for (int64_t r = lo / cols; r * cols < hi; ++r) {
      int64_t c0 = std::max(lo, r * cols) - r * cols;
      int64_t c1 = std::min(hi, (r + 1) * cols) - r * cols;
      s.file->readFloats(*s.tensor, c0 * s.view.rows + (r - s.view.rowBegin),
                         c1 - c0, s.view.rows, out + (r * cols + c0 - begin));
    }
  }
  return reportNonFinite(param, begin, count, out, error);
}

void InitialWeights::close() {
  files.clear();
  sources.clear();
}

std::vector<TensorToWrite>
exportTensors(const Plan &plan, WeightNaming naming,
              const std::vector<std::vector<float>> *params,
              TensorDType dtype) {
  std::vector<WeightTensor> views;
  std::string why;
  weightTensors(plan, detectFamily(plan), naming, views, why);
  std::vector<TensorToWrite> tensors;
  for (const WeightTensor &v : views) {
    TensorToWrite t{v.name, dtype, v.shape, nullptr};
    if (params)
      t.fill = [v, params, &plan, dtype](char *bytes) {
        // The gathered values are the full parameter's (of every expert
        // slice: Session::gatherParams), its rows the full shape's.
        const std::vector<int64_t> shape = plan.params[v.param].fullShape();
        int64_t rows = shape.empty() ? 1 : shape[0];
        int64_t cols = rows ? int64_t((*params)[v.param].size()) / rows : 0;
        const float *in = (*params)[v.param].data() + v.rowBegin * cols;
        const size_t n = size_t(v.rows * cols);
        std::vector<float> staged;
        float *out = reinterpret_cast<float *>(bytes);
        if (dtype != TensorDType::F32) {
          staged.resize(n);
          out = staged.data();
        }
        if (!v.transposed)
          std::memcpy(out, in, n * sizeof(float));
        else // ours [rows, cols] -> [cols, rows]
          for (int64_t r = 0; r < v.rows; ++r)
            for (int64_t c = 0; c < cols; ++c)
              out[c * v.rows + r] = in[r * cols + c];
        if (dtype == TensorDType::BF16)
          for (size_t i = 0; i < n; ++i) { // nearest, ties to even
            uint16_t b = roundToBF16(out[i]);
            std::memcpy(bytes + 2 * i, &b, 2);
          }
      };
    tensors.push_back(std::move(t));
  }
  return tensors;
}

TensorMetadata exportMetadata(const Plan &plan, WeightNaming naming) {
  return {{"format", "pt"},
          {"fsdp_family", familyName(detectFamily(plan))},
          {"fsdp_names", naming == WeightNaming::Ours ? "ours" : "hf"}};
}

bool exportIsDirectory(const std::string &path) {
  if (path.empty())
    return false;
  if (isDirectory(path) || path.back() == '/')
    return true;
  size_t slash = path.rfind('/');
  std::string last = slash == std::string::npos ? path : path.substr(slash + 1);
  return last.find('.', 1) == std::string::npos;
}

bool parseByteSize(const std::string &text, uint64_t &bytes, std::string &why) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9')
    ++digits;
  std::string unit = text.substr(digits);
  static const std::pair<const char *, uint64_t> kUnits[] = {
      {"", 1},
      {"B", 1},
      {"KB", 1000},
      {"MB", 1000000},
      {"GB", 1000000000},
      {"TB", 1000000000000},
      {"KiB", 1ull << 10},
      {"MiB", 1ull << 20},
      {"GiB", 1ull << 30},
      {"TiB", 1ull << 40}};
  const uint64_t *scale = nullptr;
  for (const auto &[name, factor] : kUnits)
    if (unit == name)
      scale = &factor;
  uint64_t n = 0;
  bool overflow = false;
  for (size_t i = 0; i < digits; ++i)
    overflow |= __builtin_mul_overflow(n, 10, &n) ||
                __builtin_add_overflow(n, uint64_t(text[i] - '0'), &n);
  if (!digits || !scale || overflow ||
      __builtin_mul_overflow(n, *scale, &bytes) || bytes == 0) {
    why = "'" + text +
          "' is not a positive size (digits, then B, KB, MB, GB, KiB, MiB "
          "or GiB: 5GB, 500MB, 64KiB)";
    return false;
  }
  return true;
}

std::vector<std::string> shardFileNames(size_t count) {
  if (count == 1)
    return {kSingleName};
  std::vector<std::string> names;
  for (size_t i = 1; i <= count; ++i) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", i,
                  count);
    names.push_back(name);
  }
  return names;
}

namespace {
/// A weights file of an earlier export, which a new one replaces: the
/// one-file name, the index, and shard names.
bool isExportedWeightsFile(const std::string &name) {
  if (name == kSingleName || name == kIndexName)
    return true;
  unsigned a, b;
  char tail[32];
  return name.size() == std::strlen("model-00001-of-00001.safetensors") &&
         std::sscanf(name.c_str(), "model-%5u-of-%5u.%31s", &a, &b, tail) ==
             3 &&
         std::strcmp(tail, "safetensors") == 0;
}

const char *hfDTypeName(TensorDType dtype) {
  return dtype == TensorDType::BF16 ? "bfloat16" : "float32";
}
} // namespace

/// The shards' tensors and files, the index and config.json.
struct WeightsExport::Files {
  std::vector<std::vector<size_t>> shards; ///< tensor indices per shard
  std::vector<std::string> names;
  std::vector<std::unique_ptr<OutputFile>> outputs;
  OutputFile one, index, config;
  std::string indexText, configText;
};

WeightsExport::WeightsExport() = default;
WeightsExport::~WeightsExport() = default;

namespace {
/// Makes `path` the export directory (creating it if absent); an existing
/// non-directory or a symbolic link there is an error.
bool prepareExportDirectory(const std::string &path, std::string &error) {
  struct stat info;
  if (lstat(path.c_str(), &info) == 0 && !S_ISDIR(info.st_mode)) {
    // A symbolic link to a directory is not followed (as no output is).
    error = path + ": " +
            (S_ISLNK(info.st_mode) ? "is a symbolic link"
                                   : "exists and is not a directory") +
            "; --export writes a directory here (name the path "
            "NAME.safetensors for one file)";
    return false;
  }
  // Missing parents too, as save_pretrained's os.makedirs does: each
  // prefix up to a '/', then the directory itself.
  for (size_t end = path.find('/', 1);; end = path.find('/', end + 1)) {
    std::string prefix = path.substr(0, end);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      error = path + ": cannot create the export directory" +
              (end == std::string::npos ? "" : " (at " + prefix + ")") + ": " +
              std::strerror(errno);
      return false;
    }
    if (end == std::string::npos)
      return true;
  }
}

/// Hugging Face's rule (split_torch_state_dict_into_shards): tensors in
/// order, a new shard when the next would take this one past `shardBytes`.
/// Returns the tensor indices per shard; `total` is every tensor's bytes.
std::vector<std::vector<size_t>>
splitIntoShards(const std::vector<TensorToWrite> &tensors, uint64_t shardBytes,
                uint64_t &total) {
  std::vector<std::vector<size_t>> shards;
  uint64_t inShard = 0;
  total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    uint64_t bytes = dtypeBytes(tensors[i].dtype);
    for (int64_t d : tensors[i].shape)
      bytes *= uint64_t(d);
    total += bytes;
    if (shards.empty() || (inShard > 0 && inShard + bytes > shardBytes)) {
      shards.emplace_back();
      inShard = 0;
    }
    shards.back().push_back(i);
    inShard += bytes;
  }
  return shards;
}
} // namespace

bool WeightsExport::reserveShards(const std::vector<TensorToWrite> &tensors,
                                  const TensorMetadata &metadata,
                                  std::string &error) {
  uint64_t total = 0;
  files->shards = splitIntoShards(tensors, spec.shardBytes, total);
  files->names = shardFileNames(files->shards.size());
  for (size_t s = 0; s < files->shards.size(); ++s) {
    std::vector<TensorToWrite> part;
    for (size_t i : files->shards[s])
      part.push_back(tensors[i]);
    files->outputs.push_back(std::make_unique<OutputFile>());
    if (!files->outputs.back()->reserve(
            joinPath(spec.path, files->names[s]), "weights",
            safeTensorsFileBytes(part, metadata), error))
      return false;
  }
  if (files->shards.size() == 1)
    return true;
  std::vector<std::pair<std::string, std::string>> map;
  for (size_t s = 0; s < files->shards.size(); ++s)
    for (size_t i : files->shards[s])
      map.emplace_back(tensors[i].name, files->names[s]);
  files->indexText = emitSafeTensorsIndex(total, map);
  return files->index.reserve(joinPath(spec.path, kIndexName), "weights index",
                              files->indexText.size(), error);
}

bool WeightsExport::reserveConfig(const Plan &plan, std::string &error) {
  if (plan.modelConfig.empty()) {
    noConfig = "the plan carries no Hugging Face config (a model fsdp-gen "
               "did not write; fsdp-gen's GPT-2 and Llama carry theirs)";
    return true;
  }
  if (spec.naming != WeightNaming::HuggingFace) {
    noConfig = "the weights have our names, which transformers does not "
               "read (--export-names hf)";
    return true;
  }
  std::string why;
  if (!configWithDType(plan.modelConfig, hfDTypeName(spec.dtype),
                       files->configText, why)) {
    error = spec.path + ": " + why;
    return false;
  }
  return files->config.reserve(joinPath(spec.path, "config.json"),
                               "model config", files->configText.size(), error);
}

bool WeightsExport::reserve(const Plan &plan, const ExportSpec &given,
                            std::string &error) {
  spec = given;
  files = std::make_unique<Files>();
  directory = exportIsDirectory(spec.path);
  while (directory && spec.path.size() > 1 && spec.path.back() == '/')
    spec.path.pop_back(); // "out/model/" is the directory out/model
  std::vector<TensorToWrite> tensors =
      exportTensors(plan, spec.naming, nullptr, spec.dtype);
  TensorMetadata metadata = exportMetadata(plan, spec.naming);
  if (!directory) {
    reserved = files->one.reserve(
        spec.path, "weights", safeTensorsFileBytes(tensors, metadata), error);
    return reserved;
  }
  reserved = prepareExportDirectory(spec.path, error) &&
             reserveShards(tensors, metadata, error) &&
             reserveConfig(plan, error);
  return reserved;
}

bool WeightsExport::write(const Plan &plan,
                          const std::vector<std::vector<float>> &params,
                          std::string &error) {
  std::vector<TensorToWrite> tensors =
      exportTensors(plan, spec.naming, &params, spec.dtype);
  TensorMetadata metadata = exportMetadata(plan, spec.naming);
  if (!directory)
    return writeSafeTensors(tensors, metadata, files->one, error);
  for (size_t s = 0; s < files->shards.size(); ++s) {
    std::vector<TensorToWrite> part;
    for (size_t i : files->shards[s])
      part.push_back(tensors[i]);
    if (!writeSafeTensors(part, metadata, *files->outputs[s], error))
      return false;
  }
  auto text = [](const std::string &t) {
    return [&t](std::ostream &out) {
      out.write(t.data(), std::streamsize(t.size()));
    };
  };
  if (files->index.active() &&
      !files->index.write(text(files->indexText), error))
    return false;
  if (files->config.active() &&
      !files->config.write(text(files->configText), error))
    return false;
  // An older export's weights files this one does not name: transformers
  // would load a stale model.safetensors before the new index.
  std::set<std::string> written(files->names.begin(), files->names.end());
  if (files->shards.size() > 1)
    written.insert(kIndexName);
  if (DIR *dir = opendir(spec.path.c_str())) {
    std::vector<std::string> stale;
    while (dirent *entry = readdir(dir))
      if (isExportedWeightsFile(entry->d_name) && !written.count(entry->d_name))
        stale.push_back(entry->d_name);
    closedir(dir);
    for (const std::string &name : stale)
      unlink(joinPath(spec.path, name).c_str());
  }
  return true;
}

std::string WeightsExport::summary() const {
  // f32 unsaid, as before --export-dtype.
  std::string dtype = spec.dtype == TensorDType::F32
                          ? ""
                          : std::string(" (") + dtypeName(spec.dtype) + ")";
  if (!directory)
    return spec.path + dtype;
  size_t n = files->shards.size();
  std::string text = n == 1 ? std::string(kSingleName)
                            : std::to_string(n) + " shards of at most " +
                                  std::to_string(spec.shardBytes) +
                                  " bytes and " + kIndexName;
  text += files->configText.empty() ? "" : ", config.json";
  return text + " in " + spec.path + dtype;
}

} // namespace fsdp::rt
