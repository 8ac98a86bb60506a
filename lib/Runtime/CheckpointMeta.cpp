#include "nnsc/Runtime/CheckpointMeta.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "JsonInts.h"

namespace nnsc::rt {

namespace {

std::string toHex(const std::string &bytes) {
  static const char *kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

std::string fromHex(const std::string &hex) {
  auto val = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += char(val(hex[i]) * 16 + val(hex[i + 1]));
  return out;
}

nlohmann::json metaToJson(const CheckpointMeta &m) {
  nlohmann::json j = {
      {"format", 1},
      {"step", m.step},
      {"data_position", m.dataPosition},
      {"lr_schedule", {{"name", m.lrSchedule}, {"base_lr", m.baseLr}, {"last_lr", m.lastLr}}},
      {"rng_state", toHex(m.rngState)},
      {"config_hash", m.configHash},
      {"rank", m.rank},
      {"world_size", m.worldSize},
      {"dp_size", m.dpSize},
      {"dp_rank", m.dpRank},
      {"plan_ngpus", m.planNgpus},
      {"zero", m.zero},
      {"model_name", m.modelName},
      {"shards", shardsToJson(m.shards)}};
  if (m.zeroNgroups > 1)
    j["zero_ngroups"] = m.zeroNgroups;
  if (!m.cudaRngState.empty())
    j["cuda_rng_state"] = toHex(m.cudaRngState);
  if (m.lossScale)
    j["loss_scale"] = {{"scale", m.lossScale->scale},
                       {"clean_steps", m.lossScale->cleanSteps},
                       {"hysteresis_left", m.lossScale->hysteresisLeft}};
  if (m.best)
    j["best_validation"] = {{"step", m.best->step}, {"val_loss", m.best->valLoss}};
  return j;
}

// The counts a resume or a merge loops over, checked before they do: a rank
// file's world_size bounds how many files are looked for, its data_position
// where training resumes (the trainer writes its step there).
Status checkCounts(const CheckpointMeta &m, const std::string &file) {
  if (m.step < 0 || m.dataPosition != m.step)
    return errorf("{}: error: bad checkpoint metadata: data_position {} disagrees with step {} "
                  "(this nnsc writes the step)",
                  file, m.dataPosition, m.step);
  if (m.worldSize < 1 || m.worldSize > kMaxJobRanks)
    return errorf("{}: error: bad checkpoint metadata: world_size {}; expected 1 to {} ranks", file,
                  m.worldSize, kMaxJobRanks);
  if (m.rank < 0 || m.rank >= m.worldSize)
    return errorf("{}: error: bad checkpoint metadata: rank {} of world_size {}", file, m.rank,
                  m.worldSize);
  return Status::ok();
}

Expected<CheckpointMeta> metaFromJson(const nlohmann::json &j, const std::string &file) {
  CheckpointMeta m;
  try {
    m.step = jsonIntAt<int64_t>(j, "step");
    m.dataPosition = jsonIntAt<int64_t>(j, "data_position");
    m.lrSchedule = j.at("lr_schedule").at("name").get<std::string>();
    m.baseLr = j.at("lr_schedule").at("base_lr").get<double>();
    m.lastLr = j.at("lr_schedule").at("last_lr").get<double>();
    m.rngState = fromHex(j.at("rng_state").get<std::string>());
    m.cudaRngState = fromHex(j.value("cuda_rng_state", ""));
    m.configHash = j.at("config_hash").get<std::string>();
    m.rank = jsonIntAt<int>(j, "rank");
    m.worldSize = jsonIntAt<int>(j, "world_size");
    m.dpSize = jsonIntAt<int>(j, "dp_size");
    m.dpRank = jsonIntAt<int>(j, "dp_rank");
    m.planNgpus = jsonIntAt<int>(j, "plan_ngpus");
    m.modelName = j.value("model_name", "");
    m.zero = j.contains("zero") ? jsonIntAt<int>(j, "zero") : 0;
    m.zeroNgroups = j.contains("zero_ngroups") ? jsonIntAt<int>(j, "zero_ngroups") : 1;
    if (j.contains("loss_scale")) {
      const nlohmann::json &ls = j.at("loss_scale");
      LossScaleState state;
      state.scale = ls.at("scale").get<double>();
      state.cleanSteps = jsonIntAt<int64_t>(ls, "clean_steps");
      state.hysteresisLeft = jsonIntAt<int64_t>(ls, "hysteresis_left");
      if (!(state.scale > 0) || state.cleanSteps < 0)
        return errorf("{}: error: bad checkpoint metadata: loss_scale {} with {} clean steps", file,
                      state.scale, state.cleanSteps);
      m.lossScale = state;
    }
    if (j.contains("best_validation")) {
      const nlohmann::json &b = j.at("best_validation");
      CheckpointMeta::BestValidation best;
      best.step = jsonIntAt<int64_t>(b, "step");
      best.valLoss = b.at("val_loss").get<double>();
      if (best.step < 1 || best.step > m.step || !std::isfinite(best.valLoss))
        return errorf("{}: error: bad checkpoint metadata: best_validation {} at step {} in a "
                      "checkpoint of step {}",
                      file, best.valLoss, best.step, m.step);
      m.best = best;
    }
    if (m.zero < 0 || m.zero > 3)
      return errorf("{}: error: bad checkpoint metadata: zero is {}; this nnsc writes 0 to 3", file,
                    m.zero);
    NNSC_RETURN_IF_ERROR(checkCounts(m, file));
    if (m.zeroNgroups < 1 || m.zeroNgroups > m.worldSize || m.dpSize % m.zeroNgroups != 0)
      return errorf("{}: error: bad checkpoint metadata: zero_ngroups is {} for {} ranks ({} "
                    "data-parallel)",
                    file, m.zeroNgroups, m.worldSize, m.dpSize);
  } catch (const nlohmann::json::exception &ex) {
    return errorf("{}: error: bad checkpoint metadata: {}", file, ex.what());
  }
  auto shards = shardsFromJson(j.value("shards", nlohmann::json::array()), file);
  if (!shards)
    return shards.status();
  m.shards = shards.take();
  return m;
}

} // namespace

std::string checkpointMetaText(const CheckpointMeta &meta) {
  return metaToJson(meta).dump(1) + "\n";
}

Expected<CheckpointMeta> parseCheckpointMeta(const std::string &text, const std::string &path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception &ex) {
    return errorf("{}: error: not JSON: {}", path, ex.what());
  }
  return metaFromJson(j, path);
}

} // namespace nnsc::rt
