#include "nnsc/Runtime/Checkpoint.h"

#include <cstring>
#include <filesystem>
#include <mutex>

#include <ATen/ATen.h>

#include "TensorIO.h"
#include "nnsc/Support/File.h"
#include "nnsc/Support/Safetensors.h"

namespace nnsc::rt {

namespace {

std::string rankFile(const std::string &dir, int rank, const char *ext) {
  return (std::filesystem::path(dir) / fmt::format("rank{}.{}", rank, ext)).string();
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
  return writeFileAtomic(rankFile(dir, rank, "json"), checkpointMetaText(state.meta));
}

Expected<CheckpointMeta> readCheckpointMeta(const std::string &dir, int rank) {
  std::string path = rankFile(dir, rank, "json");
  auto text = readFile(path);
  if (!text)
    return text.status();
  return parseCheckpointMeta(*text, path);
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

std::string generatorState(const c10::Device &device) {
  at::Generator gen = at::globalContext().defaultGenerator(device);
  at::Tensor s;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    s = gen.get_state().contiguous(); // a CPU byte tensor, for CUDA's too
  }
  return std::string(static_cast<const char *>(s.data_ptr()), s.nbytes());
}

Status setGeneratorState(const c10::Device &device, const std::string &bytes,
                         const std::string &from) {
  at::Tensor s = at::empty({int64_t(bytes.size())}, at::TensorOptions().dtype(at::kByte));
  std::memcpy(s.data_ptr(), bytes.data(), bytes.size());
  try {
    at::Generator gen = at::globalContext().defaultGenerator(device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(s);
  } catch (const c10::Error &ex) {
    return errorf("{}: error: bad {} random-generator state: {}", from, device.str(),
                  ex.what_without_backtrace());
  }
  return Status::ok();
}

std::string cpuRngState() { return generatorState(c10::Device(c10::kCPU)); }

Status setCpuRngState(const std::string &bytes, const std::string &from) {
  return setGeneratorState(c10::Device(c10::kCPU), bytes, from);
}

} // namespace nnsc::rt
