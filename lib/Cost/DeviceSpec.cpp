// Device specs (configs/devices/*.yaml, docs/devices.md).
#include "nnsc/Cost/DeviceSpec.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "nnsc/Cost/YamlReader.h"
#include "nnsc/Support/File.h"

namespace nnsc::cost {

const std::vector<std::string> &flopsKeys() {
  static const std::vector<std::string> keys = {"float64",  "float32", "tf32",
                                                "bfloat16", "float16", "float8"};
  return keys;
}

const std::vector<std::string> &vectorKinds() {
  static const std::vector<std::string> kinds = {"exp",     "gelu", "select",
                                                 "softmax", "norm", "loss"};
  return kinds;
}

double DeviceSpec::batchedMatmulEfficiency(double dim) const {
  if (batchedMatmul.empty())
    return 1;
  if (dim <= batchedMatmul.front().first)
    return batchedMatmul.front().second;
  if (dim >= batchedMatmul.back().first)
    return batchedMatmul.back().second;
  size_t i = 1;
  while (batchedMatmul[i].first < dim)
    ++i;
  const auto &[d0, e0] = batchedMatmul[i - 1];
  const auto &[d1, e1] = batchedMatmul[i];
  double t = (std::log2(dim) - std::log2(d0)) / (std::log2(d1) - std::log2(d0));
  return e0 + t * (e1 - e0);
}

double DeviceSpec::peakFlops(ir::DType dtype) const {
  const char *key = "float32";
  switch (dtype) {
  case ir::DType::Float64:
    key = "float64";
    break;
  case ir::DType::BFloat16:
    key = "bfloat16";
    break;
  case ir::DType::Float16:
    key = "float16";
    break;
  case ir::DType::Float32:
    if (tf32)
      key = "tf32";
    break;
  default:
    break;
  }
  auto it = flops.find(key);
  return it != flops.end() ? it->second : flops.at("float32");
}

namespace {

Status readStrings(const YamlReader &r, const YAML::Node &n, const std::string &key,
                   std::vector<std::string> &out) {
  if (!n.IsSequence())
    return r.errorAt(n, fmt::format("'{}' must be a list of strings", key));
  for (const YAML::Node &s : n) {
    auto v = r.string(s, key);
    if (!v)
      return v.status();
    out.push_back(*v);
  }
  return Status::ok();
}

// Each figure must lie in a range real devices span (with room on both
// sides): a denormal efficiency or a rate of 1e-300 passes "positive" but
// makes the step model divide infinities, and autodist would compare them.
Status checkPhysical(const YamlReader &r, const YAML::Node &n, const std::string &key, double v,
                     double least, double most, const char *unit) {
  if (v >= least && v <= most)
    return Status::ok();
  return r.errorAt(n, fmt::format("'{}' {} is outside the range real devices have, {:g} to {:g} {}",
                                  key, n.Scalar(), least, most, unit));
}

Status readFlops(const YamlReader &r, const YAML::Node &n, DeviceSpec &spec) {
  std::set<std::string> allowed(flopsKeys().begin(), flopsKeys().end());
  NNSC_RETURN_IF_ERROR(r.checkKeys(n, allowed, "'flops'"));
  for (auto it = n.begin(); it != n.end(); ++it) {
    std::string key = it->first.Scalar();
    auto v = r.number(it->second, "flops." + key, true);
    if (!v)
      return v.status();
    NNSC_RETURN_IF_ERROR(checkPhysical(r, it->second, "flops." + key, *v, 1e6, 1e18, "FLOP/s"));
    spec.flops[key] = *v;
  }
  if (!spec.flops.count("float32"))
    return r.errorAt(n, "missing key 'float32' in 'flops' (the rate of non-tensor-core work)");
  return Status::ok();
}

// efficiency.batched_matmul: {smallest dim: fraction of the matmul rate}.
Status readBatched(const YamlReader &r, const YAML::Node &n, DeviceSpec &spec) {
  if (!n.IsMap() || n.size() == 0)
    return r.errorAt(n, "'efficiency.batched_matmul' must map a product's smallest dim to the "
                        "fraction of the matmul rate it reaches, e.g. {32: 0.4, 128: 0.8}");
  for (auto it = n.begin(); it != n.end(); ++it) {
    auto dim = r.number(it->first, "a dim of 'efficiency.batched_matmul'", true);
    if (!dim)
      return dim.status();
    NNSC_RETURN_IF_ERROR(checkPhysical(r, it->first, "efficiency.batched_matmul", *dim, 1, 1 << 20,
                                       "(a matrix dim)"));
    const std::string key = fmt::format("efficiency.batched_matmul.{}", it->first.Scalar());
    auto v = r.number(it->second, key, true);
    if (!v)
      return v.status();
    if (*v > 1)
      return r.errorAt(it->second, fmt::format("'{}' is a fraction of the matmul rate, at most "
                                               "1; got {}",
                                               key, it->second.Scalar()));
    NNSC_RETURN_IF_ERROR(checkPhysical(r, it->second, key, *v, 1e-3, 1, "of the matmul rate"));
    for (const auto &[d, e] : spec.batchedMatmul)
      if (d == *dim)
        return r.errorAt(it->first, fmt::format("'efficiency.batched_matmul' gives dim {} twice",
                                                it->first.Scalar()));
    spec.batchedMatmul.emplace_back(*dim, *v);
  }
  std::sort(spec.batchedMatmul.begin(), spec.batchedMatmul.end());
  return Status::ok();
}

// vector_ops: {kind: [forward per element, forward per row, backward per
// element, backward per row]}, seconds.
Status readVectorOps(const YamlReader &r, const YAML::Node &n, DeviceSpec &spec) {
  std::set<std::string> allowed(vectorKinds().begin(), vectorKinds().end());
  if (!n.IsMap())
    return r.errorAt(n, "'vector_ops' must map an op kind to [forward s/element, forward s/row, "
                        "backward s/element, backward s/row]");
  NNSC_RETURN_IF_ERROR(r.checkKeys(n, allowed, "'vector_ops'"));
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string key = "vector_ops." + it->first.Scalar();
    if (!it->second.IsSequence() || it->second.size() != 4)
      return r.errorAt(it->second, fmt::format("'{}' must be a list of 4 numbers: forward "
                                               "s/element, forward s/row, backward s/element, "
                                               "backward s/row",
                                               key));
    double v[4];
    for (size_t i = 0; i < 4; ++i) {
      auto x = r.number(it->second[i], key, false);
      if (!x)
        return x.status();
      NNSC_RETURN_IF_ERROR(checkPhysical(r, it->second[i], key, *x, 0, 1e-3, "s"));
      v[i] = *x;
    }
    spec.vectorOps[it->first.Scalar()] = {v[0], v[1], v[2], v[3]};
  }
  return Status::ok();
}

Status readEfficiency(const YamlReader &r, const YAML::Node &n, DeviceSpec &spec) {
  NNSC_RETURN_IF_ERROR(r.checkKeys(n, {"matmul", "memory", "batched_matmul"}, "'efficiency'"));
  if (YAML::Node batched = n["batched_matmul"])
    NNSC_RETURN_IF_ERROR(readBatched(r, batched, spec));
  for (const char *key : {"matmul", "memory"}) {
    auto node = r.require(n, key, "'efficiency'");
    if (!node)
      return node.status();
    auto v = r.number(*node, fmt::format("efficiency.{}", key), true);
    if (!v)
      return v.status();
    if (*v > 1)
      return r.errorAt(*node, fmt::format("'efficiency.{}' is a fraction of peak, at most 1; "
                                          "got {}",
                                          key, node->Scalar()));
    NNSC_RETURN_IF_ERROR(
        checkPhysical(r, *node, fmt::format("efficiency.{}", key), *v, 1e-3, 1, "of peak"));
    (std::string(key) == "matmul" ? spec.matmulEfficiency : spec.memoryEfficiency) = *v;
  }
  return Status::ok();
}

Status readNumbers(const YamlReader &r, const YAML::Node &root, DeviceSpec &spec) {
  struct Field {
    const char *key;
    double *out;
    double least, most;
    const char *unit;
  };
  for (Field f : {Field{"memory_bytes", &spec.memoryBytes, 1e6, 1e15, "bytes"},
                  Field{"memory_bandwidth", &spec.memoryBandwidth, 1e6, 1e15, "bytes/s"},
                  Field{"launch_floor", &spec.launchFloor, 0, 1, "s"}}) {
    auto node = r.require(root, f.key, "the device spec");
    if (!node)
      return node.status();
    auto v = r.number(*node, f.key, std::string(f.key) != "launch_floor");
    if (!v)
      return v.status();
    NNSC_RETURN_IF_ERROR(checkPhysical(r, *node, f.key, *v, f.least, f.most, f.unit));
    *f.out = *v;
  }
  return Status::ok();
}

} // namespace

