//===- Weights.h - full weights in and out as safetensors -------*- C++ -*-===//
//
// `fsdp-run --init-from FILE` starts from a file's weights instead of the
// initializers, `--export FILE` writes the trained weights: full
// (unsharded) tensors, by the plan's parameter names or by Hugging Face's
// (src/io/WeightNames.cpp has both and the transposes and splits between
// them; docs/runtime.md lists them). Loading matches every tensor of the
// file to the plan first, and a file that does not fit is one error
// naming what is missing, extra or mis-shaped; each rank then reads only
// its shard's elements from the mapped file.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_WEIGHTS_H
#define FSDP_RUNTIME_WEIGHTS_H

#include "fsdp/runtime/exec/Session.h"
#include "fsdp/runtime/io/SafeTensors.h"
#include "fsdp/runtime/plan/Plan.h"

#include <memory>
#include <string>
#include <vector>

namespace fsdp::rt {

/// What a plan's parameter names say it is: GPT-2 and Llama (fsdp-gen's)
/// have Hugging Face names, an MLP and any other model only ours.
enum class ModelFamily { GPT2, Llama, MLP, Unknown };
const char *familyName(ModelFamily family);
ModelFamily detectFamily(const Plan &plan);

enum class WeightNaming { Ours, HuggingFace };

/// The names --export writes: `requested` "hf", "ours", or "" (not
/// given: Hugging Face's where the family has them, else ours). False
/// with `error` when "hf" is asked of a family without them.
bool chooseExportNaming(const Plan &plan, const std::string &requested,
                        WeightNaming &naming, std::string &error);

/// The tensors --export writes, in plan order, with `params` (the
/// gathered parameters, in plan order; null: for sizing only, no data).
std::vector<TensorToWrite>
exportTensors(const Plan &plan, WeightNaming naming,
              const std::vector<std::vector<float>> *params);
/// The header's metadata: "format": "pt" (what transformers asks of a
/// file), the family and the names.
TensorMetadata exportMetadata(const Plan &plan, WeightNaming naming);
/// Writes `params` through a reserved output.
bool writeWeights(const Plan &plan, WeightNaming naming,
                  const std::vector<std::vector<float>> &params,
                  OutputFile &output, std::string &error);

/// A weights file matched to a plan, for --init-from.
class InitialWeights : public ParamSource {
public:
  InitialWeights();
  ~InitialWeights() override;
  /// Maps and checks `path` and matches it to `plan`: every parameter
  /// found with its shape and a float dtype, nothing else in the file but
  /// the non-parameter buffers a Hugging Face file carries. False with
  /// one error naming the file and every mismatch (a few of each kind and
  /// a count).
  bool open(const Plan &plan, const std::string &path, std::string &error);
  /// One line for the log: the names, what was converted or skipped.
  const std::string &summary() const { return note; }
  uint64_t fingerprint() const { return file.fingerprint(); }
  /// Elements [begin, begin + count) of parameter `param` (plan order),
  /// read from the file (only their bytes). False with `error` when one
  /// is a NaN or an infinity (a corrupt file, or a diverged run's
  /// weights: nothing to train from).
  bool read(uint32_t param, int64_t begin, int64_t count, float *out,
            std::string &error) const override;
  /// Unmaps the file (its pages would count in the resident set).
  void close();

private:
  struct Source;
  bool reportNonFinite(uint32_t param, int64_t begin, int64_t count,
                       const float *values, std::string &error) const;
  SafeTensorsReader file;
  std::vector<std::string> paramNames;
  /// Per parameter, the file's tensors that hold its elements.
  std::vector<std::vector<Source>> sources;
  std::string note;
};

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_WEIGHTS_H
