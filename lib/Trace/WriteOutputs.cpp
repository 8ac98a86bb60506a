// Writing graph.pb and weights.safetensors; a failure leaves the earlier ones as they were.
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "GraphExecutor.h"
#include "ModuleLoader.h"
#include "nnsc/IR/Serialize.h"
#include "nnsc/Support/File.h"
#include "nnsc/Support/Safetensors.h"
#include "nnsc/Trace/Trace.h"

namespace nnsc::trace {

namespace {

Status writeWeights(const torch::jit::Module &module, const ir::Graph &g, const std::string &path) {
  std::map<std::string, at::Tensor> byName;
  for (const auto &p : module.named_parameters(true))
    byName[p.name] = p.value;
  for (const auto &b : module.named_buffers(true))
    byName[b.name] = b.value;
  std::vector<at::Tensor> keep;
  std::vector<SafetensorsEntry> entries;
  nlohmann::json aliases = nlohmann::json::object();
  for (const auto &t : g.tensors()) {
    if (t.kind != ir::TensorKind::Param && t.kind != ir::TensorKind::Buffer)
      continue;
    auto it = byName.find(t.name);
    if (it == byName.end())
      return Status::internal(fmt::format("weight '{}' vanished from the archive", t.name));
    at::Tensor c = it->second.detach().cpu().contiguous();
    keep.push_back(c);
    entries.push_back({t.name, std::string(ir::dtypeSafetensorsCode(t.dtype)), t.shape,
                       std::string_view(static_cast<const char *>(c.data_ptr()), c.nbytes())});
    for (const auto &a : t.aliases)
      aliases[a] = t.name;
  }
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"nnsc.aliases", aliases.dump()}};
  return writeSafetensors(path, entries, meta);
}

} // namespace

Status writeTraceOutputs(const TraceOptions &options, const TraceResult &result,
                         const std::string &outDir) {
  namespace fs = std::filesystem;
  bool created = !fs::exists(outDir);
  NNSC_RETURN_IF_ERROR(makeDirs(outDir));
  std::string graphPath = outDir + "/graph.pb", weightsPath = outDir + "/weights.safetensors";
  ir::Graph g = result.graph;
  g.weightsWritten = result.weightsAvailable;
  Status st = Status::ok();
  {
    OutputTransaction outputs; // both files replaced, or neither
    if (result.weightsAvailable) {
      auto module = loadModule(options.modelPath);
      st = module ? writeWeights(*module, g, weightsPath) : module.status();
    } else {
      outputs.removeOnCommit(weightsPath); // never pair a new graph with old weights
    }
    if (st.isOk())
      st = writeGraph(g, graphPath);
    if (st.isOk())
      st = outputs.commit();
  }
  std::error_code ec;
  if (!st.isOk() && created)
    fs::remove(outDir, ec);
  return st;
}

} // namespace nnsc::trace
