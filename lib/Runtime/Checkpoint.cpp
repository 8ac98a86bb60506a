#include "nnsc/Runtime/Checkpoint.h"

#include <cstring>
#include <filesystem>
#include <mutex>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "TensorIO.h"
#include "nnsc/Support/File.h"
#include "nnsc/Support/Safetensors.h"

namespace nnsc::rt {

namespace {

std::string rankFile(const std::string &dir, int rank, const char *ext) {
  return (std::filesystem::path(dir) / fmt::format("rank{}.{}", rank, ext)).string();
}

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
  return {{"format", 1},
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
}

Expected<CheckpointMeta> metaFromJson(const nlohmann::json &j, const std::string &file) {
  CheckpointMeta m;
  try {
    m.step = j.at("step").get<int64_t>();
    m.dataPosition = j.at("data_position").get<int64_t>();
    m.lrSchedule = j.at("lr_schedule").at("name").get<std::string>();
    m.baseLr = j.at("lr_schedule").at("base_lr").get<double>();
    m.lastLr = j.at("lr_schedule").at("last_lr").get<double>();
    m.rngState = fromHex(j.at("rng_state").get<std::string>());
    m.configHash = j.at("config_hash").get<std::string>();
    m.rank = j.at("rank").get<int>();
    m.worldSize = j.at("world_size").get<int>();
    m.dpSize = j.at("dp_size").get<int>();
    m.dpRank = j.at("dp_rank").get<int>();
    m.planNgpus = j.at("plan_ngpus").get<int>();
    m.modelName = j.value("model_name", "");
    m.zero = j.value("zero", 0);
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

Status writeRankCheckpoint(const std::string &dir, int rank, const RankState &state) {
  std::vector<at::Tensor> keep;
  std::vector<SafetensorsEntry> entries;
  auto add = [&](const std::string &name, const at::Tensor &t) {
    keep.push_back(t.detach().cpu().contiguous());
    entries.push_back(entryOfTensor(name, keep.back()));
  };
  for (const auto &[name, t] : state.shards)
    add("shard/" + name, t);
  for (const auto &[name, t] : state.optimizer)
    add("optim/" + name, t);
  NNSC_RETURN_IF_ERROR(writeSafetensors(rankFile(dir, rank, "safetensors"), entries,
                                        {{"format", "pt"}, {"nnsc.checkpoint", "1"}}));
  return writeFileAtomic(rankFile(dir, rank, "json"), metaToJson(state.meta).dump(1) + "\n");
}

Expected<CheckpointMeta> readCheckpointMeta(const std::string &dir, int rank) {
  std::string path = rankFile(dir, rank, "json");
  auto text = readFile(path);
  if (!text)
    return text.status();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(*text);
  } catch (const nlohmann::json::exception &ex) {
    return errorf("{}: error: not JSON: {}", path, ex.what());
  }
  return metaFromJson(j, path);
}

Expected<RankState> readRankCheckpoint(const std::string &dir, int rank) {
  auto meta = readCheckpointMeta(dir, rank);
  if (!meta)
    return meta.status();
  RankState state;
  state.meta = meta.take();
  std::string path = rankFile(dir, rank, "safetensors");
  auto file = SafetensorsFile::open(path);
  if (!file)
    return file.status();
  for (const auto &e : (*file)->entries()) {
    auto t = tensorFromEntry(e, path);
    if (!t)
      return t.status();
    if (e.name.rfind("shard/", 0) == 0)
      state.shards[e.name.substr(6)] = t.take();
    else if (e.name.rfind("optim/", 0) == 0)
      state.optimizer[e.name.substr(6)] = t.take();
    else
      return errorf("{}: error: unexpected tensor '{}' in a checkpoint", path, e.name);
  }
  return state;
}

std::string cpuRngState() {
  at::Tensor s = at::detail::getDefaultCPUGenerator().get_state();
  return std::string(static_cast<const char *>(s.data_ptr()), s.nbytes());
}

Status setCpuRngState(const std::string &bytes, const std::string &from) {
  at::Tensor s = at::empty({int64_t(bytes.size())}, at::TensorOptions().dtype(at::kByte));
  std::memcpy(s.data_ptr(), bytes.data(), bytes.size());
  try {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(s);
  } catch (const c10::Error &ex) {
    return errorf("{}: error: bad random-generator state: {}", from, ex.what_without_backtrace());
  }
  return Status::ok();
}

} // namespace nnsc::rt
