// nnsc-plan: graph.pb → plan.pb (how each node is split and placed).
//   nnsc-plan GRAPH.pb --policy dp|tp|data|hybrid|file --runtime-ngpus N
//             [--plan-ngpus T] [--plan-file PLAN.yaml] [--seed S] [--zero 0|1|2|3]
//             [--zero-ngroups N]
//             [--recompute-modules CLASS,...] -o plan.pb [--print]
//   nnsc-plan GRAPH.pb --policy autodist --runtime-ngpus N [--plan-ngpus T|auto]
//             (--device D|--cluster C) [--mem-limit 60GiB] [--zero auto|0|1|2|3]
//             [--recompute auto|none|CLASS,...] -o plan.pb [--print]
//   nnsc-plan --print plan.pb [--graph GRAPH.pb]
// Cost model (docs/cost-model.md): [--cluster C.yaml | --device D.yaml [--comm T.yaml]
//   [--devices-per-node N]] [--optimizer adamw] [--precision fp32|bf16|fp16]
#include <cmath>
#include <iostream>
#include <optional>
#include <sstream>
#include <tuple>

#include "nnsc/AutoDist/AutoDist.h"
#include "nnsc/AutoDist/HtmlReport.h"
#include "nnsc/Cost/Report.h"
#include "nnsc/Plan/Constraints.h"
#include "nnsc/Plan/Pipeline.h"
#include "nnsc/Plan/PlanIO.h"
#include "nnsc/Search/Solver.h"
#include "nnsc/Support/ToolMain.h"
#include "nnsc/Transform/CommReport.h"
#include "nnsc/Transform/StepCost.h"

