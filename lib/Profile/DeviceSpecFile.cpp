// The measured device spec's YAML text.
#include "nnsc/Profile/DeviceSpecFile.h"

#include <algorithm>

#include <fmt/format.h>

#include "YamlText.h"
#include "nnsc/Profile/CommTable.h"

namespace nnsc::profile {

std::string formatDeviceSpec(const MeasuredDevice &d) {
  std::string out;
  out += fmt::format("name: {}\n", yamlScalar(d.name));
  out += fmt::format("description: {}\n", yamlQuoted(d.description));
  out += "sources:\n";
  for (const std::string &s : d.sources)
    out += fmt::format("  - {}\n", yamlQuoted(s));
  out += "flops:\n";
  for (const auto &[dtype, rate] : d.flops)
    out += fmt::format("  {}: {}\n", dtype, formatReal(rate));
  out += fmt::format("memory_bytes: {}\n", d.memoryBytes);
  out += fmt::format("memory_bandwidth: {}   # bytes/s\n", formatReal(d.memoryBandwidth));
  out += fmt::format("launch_floor: {}       # seconds\n", formatReal(d.launchFloor));
  if (d.randomRate > 0)
    out += fmt::format("random_rate: {}        # random numbers drawn per second\n",
                       formatReal(d.randomRate));
  if (d.updateBandwidth > 0)
    out += fmt::format("update_bandwidth: {}   # bytes/s of AdamW's update (80 bytes an element)\n",
                       formatReal(d.updateBandwidth));
  if (!d.vectorOps.empty()) {
    out += "vector_ops:             # s/element and s/row, forward then backward, by op kind\n";
    for (const auto &[kind, v] : d.vectorOps)
      out += fmt::format("  {}: [{}, {}, {}, {}]\n", kind, formatReal(v[0]), formatReal(v[1]),
                         formatReal(v[2]), formatReal(v[3]));
  }
  out += "efficiency:             # the figures above are achieved rates, so 1.0\n";
  out += "  matmul: 1.0\n";
  out += "  memory: 1.0\n";
  if (!d.batchedMatmul.empty()) {
    out += "  batched_matmul:       # batched products, by their smallest dim: of the matmul rate\n";
    for (const auto &[dim, fraction] : d.batchedMatmul)
      out += fmt::format("    {}: {:.3f}\n", dim, std::min(1.0, fraction));
  }
  return out;
}

} // namespace nnsc::profile
