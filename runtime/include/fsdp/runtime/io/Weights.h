//===- Weights.h - full weights in and out as safetensors -------*- C++ -*-===//
//
// `fsdp-run --init-from PATH` starts from a checkpoint's weights instead of
// the initializers, `--export PATH` writes the trained weights: full
// (unsharded) tensors, by the plan's parameter names or by Hugging Face's
// (src/io/WeightNames.cpp has both and the transposes and splits between
// them; docs/runtime.md lists them). A checkpoint is one safetensors file
// or, as Hugging Face shards large models, a directory of shards with
// model.safetensors.index.json naming each tensor's file. Loading matches
// every tensor of every file to the plan first, and a checkpoint that does
// not fit is one error naming what is missing, extra or mis-shaped; each
// rank then reads only its shard's elements from the mapped files.
// Exporting to a directory writes what transformers' from_pretrained(DIR)
// loads: config.json (the plan's), the shards and their index.
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

/// The tensors --export writes, in plan order, as `dtype` (F32, or BF16
/// rounded to nearest even), with `params` (the gathered parameters, in
/// plan order; null: for sizing only, no data).
std::vector<TensorToWrite>
exportTensors(const Plan &plan, WeightNaming naming,
              const std::vector<std::vector<float>> *params,
              TensorDType dtype = TensorDType::F32);
/// The header's metadata: "format": "pt" (what transformers asks of a
/// file), the family and the names.
TensorMetadata exportMetadata(const Plan &plan, WeightNaming naming);

/// What --export writes: where, by which names, in which dtype, and for a
/// directory the largest shard (Hugging Face's max_shard_size).
struct ExportSpec {
  std::string path;
  WeightNaming naming = WeightNaming::HuggingFace;
  TensorDType dtype = TensorDType::F32;
  uint64_t shardBytes = 5000000000ull; ///< "5GB", save_pretrained's default
};

/// Whether --export PATH is a directory: an existing directory, a path
/// ending in '/', or one whose last component has no extension (no '.'
/// after its first character). Anything else is one safetensors file.
bool exportIsDirectory(const std::string &path);

/// A byte count as --export-shard-size takes it: digits with an optional
/// unit, Hugging Face's spellings (B, KB, MB, GB = 10^3..; KiB, MiB, GiB
/// = 2^10..). False with `why` otherwise, or for 0.
bool parseByteSize(const std::string &text, uint64_t &bytes, std::string &why);

/// The HF shard names of `count` shards: model.safetensors alone, else
/// model-00001-of-0000N.safetensors ...
std::vector<std::string> shardFileNames(size_t count);

/// --export's files, planned and reserved before the first step (on rank
/// 0), written after the last. A file: the one safetensors file. A
/// directory (created if missing): the tensors in plan order cut into
/// shards of at most `shardBytes` of data each (a larger tensor alone in
/// its own; no tensor split), model.safetensors when one shard holds them
/// all, else model-0000i-of-0000N.safetensors and
/// model.safetensors.index.json; and config.json, the plan's Hugging Face
/// config with its dtype set to the export's, where the plan has one.
/// Each file goes through an OutputFile (a reserved temporary, renamed
/// whole): the shards first, then the index, then config.json, then an
/// older export's weights files the new index does not name are removed
/// (transformers would load a stale model.safetensors before an index).
class WeightsExport {
public:
  WeightsExport();
  ~WeightsExport();
  bool reserve(const Plan &plan, const ExportSpec &spec, std::string &error);
  bool active() const { return reserved; }
  bool write(const Plan &plan, const std::vector<std::vector<float>> &params,
             std::string &error);
  /// What was written, for the log: "3 shards of at most N bytes and
  /// model.safetensors.index.json, config.json in DIR (BF16)" (f32
  /// unsaid), or the file's path.
  std::string summary() const;
  /// Why no config.json is written (empty: it is, or a file export).
  const std::string &noConfigReason() const { return noConfig; }

private:
  struct Files;
  /// A directory export's shard files and, for more than one, the index.
  bool reserveShards(const std::vector<TensorToWrite> &tensors,
                     const TensorMetadata &metadata, std::string &error);
  /// config.json, when the plan carries a config and the names are
  /// Hugging Face's (else noConfig says why not).
  bool reserveConfig(const Plan &plan, std::string &error);
  ExportSpec spec;
  bool reserved = false, directory = false;
  std::string noConfig;
  std::unique_ptr<Files> files;
};

/// A weights file matched to a plan, for --init-from.
class InitialWeights : public ParamSource {
public:
  InitialWeights();
  ~InitialWeights() override;
  /// Maps and checks the checkpoint at `path` and matches it to `plan`:
  /// every parameter found with its shape and a float dtype, nothing else
  /// in the files but the non-parameter buffers a Hugging Face file
  /// carries. `path`: a safetensors file; an index
  /// (model.safetensors.index.json), whose shards are its directory's
  /// files; or a directory with model.safetensors (first, as transformers
  /// looks) or the index. Every shard the index names is opened and
  /// checked, and every tensor of each must be where the index says.
  /// False with one error naming the file and every mismatch (a few of
  /// each kind and a count).
  bool open(const Plan &plan, const std::string &path, std::string &error);
  /// One line for the log: the names, what was converted or skipped.
  const std::string &summary() const { return note; }
  /// Of every file's header and size, in order.
  uint64_t fingerprint() const;
  /// Elements [begin, begin + count) of parameter `param` (plan order),
  /// read from the file (only their bytes). False with `error` when one
  /// is a NaN or an infinity (a corrupt file, or a diverged run's
  /// weights: nothing to train from).
  bool read(uint32_t param, int64_t begin, int64_t count, float *out,
            std::string &error) const override;
  /// Unmaps the files (their pages would count in the resident set).
  void close();

private:
  struct Source;
  bool openFiles(const std::string &path, std::string &error);
  bool reportNonFinite(uint32_t param, int64_t begin, int64_t count,
                       const float *values, std::string &error) const;
  /// One file, or the index's shards in the order it first names them.
  std::vector<std::unique_ptr<SafeTensorsReader>> files;
  /// The index's path (empty: one file).
  std::string indexPath;
  std::vector<std::string> paramNames;
  /// Per parameter, the file's tensors that hold its elements.
  std::vector<std::vector<Source>> sources;
  std::string note;
};

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_WEIGHTS_H
