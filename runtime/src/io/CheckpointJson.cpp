//===- CheckpointJson.cpp - a checkpoint's manifest with nlohmann-json ----===//
//
// Parsed without exceptions (JSON_NOEXCEPTION, as SafeTensorsJson.cpp):
// every field's type is checked before it is read, so that a manifest
// edited by hand or cut short is an error line naming the field.
//
//===----------------------------------------------------------------------===//

#define JSON_NOEXCEPTION
#include "fsdp/runtime/io/Checkpoint.h"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace fsdp::rt {
namespace {
using json = nlohmann::json;
using ordered = nlohmann::ordered_json;

std::string hex(uint64_t value, int digits) {
  char text[24];
  std::snprintf(text, sizeof(text), "%0*llx", digits,
                (unsigned long long)value);
  return text;
}

ordered emitRun(const RunIdentity &run) {
  ordered data = {{"kind", run.dataKind}};
  if (run.dataKind == "tokens") {
    data["source"] = run.dataSource;
    data["fingerprint"] = hex(run.dataFingerprint, 16);
    data["tokens"] = run.dataTokens;
  }
  data["global_batch"] = run.globalBatch;
  data["seq"] = run.seq;
  return data;
}

/// The optimizer's settings (null where the plan has no optimizer).
ordered emitOptimizer(const OptimizerSettings &o) {
  if (!o.known)
    return nullptr;
  ordered settings = {{"lr", o.lr},
                      {"beta1", o.beta1},
                      {"beta2", o.beta2},
                      {"eps", o.eps},
                      {"weight_decay", o.weightDecay}};
  settings["grad_clip"] = o.gradClip ? ordered(*o.gradClip) : ordered(nullptr);
  return settings;
}

ordered emitUnits(const std::vector<ManifestUnit> &units) {
  ordered list = ordered::array();
  for (const ManifestUnit &unit : units) {
    ordered params = ordered::array();
    for (const ManifestParam &p : unit.params)
      params.push_back(
          {{"name", p.name}, {"shape", p.shape}, {"offset", p.offset}});
    list.push_back({{"name", unit.name},
                    {"flat_size", unit.flatSize},
                    {"params", params}});
  }
  return list;
}

/// Reads field `key` of `object`: a string, an integer, an unsigned or a
/// hexadecimal string into the output's type. False with `why` naming it.
struct Reader {
  std::string &why;
  bool fail(const std::string &where, const char *expected) {
    why = "manifest field '" + where + "' is missing or not " + expected;
    return false;
  }
  bool string(const json &o, const char *key, std::string &out,
              const std::string &where) {
    auto it = o.find(key);
    if (it == o.end() || !it->is_string())
      return fail(where + key, "a string");
    out = it->get<std::string>();
    return true;
  }
  bool integer(const json &o, const char *key, int64_t &out,
               const std::string &where, int64_t min = 0) {
    auto it = o.find(key);
    if (it == o.end() || !it->is_number_integer() ||
        (it->is_number_unsigned() &&
         it->get<uint64_t>() > uint64_t(INT64_MAX)) ||
        it->get<int64_t>() < min)
      return fail(where + key, "an integer in range");
    out = it->get<int64_t>();
    return true;
  }
  bool hexValue(const json &o, const char *key, uint64_t &out,
                const std::string &where, size_t digits) {
    std::string text;
    if (!string(o, key, text, where))
      return false;
    char *end = nullptr;
    out = std::strtoull(text.c_str(), &end, 16);
    if (text.size() != digits || *end)
      return fail(where + key, "a hexadecimal string of the right length");
    return true;
  }
  bool array(const json &o, const char *key, const json *&out,
             const std::string &where) {
    auto it = o.find(key);
    if (it == o.end() || !it->is_array())
      return fail(where + key, "an array");
    out = &*it;
    return true;
  }
};

/// The optimizer's settings: optional (a manifest written before they were
/// recorded, or a plan without an optimizer, has none).
bool readOptimizer(Reader &r, const json &j, OptimizerSettings &o) {
  auto it = j.find("optimizer");
  if (it == j.end() || it->is_null())
    return true;
  if (!it->is_object())
    return r.fail("optimizer", "an object");
  std::pair<const char *, double *> fields[] = {
      {"lr", &o.lr},
      {"beta1", &o.beta1},
      {"beta2", &o.beta2},
      {"eps", &o.eps},
      {"weight_decay", &o.weightDecay}};
  for (auto [key, out] : fields) {
    auto value = it->find(key);
    if (value == it->end() || !value->is_number())
      return r.fail(std::string("optimizer.") + key, "a number");
    *out = value->get<double>();
  }
  auto clip = it->find("grad_clip");
  if (clip == it->end() || !(clip->is_null() || clip->is_number()))
    return r.fail("optimizer.grad_clip", "a number or null");
  if (clip->is_number())
    o.gradClip = clip->get<double>();
  o.known = true;
  return true;
}

bool readRun(Reader &r, const json &j, RunIdentity &run) {
  auto it = j.find("data");
  if (it == j.end() || !it->is_object())
    return r.fail("data", "an object");
  const json &data = *it;
  int64_t tokens = 0, seed = 0;
  if (!r.string(data, "kind", run.dataKind, "data.") ||
      !r.integer(data, "global_batch", run.globalBatch, "data.") ||
      !r.integer(data, "seq", run.seq, "data."))
    return false;
  if (run.dataKind == "tokens" &&
      (!r.string(data, "source", run.dataSource, "data.") ||
       !r.hexValue(data, "fingerprint", run.dataFingerprint, "data.", 16) ||
       !r.integer(data, "tokens", tokens, "data.")))
    return false;
  run.dataTokens = uint64_t(tokens);
  if (!r.integer(j, "seed", seed, "") || !r.string(j, "lr", run.lr, "") ||
      !r.string(j, "lr_schedule", run.lrSchedule, "") ||
      !r.integer(j, "steps", run.steps, "") ||
      !r.integer(j, "threads", run.threads, "") ||
      !readOptimizer(r, j, run.optimizer))
    return false;
  run.seed = uint64_t(seed);
  return true;
}

bool readShape(Reader &r, const json &p, std::vector<int64_t> &shape,
               const std::string &where) {
  const json *dims = nullptr;
  if (!r.array(p, "shape", dims, where))
    return false;
  for (const json &d : *dims) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      return r.fail(where + "shape", "an array of sizes");
    shape.push_back(d.get<int64_t>());
  }
  return true;
}

