//===- Weights.cpp - --init-from and --export -----------------------------===//

#include "fsdp/runtime/io/Weights.h"

#include "io/WeightNames.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

namespace fsdp::rt {

/// A file tensor that holds some of a parameter's rows.
struct InitialWeights::Source {
  WeightTensor view;
  const TensorInfo *tensor = nullptr;
  int64_t columns = 1; ///< elements per row of the parameter
};

namespace {
std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

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

/// Hugging Face's names when any of the file's tensors has one, else ours.
WeightNaming detectNaming(const Plan &plan, ModelFamily family,
                          const SafeTensorsReader &file) {
  std::vector<WeightTensor> hf;
  std::string why;
  if (!weightTensors(plan, family, WeightNaming::HuggingFace, hf, why))
    return WeightNaming::Ours;
  for (const TensorInfo &t : file.tensors())
    for (const WeightTensor &w : hf)
      if (w.key == hfKey(family, t.name))
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
std::string conversions(const SafeTensorsReader &file) {
  std::string text;
  for (TensorDType d :
       {TensorDType::BF16, TensorDType::F16, TensorDType::F64}) {
    bool any = std::any_of(file.tensors().begin(), file.tensors().end(),
                           [&](const TensorInfo &t) { return t.dtype == d; });
    if (any)
      text += std::string(", ") + dtypeName(d) +
              (d == TensorDType::F64 ? " rounded" : " widened") + " to f32";
  }
  return text;
}
} // namespace

InitialWeights::InitialWeights() = default;
InitialWeights::~InitialWeights() = default;

bool InitialWeights::open(const Plan &plan, const std::string &path,
                          std::string &error) {
  if (!file.open(path, error))
    return false;
  ModelFamily family = detectFamily(plan);
  WeightNaming naming = detectNaming(plan, family, file);
  std::vector<WeightTensor> want;
  weightTensors(plan, family, naming, want, error); // ours never fails
  std::map<std::string, size_t> byKey;
  for (size_t i = 0; i < want.size(); ++i)
    byKey[want[i].key] = i;
  std::vector<const TensorInfo *> found(want.size(), nullptr);
  Mismatches problems;
  for (const TensorInfo &t : file.tensors()) {
    std::string key =
        naming == WeightNaming::Ours ? t.name : hfKey(family, t.name);
    auto at = byKey.find(key);
    if (at != byKey.end() && !found[at->second]) {
      fits(t, want[at->second], problems); // a misfit is not missing too
      found[at->second] = &t;
    } else if (naming == WeightNaming::HuggingFace &&
               isHFBuffer(plan, family, key, t.shape))
      problems.skipped.push_back(t.name);
    else
      problems.extra.push_back(t.name);
  }
  for (size_t i = 0; i < want.size(); ++i)
    if (!found[i])
      problems.missing.push_back(want[i].name);
  if (!problems.empty()) {
    error = path + ": does not match the plan's parameters (" +
            namingText(naming, family) + "): " + problems.text();
    file.close();
    return false;
  }
  sources.assign(plan.params.size(), {});
  paramNames.clear();
  for (const ParamDesc &p : plan.params)
    paramNames.push_back(p.name);
  for (size_t i = 0; i < want.size(); ++i) {
    const ParamDesc &p = plan.params[want[i].param];
    int64_t rows = p.shape.empty() ? 1 : p.shape[0];
    sources[want[i].param].push_back(
        {want[i], found[i], rows ? p.numElements() / rows : 0});
  }
  note = std::to_string(file.tensors().size()) + " tensors, " +
         namingText(naming, family) + conversions(file);
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
    error = file.path() + ": tensor '" + tensor + "' holds " +
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
      file.readFloats(*s.tensor, lo - first, hi - lo, 1, out + (lo - begin));
      continue;
    }
    // The file holds [columns, rows]: each of our rows is a column there,
    // read with a stride of `rows`.
    for (int64_t r = lo / cols; r * cols < hi; ++r) {
      int64_t c0 = std::max(lo, r * cols) - r * cols;
      int64_t c1 = std::min(hi, (r + 1) * cols) - r * cols;
      file.readFloats(*s.tensor, c0 * s.view.rows + (r - s.view.rowBegin),
                      c1 - c0, s.view.rows, out + (r * cols + c0 - begin));
    }
  }
  return reportNonFinite(param, begin, count, out, error);
}

void InitialWeights::close() {
  file.close();
  sources.clear();
}

std::vector<TensorToWrite>
exportTensors(const Plan &plan, WeightNaming naming,
              const std::vector<std::vector<float>> *params) {
  std::vector<WeightTensor> views;
  std::string why;
  weightTensors(plan, detectFamily(plan), naming, views, why);
  std::vector<TensorToWrite> tensors;
  for (const WeightTensor &v : views) {
    TensorToWrite t{v.name, TensorDType::F32, v.shape, nullptr};
    if (params)
      t.fill = [v, params, &plan](char *bytes) {
        const std::vector<int64_t> &shape = plan.params[v.param].shape;
        int64_t rows = shape.empty() ? 1 : shape[0];
        int64_t cols = rows ? int64_t((*params)[v.param].size()) / rows : 0;
        const float *in = (*params)[v.param].data() + v.rowBegin * cols;
        auto *out = reinterpret_cast<float *>(bytes);
        if (!v.transposed) {
          std::memcpy(out, in, size_t(v.rows * cols) * sizeof(float));
          return;
        }
        for (int64_t r = 0; r < v.rows;
             ++r) // ours [rows, cols] -> [cols, rows]
          for (int64_t c = 0; c < cols; ++c)
            out[c * v.rows + r] = in[r * cols + c];
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

bool writeWeights(const Plan &plan, WeightNaming naming,
                  const std::vector<std::vector<float>> &params,
                  OutputFile &output, std::string &error) {
  return writeSafeTensors(exportTensors(plan, naming, &params),
                          exportMetadata(plan, naming), output, error);
}

} // namespace fsdp::rt