Expected<DeviceSpec> parseDeviceSpec(const std::string &text, const std::string &path) {
  YamlReader r(path, text);
  auto root = r.root();
  if (!root)
    return root.status();
  NNSC_RETURN_IF_ERROR(r.checkKeys(*root,
                                   {"name", "description", "sources", "flops", "memory_bytes",
                                    "memory_bandwidth", "launch_floor", "random_rate",
                                    "vector_ops", "update_bandwidth", "efficiency"},
                                   "the device spec"));
  DeviceSpec spec;
  auto name = r.require(*root, "name", "the device spec");
  if (!name)
    return name.status();
  auto nameText = r.string(*name, "name");
  if (!nameText)
    return nameText.status();
  spec.name = *nameText;
  if (YAML::Node d = (*root)["description"]) {
    auto v = r.string(d, "description");
    if (!v)
      return v.status();
    spec.description = *v;
  }
  if (YAML::Node s = (*root)["sources"])
    NNSC_RETURN_IF_ERROR(readStrings(r, s, "sources", spec.sources));
  auto flops = r.require(*root, "flops", "the device spec");
  if (!flops)
    return flops.status();
  NNSC_RETURN_IF_ERROR(readFlops(r, *flops, spec));
  NNSC_RETURN_IF_ERROR(readNumbers(r, *root, spec));
  if (YAML::Node rate = (*root)["random_rate"]) {
    auto v = r.number(rate, "random_rate", true);
    if (!v)
      return v.status();
    spec.randomRate = *v;
  }
  if (YAML::Node update = (*root)["update_bandwidth"]) {
    auto v = r.number(update, "update_bandwidth", true);
    if (!v)
      return v.status();
    NNSC_RETURN_IF_ERROR(checkPhysical(r, update, "update_bandwidth", *v, 1e6, 1e15, "bytes/s"));
    spec.updateBandwidth = *v;
  }
  if (YAML::Node vec = (*root)["vector_ops"])
    NNSC_RETURN_IF_ERROR(readVectorOps(r, vec, spec));
  auto eff = r.require(*root, "efficiency", "the device spec");
  if (!eff)
    return eff.status();
  NNSC_RETURN_IF_ERROR(readEfficiency(r, *eff, spec));
  return spec;
}

Expected<DeviceSpec> loadDeviceSpec(const std::string &path) {
  auto text = readFile(path);
  if (!text)
    return text.status();
  return parseDeviceSpec(*text, path);
}

} // namespace nnsc::cost