bool readUnits(Reader &r, const json &j, std::vector<ManifestUnit> &units) {
  const json *list = nullptr;
  if (!r.array(j, "units", list, ""))
    return false;
  for (const json &u : *list) {
    std::string where = "units[" + std::to_string(units.size()) + "].";
    if (!u.is_object())
      return r.fail(where, "an object");
    ManifestUnit &unit = units.emplace_back();
    const json *params = nullptr;
    if (!r.string(u, "name", unit.name, where) ||
        !r.integer(u, "flat_size", unit.flatSize, where) ||
        !r.array(u, "params", params, where))
      return false;
    for (const json &p : *params) {
      std::string at =
          where + "params[" + std::to_string(unit.params.size()) + "].";
      if (!p.is_object())
        return r.fail(at, "an object");
      ManifestParam &param = unit.params.emplace_back();
      if (!r.string(p, "name", param.name, at) ||
          !readShape(r, p, param.shape, at) ||
          !r.integer(p, "offset", param.offset, at))
        return false;
    }
  }
  return true;
}

bool readFiles(Reader &r, const json &j, std::vector<ManifestFile> &files) {
  const json *list = nullptr;
  if (!r.array(j, "files", list, ""))
    return false;
  for (const json &f : *list) {
    std::string where = "files[" + std::to_string(files.size()) + "].";
    if (!f.is_object())
      return r.fail(where, "an object");
    ManifestFile &file = files.emplace_back();
    int64_t bytes = 0;
    uint64_t crc = 0;
    if (!r.string(f, "name", file.name, where) ||
        !r.integer(f, "rank", file.rank, where) ||
        !r.integer(f, "bytes", bytes, where) ||
        !r.hexValue(f, "crc32", crc, where, 8))
      return false;
    file.bytes = uint64_t(bytes);
    file.crc32 = uint32_t(crc);
  }
  return true;
}
} // namespace

bool checkpointsAvailable() { return true; }

std::string emitManifest(const Manifest &m) {
  ordered files = ordered::array();
  for (const ManifestFile &f : m.files)
    files.push_back({{"name", f.name},
                     {"rank", f.rank},
                     {"bytes", f.bytes},
                     {"crc32", hex(f.crc32, 8)}});
  ordered j = {{"format", "fsdp-checkpoint"},
               {"version", m.version},
               {"step", m.step},
               {"world_size", m.worldSize},
               {"plan_checksum", hex(m.planChecksum, 8)},
               {"seed", m.run.seed},
               {"lr", m.run.lr},
               {"lr_schedule", m.run.lrSchedule},
               {"steps", m.run.steps},
               {"threads", m.run.threads},
               {"optimizer", emitOptimizer(m.run.optimizer)},
               {"data", emitRun(m.run)},
               {"units", emitUnits(m.units)},
               {"files", files}};
  return j.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

bool parseManifest(const std::string &text, Manifest &m, std::string &why) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    why = "not a JSON object (cut short, or not a manifest)";
    return false;
  }
  Reader r{why};
  std::string format;
  uint64_t checksum = 0;
  if (!r.string(j, "format", format, "") ||
      !r.integer(j, "version", m.version, ""))
    return false;
  if (format != "fsdp-checkpoint" || m.version != kCheckpointVersion) {
    why = "format '" + format + "' version " + std::to_string(m.version) +
          " (this fsdp-run reads fsdp-checkpoint version " +
          std::to_string(kCheckpointVersion) + ")";
    return false;
  }
  if (!r.integer(j, "step", m.step, "") ||
      !r.integer(j, "world_size", m.worldSize, "", 1) ||
      !r.hexValue(j, "plan_checksum", checksum, "", 8) ||
      !readRun(r, j, m.run) || !readUnits(r, j, m.units) ||
      !readFiles(r, j, m.files))
    return false;
  m.planChecksum = uint32_t(checksum);
  return true;
}

} // namespace fsdp::rt