namespace {

struct CostFlags {
  std::string cluster, device, comm, optimizer = "adamw", precision = "fp32";
  bool tf32 = false;
  int devicesPerNode = 8;
};

// Every plan must partition; with several plan devices --print also shows
// the communication the partition implies, and with a cluster the
// predicted step time.
nnsc::plan::PlanCheck partitionCheck(const std::optional<nnsc::cost::Cluster> &cluster,
                                     const nnsc::cost::MemoryOptions &memory) {
  return [&cluster, memory](const nnsc::proto::Plan &plan,
                            const nnsc::ir::Graph &graph) -> nnsc::Expected<std::string> {
    nnsc::transform::PartitionOptions partition;
    partition.search.cache = std::make_shared<nnsc::transform::RvdPlanCache>(); // layers alike
    if (cluster && cluster->comm) // price re-layouts from the comm table
      partition.search.cost = nnsc::transform::tableRvdCost(*cluster);
    auto pg = nnsc::transform::partitionGraph(graph, plan, partition);
    if (!pg)
      return nnsc::Status(pg.status()).withContext("error: the plan does not partition");
    std::ostringstream os;
    if (plan.plan_ngpus() > 1)
      nnsc::transform::printCommunication(graph, *pg, os);
    if (cluster) {
      nnsc::cost::StepOptions options;
      options.memory = memory;
      auto steps = nnsc::transform::estimateStep(graph, plan, *pg, *cluster, options);
      if (!steps)
        return steps.status();
      nnsc::cost::printStepTime(*steps, cluster->device, os);
    }
    return os.str();
  };
}

// "auto" -> -1; an integer -> itself; else an error naming the flag.
nnsc::Expected<int> autoOrInt(const std::string &flag, const std::string &text) {
  if (text == "auto")
    return -1;
  try {
    size_t used = 0;
    int v = std::stoi(text, &used);
    if (used == text.size())
      return v;
  } catch (const std::exception &) {
  }
  return nnsc::errorf("error: {} '{}': expected auto or a number", flag, text);
}

// "80GiB", "60GB", "1.5e10", "512MiB" -> bytes.
nnsc::Expected<double> parseBytes(const std::string &text) {
  static const std::vector<std::pair<std::string, double>> units = {
      {"TiB", 1099511627776.0}, {"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024.0},
      {"TB", 1e12},             {"GB", 1e9},           {"MB", 1e6},        {"KB", 1e3},
      {"B", 1}};
  std::string number = text;
  double scale = 1;
  for (const auto &[suffix, factor] : units)
    if (text.size() > suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0) {
      number = text.substr(0, text.size() - suffix.size());
      scale = factor;
      break;
    }
  try {
    size_t used = 0;
    double v = std::stod(number, &used);
    if (used == number.size() && v > 0 && std::isfinite(v * scale))
      return v * scale;
  } catch (const std::exception &) {
  }
  return nnsc::errorf("error: --mem-limit '{}': expected a positive size such as 60GiB or 512MiB",
                      text);
}

} // namespace

static int toolMain(int argc, char **argv) {
  CLI::App app{"nnsc-plan: choose how to parallelize a traced graph"};
  nnsc::plan::PlanOptions opts;
  std::string input, graphOverride;
  nnsc::plan::PlanOutputs outputs;
  std::string zeroText, planNgpusText, recomputeText, memLimitText, constraintsPath, pipelineText;
  int globalBatch = 0;
  bool print = false, eachLayer = false;
  uint64_t seed = 0;
  app.add_option("input", input, "graph.pb to plan, or plan.pb to print with --print")->required();
  auto *policy = app.add_option("--policy", opts.policy,
                                "parallelization policy; one of: " + nnsc::plan::policyNames())
                     ->default_val("dp");
  auto *ngpus = app.add_option("--runtime-ngpus", opts.runtimeNgpus, "total ranks at run time")
                    ->default_val(1);
  auto *planNgpus = app.add_option("--plan-ngpus", planNgpusText,
                                   "devices one model copy spans (tp, data, hybrid, file); "
                                   "autodist: auto (the default) or a number");
  auto *planFile = app.add_option("--plan-file", opts.planFile, "policy file: the plan YAML");
  auto *seedOpt = app.add_option("--seed", seed, "tp/hybrid: pick split dims at random")
                      ->check(nnsc::unsignedInteger());
  auto *micro =
      app.add_option("--micro-batches", opts.microBatches, "micro-batches per optimizer step")
          ->default_val(1);
  app.add_option("--pipeline-stages", opts.pipeline.stages,
                 "pipeline stages the model is cut into at its layers (policy pp; tp and hybrid "
                 "plan each stage; docs/pipeline.md)")
      ->default_val(1);
  app.add_option("--schedule", opts.pipeline.schedule, "pipeline schedule: 1f1b, gpipe, interleaved")
      ->default_val("1f1b");
  app.add_option("--virtual-stages", opts.pipeline.virtualStages,
                 "interleaved schedule: model chunks per pipeline stage")
      ->default_val(1);
  app.add_option("--pipeline-pivots", opts.pipeline.pivots,
                 "module classes whose instances may start a pipeline stage (default: the most "
                 "repeated numbered module, e.g. Block)")
      ->delimiter(',');
  auto *recompute = app.add_option("--recompute-modules", opts.recomputeModules,
                                   "module classes to recompute in backward, each instance a group "
                                   "(Block,LlamaDecoderLayer)")
                        ->delimiter(',');
  auto *zero = app.add_option("--zero", zeroText,
                              "ZeRO stage over the data-parallel copies: 0 (off), 1 (optimizer "
                              "states sharded), 2 (gradients too) or 3 (parameters too, gathered "
                              "around each recompute group; docs/zero.md); autodist: auto (the "
                              "default) picks 1, then 2, then 3, only where memory needs it");
  auto *zeroNgroups = app.add_option(
      "--zero-ngroups", opts.zeroNgroups,
      "ZeRO inside N blocks of runtime-ngpus/N consecutive ranks (a node, say), replicated "
      "over the blocks: the parameter all-gather stays in a block (docs/zero.md; default 1)");
  auto *recomputeOpt = app.add_option(
      "--recompute", recomputeText,
      "autodist: auto (the default: the fewest repeated blocks that make the plan fit), "
      "none, or module classes (Block,LlamaDecoderLayer)");
  auto *memLimitOpt = app.add_option(
      "--mem-limit", memLimitText,
      "autodist: bytes per device a plan may use (60GiB; default 80% of the device's "
      "memory)");
  app.add_flag("--solve-each-layer", eachLayer,
               "autodist: search every layer on its own (layers may differ; slower) instead of "
               "solving the repeated blocks once");
  bool wholeGraph = false;
  app.add_flag("--whole-graph", wholeGraph,
               "autodist: build, solve and price every configuration on the whole graph (slower "
               "with depth) instead of on a few of its repeated layers standing for the rest");
  auto *pipelineOpt = app.add_option(
      "--pipeline", pipelineText,
      "autodist: pipeline stages: auto (also try every stage count the devices and "
      "layers allow, beside none) or a number S; the stages' devices, cuts and plans "
      "are searched (--schedule, --virtual-stages, --pipeline-pivots apply)");
  auto *globalBatchOpt = app.add_option(
      "--global-batch", globalBatch,
      "autodist: samples per optimizer step over all copies, in traced micro-batches: "
      "a configuration of dp copies runs global/dp micro-batches per copy (default: "
      "--micro-batches per copy)");
  bool ilpCheck = false;
  app.add_flag("--ilp-check", ilpCheck,
               "autodist: also solve every problem with CBC's integer program and compare the "
               "optima (slow; with --solve-each-layer every problem is compared)");
  auto *constraintsOpt = app.add_option(
      "--constraints", constraintsPath,
      "autodist: a constraints file (YAML; docs/autodist.md): the splits each op may "
      "take");
  auto *out = app.add_option("-o,--out", outputs.plan, "where to write plan.pb");
  auto *savePlanFile = app.add_option(
      "--save-plan-file", outputs.planFile,
      "also write the plan as a plan file (module-path rules; docs/plan-files.md) that --policy "
      "file reproduces");
  auto *reportOpt = app.add_option(
      "--report", outputs.report,
      "also write the plan report: one self-contained HTML page (autodist's configurations, "
      "time and memory per device, each layer's cut, the costliest ops); needs a device");
  app.add_option("--graph", graphOverride, "with --print PLAN.pb: the graph it was made for");
  app.add_flag("--print", print, "print the plan's text form");
  CostFlags cf;
  auto *clusterOpt = app.add_option("--cluster", cf.cluster,
                                    "cluster file: device spec, devices per node, comm table");
  auto *deviceOpt = app.add_option("--device", cf.device, "device spec (configs/devices/*.yaml)");
  auto *commOpt = app.add_option("--comm", cf.comm, "communication table (configs/comm/*.yaml)");
  auto *perNodeOpt =
      app.add_option("--devices-per-node", cf.devicesPerNode, "with --device: ranks per node")
          ->default_val(8);
  app.add_option("--optimizer", cf.optimizer, "memory/step model: sgd, momentum, adam, adamw")
      ->default_val("adamw");
  app.add_option("--precision", cf.precision,
                 "nnsc-run's precision.mode to price: fp32, bf16 or fp16 (mixed: bf16)")
      ->default_val("fp32");
  app.add_flag("--tf32", cf.tf32,
               "price float32 matmuls at the device's tf32 rate (nnsc-run precision.tf32: true)");
  NNSC_PARSE(app, argc, argv);
  if (seedOpt->count())
    opts.seed = seed;
  // Given on the command line, an empty value is a mistake, never "not given".
  for (CLI::Option *o : {zero, recomputeOpt, memLimitOpt, pipelineOpt, constraintsOpt, planNgpus,
                         clusterOpt, deviceOpt, commOpt})
    if (o->count() && o->as<std::string>().empty()) {
      std::cerr << "error: " << o->get_name() << " is empty; expected a value\n";
      return 1;
    }
  // A cluster file names its device, comm table and devices per node: a flag beside it would
  // be dropped without a word.
  for (CLI::Option *o : {deviceOpt, commOpt, perNodeOpt})
    if (o->count() && clusterOpt->count()) {
      std::cerr << "error: " << o->get_name() << " with --cluster: the cluster file names the "
                << "device spec, the comm table and the devices per node; pass one or the "
                << "other\n";
      return 1;
    }
  if (perNodeOpt->count() && !deviceOpt->count()) {
    std::cerr << "error: --devices-per-node needs --device (the spec it lays out)\n";
    return 1;
  }
  if (zeroNgroups->count() && opts.zeroNgroups < 1) {
    std::cerr << "error: impossible --zero-ngroups " << opts.zeroNgroups
              << "; expected a positive number of blocks\n";
    return 1;
  }
  bool autodist = opts.policy == "autodist";
  using Flag = std::tuple<const char *, std::string *, int *>;
  for (auto [flag, text, target] :
       {Flag{"--zero", &zeroText, &opts.zero}, Flag{"--plan-ngpus", &planNgpusText, &opts.planNgpus}}) {
    if (text->empty())
      continue;
    auto v = autoOrInt(flag, *text);
    if (v && *v < 0 && *text != "auto")
      v = nnsc::errorf("error: impossible {} {}; expected auto or a number >= 0", flag, *text);
    else if (v && *v < 0 && !autodist)
      v = nnsc::errorf("error: {} auto needs --policy autodist", flag);
    else if (v && *v == 0 && target == &opts.planNgpus) // 0 is not "not given"
      v = nnsc::errorf("error: impossible --plan-ngpus 0; expected a positive number of devices{}",
                       autodist ? " or auto" : "");
    if (!v) {
      std::cerr << v.status().message() << '\n';
      return static_cast<int>(v.status().kind());
    }
    *target = *v;
  }
  if (!autodist)
    for (auto [flag, text] :
         {std::pair<const char *, std::string *>{"--recompute", &recomputeText},
          std::pair<const char *, std::string *>{"--mem-limit", &memLimitText},
          std::pair<const char *, std::string *>{"--constraints", &constraintsPath},
          std::pair<const char *, std::string *>{"--pipeline", &pipelineText}})
      if (!text->empty()) {
        std::cerr << "error: " << flag << " needs --policy autodist\n";
        return 1;
      }
  if (ilpCheck && !autodist) {
    std::cerr << "error: --ilp-check needs --policy autodist\n";
    return 1;
  }
  if (opts.planNgpus < 0) // auto
    opts.planNgpus = 0;
  if (globalBatchOpt->count() && (!autodist || globalBatch < 1 || globalBatch > 1 << 20)) {
    std::cerr << (autodist ? nnsc::errorf("error: impossible --global-batch {}; expected 1 to {}",
                                          globalBatch, 1 << 20)
                                 .message()
                           : std::string("error: --global-batch needs --policy autodist"))
              << '\n';
    return 1;
  }
  int pipelineStages = 0;
  if (!pipelineText.empty()) {
    auto v = autoOrInt("--pipeline", pipelineText);
    if (v && ((*v <= 0 && pipelineText != "auto") || *v > 1024))
      v = nnsc::errorf("error: impossible --pipeline {}; expected auto or 1 to 1024", pipelineText);
    if (!v) {
      std::cerr << v.status().message() << '\n';
      return static_cast<int>(v.status().kind());
    }
    pipelineStages = *v < 0 ? -1 : (*v == 1 ? 0 : *v);
  }

  auto cluster = nnsc::cost::selectCluster(cf.cluster, cf.device, cf.comm, cf.devicesPerNode);
  auto optimizer = nnsc::cost::parseOptimizer(cf.optimizer);
  auto precision = nnsc::cost::parsePrecision(cf.precision);
  for (const nnsc::Status &bad : {cluster.status(), optimizer.status(), precision.status()})
    if (!bad.isOk()) {
      std::cerr << bad.message() << '\n';
      return static_cast<int>(bad.kind());
    }
  if (cf.tf32) {
    if (!*cluster) {
      std::cerr << "error: --tf32 needs a device to price: --device D.yaml or --cluster C.yaml\n";
      return 1;
    }
    if (!(*cluster)->device.flops.count("tf32")) {
      std::cerr << "error: --tf32: device spec '" << (*cluster)->device.name
                << "' has no flops.tf32 (its float32 matmuls have no TF32 mode to price)\n";
      return 1;
    }
    (*cluster)->device.tf32 = true;
  }
  nnsc::plan::PrintOptions printOptions;
  printOptions.memory.optimizer = *optimizer;
  printOptions.memory.precision = *precision;
  if (*cluster)
    printOptions.capacity = (*cluster)->device.memoryBytes;
  auto check = partitionCheck(*cluster, printOptions.memory);

  if (!outputs.report.empty() && !*cluster) {
    std::cerr << "error: --report needs a device to price the plan: --device D.yaml (with "
                 "--comm T.yaml) or --cluster C.yaml\n";
    return 1;
  }

  // autodist: the search, handed to the plan library as the policy's body.
  std::string report;
  std::optional<nnsc::autodist::Result> searched; // for --report
  nnsc::autodist::Options ad;
  if (autodist) {
    if (!*cluster) {
      std::cerr << "error: policy 'autodist' needs a device to plan for: --device D.yaml (with "
                   "--comm T.yaml) or --cluster C.yaml\n";
      return 1;
    }
    ad.runtimeNgpus = opts.runtimeNgpus;
    ad.planNgpus = opts.planNgpus;
    ad.microBatches = opts.microBatches;
    ad.zero = opts.zero;
    // Checked here: the plan carries the blocks the search kept (below).
    if (opts.zeroNgroups == 0 || opts.zeroNgroups < -1 ||
        (opts.zeroNgroups > 1 && opts.zero == 0)) {
      std::cerr << (opts.zeroNgroups > 1
                        ? nnsc::errorf("error: --zero-ngroups {} with --zero 0: the blocks shard "
                                       "ZeRO's states; pass --zero 1, 2 or auto",
                                       opts.zeroNgroups)
                        : nnsc::errorf("error: impossible --zero-ngroups {}; expected a positive "
                                       "number of blocks",
                                       opts.zeroNgroups))
                       .message()
                << '\n';
      return 1;
    }
    ad.zeroNgroups = std::max(1, opts.zeroNgroups);
    ad.memory = printOptions.memory;
    ad.graphPath = input;
    ad.foldRepeats = !eachLayer;
    ad.wholeGraph = wholeGraph;
    if (ilpCheck) {
      if (!nnsc::search::ilpAvailable()) {
        std::cerr << "error: --ilp-check needs CBC, and this nnsc-plan was built without it "
                     "(coinor-libcbc-dev)\n";
        return 1;
      }
      ad.ilpCheck = std::make_shared<nnsc::autodist::IlpCheck>();
    }
    ad.globalBatch = globalBatch;
    ad.pipelineStages = pipelineStages;
    ad.schedule = opts.pipeline.schedule;
    ad.virtualStages = opts.pipeline.virtualStages;
    ad.pipelinePivots = opts.pipeline.pivots;
    if (nnsc::Status st = nnsc::plan::checkPipelineOptions(
            {std::max(2, pipelineStages), ad.virtualStages, ad.schedule, ad.pipelinePivots});
        !st) {
      std::cerr << st.message() << '\n';
      return 1;
    }
    if (!constraintsPath.empty()) {
      auto constraints = nnsc::plan::readConstraints(constraintsPath);
      if (!constraints) {
        std::cerr << constraints.status().message() << '\n';
        return 1;
      }
      ad.constraints = constraints.take();
    }
    if (!memLimitText.empty()) {
      auto bytes = parseBytes(memLimitText);
      if (!bytes) {
        std::cerr << bytes.status().message() << '\n';
        return 1;
      }
      if (*cluster && *bytes > (*cluster)->device.memoryBytes) {
        std::cerr << nnsc::errorf("error: --mem-limit {} is above the memory of a device of "
                                  "{} ({:.1f} GiB): no plan could use it",
                                  memLimitText, (*cluster)->device.name,
                                  (*cluster)->device.memoryBytes / double(1 << 30))
                         .message()
                  << '\n';
        return 1;
      }
      ad.memLimit = *bytes;
    }
    if (recomputeText == "none") {
      ad.recompute = nnsc::autodist::Options::Recompute::None;
    } else if (!recomputeText.empty() && recomputeText != "auto") {
      ad.recompute = nnsc::autodist::Options::Recompute::Modules;
      std::stringstream ss(recomputeText);
      for (std::string cls; std::getline(ss, cls, ',');)
        if (!cls.empty())
          ad.recomputeModules.push_back(cls);
    }
    if (!opts.recomputeModules.empty()) {
      ad.recompute = nnsc::autodist::Options::Recompute::Modules;
      ad.recomputeModules = opts.recomputeModules;
      opts.recomputeModules.clear();
    }
    const nnsc::cost::Cluster &machine = **cluster;
    opts.search = [&ad, &machine, &report, &searched](const nnsc::ir::Graph &graph)
        -> nnsc::Expected<nnsc::proto::Plan> {
      auto found = nnsc::autodist::search(graph, machine, ad);
      if (!found)
        return found.status();
      std::ostringstream os;
      nnsc::autodist::printReport(*found, graph, machine, os);
      report = os.str();
      searched = *found;
      return found->plan;
    };
    opts.zero = -1; // the plan carries the stage the search chose
    opts.zeroNgroups = -1; // and its blocks, where ZeRO is on
  }

  if (!outputs.report.empty())
    outputs.reportPage = [&](const nnsc::proto::Plan &plan, const nnsc::ir::Graph &graph) {
      nnsc::autodist::HtmlReportInput in;
      in.graph = &graph;
      in.plan = &plan;
      in.cluster = &**cluster;
      in.memory = printOptions.memory;
      if (searched) {
        in.search = &*searched;
        in.memLimit = searched->memLimit;
      }
      return nnsc::autodist::htmlReport(in);
    };
  bool planning = out->count() || savePlanFile->count() || policy->count() || ngpus->count() ||
                  micro->count() || planNgpus->count() || planFile->count() || recompute->count() ||
                  zero->count() || zeroNgroups->count();
  nnsc::Status st;
  if (planning) {
    // autodist partitioned and priced the plan it chose: checking it again
    // only pays for the text --print shows (0.3 s on an 80-layer Llama).
    st = nnsc::plan::runPlanTool(input, opts, outputs, print, std::cout, std::cerr,
                                 autodist && !print ? nnsc::plan::PlanCheck{} : check,
                                 printOptions);
    if (!report.empty())
      (print ? std::cout : std::cerr) << report;
  }
  else if (print || reportOpt->count()) { // a plan written before: shown, reported
    if (print)
      st = nnsc::plan::printPlanFile(input, graphOverride, std::cout, check, printOptions);
    if (st.isOk() && reportOpt->count())
      st = nnsc::plan::reportPlanFile(input, graphOverride, outputs, std::cerr,
                                      printOptions.memory.precision);
  } else
    st = nnsc::Status::error("error: nothing to do: pass -o PLAN.pb to write a plan, or --print "
                             "PLAN.pb to show one");
  if (!st.isOk()) {
    std::cerr << st.message() << '\n';
    return static_cast<int>(st.kind());
  }
  return 0;
}

int main(int argc, char **argv) { return nnsc::runTool("nnsc-plan", argc, argv, toolMain); }
