#include "nnsc/Runtime/TrainerConfig.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

#include "ConfigTree.h"
#include "TrainerConfigKeys.h"
#include "nnsc/Support/File.h"

namespace nnsc::rt {

namespace {

constexpr int64_t kMaxRank = 2147483647;

const KeySpec *findKey(const std::string &key) {
  for (const auto &s : trainerConfigKeys())
    if (s.key == key)
      return &s;
  return nullptr;
}

std::string sectionOf(const std::string &key) {
  size_t dot = key.rfind('.');
  return dot == std::string::npos ? std::string() : key.substr(0, dot);
}

// The keys accepted next to `key`: its section's keys, or the top level's.
std::string acceptedNear(const std::string &key) {
  std::string section = sectionOf(key), list;
  std::set<std::string> seen;
  for (const auto &s : trainerConfigKeys()) {
    std::string name;
    if (sectionOf(s.key) == section)
      name = section.empty() ? s.key : s.key.substr(section.size() + 1);
    else if (section.empty())
      name = s.key.substr(0, s.key.find('.'));
    if (!name.empty() && seen.insert(name).second)
      list += (list.empty() ? "" : ", ") + name;
  }
  return list;
}

Status checkKnownKeys(const FlatConfig &flat, const std::string &text) {
  for (const auto &[key, value] : flat) {
    if (findKey(key))
      continue;
    for (size_t dot = key.find('.'); dot != std::string::npos; dot = key.find('.', dot + 1))
      if (findKey(key.substr(0, dot)))
        return Status::error(errorAtValue(
            value, fmt::format("'{}' takes a single value, not a map", key.substr(0, dot)), text));
    std::string inside = acceptedNear(key + ".x");
    if (!inside.empty())
      return Status::error(errorAtValue(
          value, fmt::format("'{}' is a section; expected a map of: {}", key, inside), text));
    std::string section = sectionOf(key);
    std::string where = section.empty() ? "" : fmt::format(" in section '{}'", section);
    std::string name = section.empty() ? key : key.substr(section.size() + 1);
    if (!section.empty() && acceptedNear(key).empty())
      return Status::error(errorAtValue(
          value,
          fmt::format("unknown section '{}'; expected one of: {}", section, acceptedNear("")),
          text));
    return Status::error(errorAtValue(
        value,
        fmt::format("unknown key '{}'{}; expected one of: {}", name, where, acceptedNear(key)),
        text));
  }
  return Status::ok();
}

bool parseInt(const std::string &s, int64_t &out) {
  if (s.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0')
    return false;
  out = v;
  return true;
}

bool parseFloat(const std::string &s, double &out) {
  if (s.empty())
    return false;
  char *end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (*end != '\0' || !std::isfinite(v))
    return false;
  out = v;
  return true;
}

Status typeError(const std::string &key, const ConfigValue &v, const std::string &what,
                 const std::string &text) {
  std::string got = v.isList ? "a list" : fmt::format("'{}'", v.items.empty() ? "" : v.items[0]);
  return Status::error(
      errorAtValue(v, fmt::format("'{}' must be {}, got {}", key, what, got), text));
}

Status assignNumber(const KeySpec &s, const ConfigValue &v, TrainerConfig &c,
                    const std::string &text) {
  std::string bound = s.min > -1e300 && s.max < 1e300 ? fmt::format(" from {} to {}", s.min, s.max)
                      : s.min > -1e300                ? fmt::format(" >= {}", s.min)
                                                      : "";
  if (s.type == KeyType::Int) {
    int64_t x = 0;
    if (v.isList || !parseInt(v.items[0], x) || x < s.min || x > s.max)
      return typeError(s.key, v, "an integer" + bound, text);
    s.intRef(c) = x;
    return Status::ok();
  }
  double x = 0;
  if (v.isList || !parseFloat(v.items[0], x) || x < s.min || x > s.max)
    return typeError(s.key, v, "a number" + bound, text);
  s.floatRef(c) = x;
  return Status::ok();
}

Status assign(const KeySpec &s, const ConfigValue &v, TrainerConfig &c, const std::string &text) {
  switch (s.type) {
  case KeyType::Int:
  case KeyType::Float:
    return assignNumber(s, v, c, text);
  case KeyType::String:
    if (v.isList)
      return typeError(s.key, v, "a single value", text);
    s.strRef(c) = v.items[0];
    return Status::ok();
  case KeyType::Choice: {
    std::string list;
    for (const auto &ch : s.choices)
      list += (list.empty() ? "" : ", ") + ch;
    if (v.isList || std::find(s.choices.begin(), s.choices.end(), v.items[0]) == s.choices.end())
      return typeError(s.key, v, "one of: " + list, text);
    s.strRef(c) = v.items[0];
    return Status::ok();
  }
  case KeyType::RankList: {
    // `all`, one rank, or a list of ranks.
    std::vector<int64_t> ranks;
    if (!v.isList && v.items[0] == "all") {
      s.ranksRef(c) = ranks;
      return Status::ok();
    }
    for (const std::string &item : v.items) {
      int64_t r = 0;
      if (!parseInt(item, r) || r < 0 || r > kMaxRank)
        return typeError(s.key, v, "'all', a rank or a list of ranks (integers >= 0)", text);
      ranks.push_back(r);
    }
    if (ranks.empty())
      return typeError(s.key, v, "'all', a rank or a list of ranks (integers >= 0)", text);
    s.ranksRef(c) = ranks;
    return Status::ok();
  }
  case KeyType::FloatPair: {
    double a = 0, b = 0;
    if (!v.isList || v.items.size() != 2 || !parseFloat(v.items[0], a) ||
        !parseFloat(v.items[1], b) || a < 0 || a >= 1 || b < 0 || b >= 1)
      return typeError(s.key, v, "a pair [beta1, beta2] with values in [0, 1)", text);
    s.setPair(c, a, b);
    return Status::ok();
  }
  }
  return Status::internal("unhandled config key type");
}

std::string joined(const ConfigValue &v) {
  if (!v.isList)
    return v.items.empty() ? "" : v.items[0];
  std::string out = "[";
  for (size_t i = 0; i < v.items.size(); ++i)
    out += (i ? ", " : "") + v.items[i];
  return out + "]";
}

// Gradients are reduced, and losses computed, in float32 or in the training
// dtype itself.
template <typename Err> Status checkPrecision(const TrainerConfig &c, Err err) {
  const PrecisionConfig &p = c.precision;
  for (const auto &[key, dtype] : {std::pair{"grad_reduce_dtype", &p.gradReduceDtype},
                                   std::pair{"loss_dtype", &p.lossDtype}})
    if (*dtype != "fp32" && *dtype != p.mode)
      return err(fmt::format("precision.{}", key),
                 fmt::format("precision.{} '{}' needs precision.mode '{}' (mode is '{}'); "
                             "expected 'fp32'{}",
                             key, *dtype, *dtype, p.mode,
                             p.mode == "fp32" ? "" : fmt::format(" or '{}'", p.mode)));
  if (p.recipe == "autocast" && p.mode != "bf16")
    return err("precision.recipe",
               fmt::format("precision.recipe 'autocast' needs precision.mode 'bf16' (mode is "
                           "'{}'): fp16 autocast would need a loss scale on float32 weights, "
                           "which nnsc does not have; use recipe 'megatron' for fp16",
                           p.mode));
  if (p.recipe == "autocast")
    for (const auto &[key, dtype] : {std::pair{"grad_reduce_dtype", &p.gradReduceDtype},
                                     std::pair{"loss_dtype", &p.lossDtype}})
      if (*dtype != "fp32")
        return err(fmt::format("precision.{}", key),
                   fmt::format("precision.{} '{}' needs precision.recipe 'megatron': under "
                               "'autocast' the gradients are float32 and the losses compute "
                               "in float32; expected 'fp32'",
                               key, *dtype));
  if (p.lossScale.backoffFactor >= 1)
    return err("precision.loss_scale.backoff_factor",
               fmt::format("precision.loss_scale.backoff_factor must be below 1; got {}",
                           p.lossScale.backoffFactor));
  if (p.lossScale.minScale > p.lossScale.initial)
    return err("precision.loss_scale.min",
               fmt::format("precision.loss_scale.min ({}) is above precision.loss_scale.initial "
                           "({})",
                           p.lossScale.minScale, p.lossScale.initial));
  return Status::ok();
}

// The profiled steps lie inside the run, first before last.
template <typename Err> Status checkProfile(const TrainerConfig &c, Err err) {
  const ProfileConfig &p = c.profile;
  if (p.endStep > 0 && p.startStep == 0)
    return err("profile.end_step",
               "profile.end_step is set but profile.start_step is 0 (no profiling); set "
               "profile.start_step to the first step to profile");
  if (p.endStep > 0 && p.endStep < p.startStep)
    return err(
        "profile.end_step",
        fmt::format("profile.end_step {} is before profile.start_step {}", p.endStep, p.startStep));
  if (p.lastStep() > c.train.steps)
    return err(
        p.endStep > 0 ? "profile.end_step" : "profile.start_step",
        fmt::format("profile step {} is past train.steps ({})", p.lastStep(), c.train.steps));
  return Status::ok();
}

Status checkCrossKeys(const TrainerConfig &c) {
  auto err = [&](const std::string &key, const std::string &msg) {
    return Status::error(formatError(c.positionOf(key), msg));
  };
  if (c.program.empty())
    return err("program",
               "'program' is required: the directory holding rank{r}.py/.pb/.safetensors");
  if ((c.data.kind == "tokens" || c.data.kind == "tensors") && c.data.train.empty())
    return err("data.train",
               fmt::format("'data.train' is required when data.kind is '{}'", c.data.kind));
  if (c.data.kind == "synthetic" && c.data.vocabSize <= 0)
    return err("data.vocab_size",
               "'data.vocab_size' must be positive when data.kind is 'synthetic'");
  // Empty, ${run_dir}/metrics.jsonl would be /metrics.jsonl.
  for (const auto &[key, value] :
       {std::pair{"run_dir", &c.runDir}, std::pair{"metrics", &c.metrics}})
    if (value->empty())
      return err(key, fmt::format("'{}' is empty: name a path", key));
  if (c.profile.enabled() && c.profile.dir.empty())
    return err("profile.dir", "'profile.dir' is empty: name a directory for the profiles");
  if (c.lrSchedule.name == "cosine" && c.lrSchedule.minLr > c.optimizer.lr)
    return err("lr_schedule.min_lr",
               fmt::format("lr_schedule.min_lr ({}) is above optimizer.lr ({}): the cosine "
                           "schedule decays from optimizer.lr down to min_lr",
                           c.lrSchedule.minLr, c.optimizer.lr));
  if (c.backend == "nccl" && c.device != "cuda")
    return err("backend", "backend 'nccl' needs device 'cuda'");
  if (c.backend == "gloo" && c.device == "cuda")
    return err("backend", "backend 'gloo' is for device 'cpu'; use 'nccl' or 'auto' with cuda");
  NNSC_RETURN_IF_ERROR(checkProfile(c, err));
  if (c.checkpoint.saveBest == "true" &&
      ((c.data.val.empty() && c.data.kind != "synthetic") || c.train.valEvery == 0))
    return err("checkpoint.save_best",
               fmt::format("checkpoint.save_best needs validation to compare: set data.val and "
                           "train.val_every (now {} and {})",
                           c.data.val.empty() ? "empty" : c.data.val, c.train.valEvery));
  if (c.optimizer.fused == "true" && c.optimizer.foreach == "true")
    return err("optimizer.fused", "optimizer.fused and optimizer.foreach cannot both be true: "
                                  "the fused kernels replace the multi-tensor ops");
  return checkPrecision(c, err);
}

} // namespace

bool ProfileConfig::profilesRank(int64_t rank) const {
  return ranks.empty() || std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

SourcePos TrainerConfig::positionOf(const std::string &key) const {
  auto it = positions.find(key);
  return it == positions.end() ? SourcePos{path} : it->second;
}

Expected<TrainerConfig> parseTrainerConfig(const std::string &text, const std::string &path,
                                           const std::vector<std::string> &overrides,
                                           const EnvLookup &env) {
  auto flat = flattenYaml(text, path);
  if (!flat)
    return flat.status();
  for (const auto &o : overrides)
    NNSC_RETURN_IF_ERROR(applyOverride(*flat, o));
  NNSC_RETURN_IF_ERROR(checkKnownKeys(*flat, text));
  for (const auto &s : trainerConfigKeys())
    if (!flat->count(s.key)) {
      ConfigValue v = valueFromText(s.def);
      v.pos = {path};
      (*flat)[s.key] = v;
    }
  NNSC_RETURN_IF_ERROR(interpolate(*flat, env, text));
  TrainerConfig c;
  c.path = path;
  for (const auto &s : trainerConfigKeys()) {
    const ConfigValue &v = (*flat)[s.key];
    NNSC_RETURN_IF_ERROR(assign(s, v, c, text));
    c.positions[s.key] = v.pos;
    c.resolved[s.key] = joined(v);
  }
  NNSC_RETURN_IF_ERROR(checkCrossKeys(c));
  return c;
}

Expected<TrainerConfig> loadTrainerConfig(const std::string &path,
                                          const std::vector<std::string> &overrides) {
  auto text = readFile(path);
  if (!text)
    return text.status();
  return parseTrainerConfig(*text, path, overrides, processEnv());
}

Status checkBatchSizes(TrainerConfig &c, int64_t dpSize) {
  int64_t product = c.train.microBatchSize * dpSize * c.train.gradAccumulation;
  if (c.train.globalBatchSize == 0) {
    c.train.globalBatchSize = product;
    return Status::ok();
  }
  if (c.train.globalBatchSize == product)
    return Status::ok();
  return Status::error(formatError(
      c.positionOf("train.global_batch_size"),
      fmt::format("train.global_batch_size is {} but train.micro_batch_size ({}) × data-parallel "
                  "size ({}) × train.grad_accumulation ({}) = {}",
                  c.train.globalBatchSize, c.train.microBatchSize, dpSize, c.train.gradAccumulation,
                  product)));
}

std::string describeConfig(const TrainerConfig &c) {
  std::string out;
  for (const auto &[key, value] : c.resolved)
    out += fmt::format("{}: {}\n", key, value);
  return out;
}

std::string configHash(const TrainerConfig &c) {
  static const std::set<std::string> kIgnored = {"run_dir",
                                                 "threads",
                                                 "backend",
                                                 "comm_timeout_s",
                                                 "host_memory",
                                                 "gloo_workers",
                                                 "cpu_bind",
                                                 "omp_wait",
                                                 "train.steps",
                                                 "train.log_every",
                                                 "train.val_every",
                                                 "train.val_batches",
                                                 "checkpoint.every",
                                                 "checkpoint.keep_last",
                                                 "checkpoint.save_last",
                                                 "checkpoint.save_best",
                                                 "checkpoint.resume",
                                                 "checkpoint.on_signal",
                                                 "train.time_limit_minutes",
                                                 "metrics",
                                                 "data.val",
                                                 "profile.start_step",
                                                 "profile.end_step",
                                                 "profile.ranks",
                                                 "profile.dir",
                                                 "profile.record_shapes",
                                                 "profile.memory",
                                                 "profile.top",
                                                 "data_parallel.bucket_view",
                                                 "data_parallel.zero3_prefetch"};
  uint64_t h = 1469598103934665603ull; // FNV-1a
  for (const auto &[key, value] : c.resolved) {
    if (kIgnored.count(key))
      continue;
    for (char ch : key + "=" + value + "\n") {
      h ^= static_cast<unsigned char>(ch);
      h *= 1099511628211ull;
    }
  }
  return fmt::format("{:016x}", h);
}

} // namespace nnsc::rt
