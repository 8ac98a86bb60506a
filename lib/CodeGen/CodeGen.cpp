// The nnsc-codegen driver: read the inputs, generate every rank in memory,
// then write the files.
#include "nnsc/CodeGen/CodeGen.h"

#include <filesystem>
#include <regex>

#include <fmt/format.h>

#include "nnsc/CodeGen/Program.h"
#include "nnsc/CodeGen/Shards.h"
#include "nnsc/Cost/PrecisionView.h"
#include "nnsc/Plan/Memory.h"
#include "nnsc/Plan/PlanIO.h"
#include "nnsc/Support/File.h"

namespace nnsc::codegen {

namespace fs = std::filesystem;

namespace {

struct RankOutput {
  RankLayout layout;
  std::string program;
  proto::RankManifest manifest;
};

Expected<RankOutput> generateRank(const ir::Graph &graph, const proto::Plan &plan,
                                  const JobLayout &job, int rank, const CodeGenOptions &options,
                                  bool weights, const std::vector<cost::DeviceLoad> &loads,
                                  const std::vector<cost::DeviceLoad> &loads16) {
  auto layout = layoutRank(graph, job, rank);
  if (!layout)
    return layout.status();
  std::map<std::string, std::string> soleReader;
  auto program = emitProgram(graph, *layout, {plan.policy(), options.graphPath}, &soleReader);
  if (!program)
    return program.status();
  proto::RankManifest manifest = buildManifest(graph, *layout, {options.bucketBytes, weights});
  // ZeRO-3: a trainable shard that one recompute function alone reads is
  // gathered around that function's runs; the others stay whole.
  if (manifest.zero() == 3)
    for (proto::Shard &s : *manifest.mutable_shards())
      if (auto it = soleReader.find(s.local_name());
          it != soleReader.end() && s.trainable() && s.reducer() >= 0)
        s.set_zero3_function(it->second);
  size_t device = static_cast<size_t>(layout->planDevice);
  if (device < loads.size())
    fillMemoryEstimate(loads[device], manifest, &loads16[device]);
  return RankOutput{layout.take(), program.take(), std::move(manifest)};
}

std::string defaultWeights(const std::string &graphPath) {
  return (fs::path(graphPath).parent_path() / "weights.safetensors").string();
}

// rank{r}.py / .pb / .safetensors for r >= worldSize, left by a bigger run,
// removed once the new program is in place.
void removeStaleRanks(const std::string &dir, int worldSize, OutputTransaction &outputs) {
  static const std::regex name("rank([0-9]+)\\.(py|pb|safetensors)");
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    std::string file = entry.path().filename().string();
    if (std::regex_match(file, m, name) && std::stoll(m[1].str()) >= worldSize)
      outputs.removeOnCommit(entry.path().string());
  }
}

std::string weightsPathOf(const CodeGenOptions &options) {
  return options.weightsPath.empty() ? defaultWeights(options.graphPath) : options.weightsPath;
}

Status writeRank(const RankOutput &r, const ir::Graph &graph, const CodeGenOptions &options,
                 const SafetensorsFile *weights) {
  fs::path base(options.outDir);
  if (weights)
    NNSC_RETURN_IF_ERROR(writeRankShards((base / r.manifest.weights()).string(), graph, r.layout,
                                         *weights, weightsPathOf(options)));
  NNSC_RETURN_IF_ERROR(writeFileAtomic((base / r.manifest.program()).string(), r.program));
  return writeManifest(r.manifest, (base / fmt::format("rank{}.pb", r.layout.rank)).string());
}

Expected<std::shared_ptr<SafetensorsFile>>
openWeights(const ir::Graph &graph, const CodeGenOptions &options, std::ostream &log) {
  if (!graph.weightsWritten) {
    log << "nnsc-codegen: the graph has no weights (traced from meta tensors); rank shards not "
           "written\n";
    return std::shared_ptr<SafetensorsFile>();
  }
  return SafetensorsFile::open(weightsPathOf(options));
}

} // namespace

Status runCodeGen(const CodeGenOptions &options, std::ostream &out, std::ostream &log) {
  if (options.bucketBytes <= 0)
    return errorf("error: impossible --bucket-mb; expected a positive size");
  auto plan = plan::readPlan(options.planPath);
  if (!plan)
    return plan.status();
  // The graph, checked against the plan's fingerprint and validated with it.
  auto graph = plan::readPlanGraph(*plan, options.planPath, options.graphPath);
  if (!graph)
    return graph.status();
  auto weights = openWeights(*graph, options, log);
  if (!weights)
    return weights.status();
  auto job = layoutJob(*graph, *plan);
  if (!job)
    return job.status();
  std::vector<RankOutput> ranks;
  std::vector<cost::DeviceLoad> loads = plan::deviceLoads(*graph, *plan);
  // The graph in mixed precision's dtypes: the estimate for nnsc-run's bf16
  // and fp16 modes (their sizes are the same).
  ir::Graph graph16 = cost::atPrecision(*graph, cost::Precision::BFloat16);
  std::vector<cost::DeviceLoad> loads16 = plan::deviceLoads(graph16, *plan);
  for (int r = 0; r < plan->runtime_ngpus(); ++r) {
    auto rank = generateRank(*graph, *plan, *job, r, options, *weights != nullptr, loads, loads16);
    if (!rank)
      return rank.status();
    if (*weights)
      NNSC_RETURN_IF_ERROR(
          checkShardSources(*graph, rank->layout, **weights, weightsPathOf(options)));
    ranks.push_back(rank.take());
  }
  std::vector<const proto::RankManifest *> manifests;
  for (const RankOutput &r : ranks)
    manifests.push_back(&r.manifest);
  NNSC_RETURN_IF_ERROR(checkPipelineChannels(manifests));
  if (!options.outDir.empty()) {
    NNSC_RETURN_IF_ERROR(makeDirs(options.outDir));
    OutputTransaction outputs; // every rank's files replaced, or none
    for (const RankOutput &r : ranks)
      NNSC_RETURN_IF_ERROR(writeRank(r, *graph, options, weights->get()));
    removeStaleRanks(options.outDir, plan->runtime_ngpus(), outputs);
    NNSC_RETURN_IF_ERROR(outputs.commit());
    log << fmt::format("nnsc-codegen: wrote {} ranks to {} (rank{{r}}.py, rank{{r}}.pb{})\n",
                       ranks.size(), options.outDir, *weights ? ", rank{r}.safetensors" : "");
  }
  if (options.print) {
    out << ranks[0].program << '\n';
    printManifest(ranks[0].manifest, out);
  }
  return Status::ok();
}

Status printManifestFile(const std::string &path, bool json, std::ostream &out) {
  auto manifest = readManifest(path);
  if (!manifest)
    return manifest.status();
  if (json)
    out << manifestToJson(*manifest);
  else
    printManifest(*manifest, out);
  return Status::ok();
}

} // namespace nnsc::codegen
