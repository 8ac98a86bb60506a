// nnsc-plan: graph.pb → plan.pb (how each node is split and placed).
//   nnsc-plan GRAPH.pb --policy dp|tp|data|hybrid|file --runtime-ngpus N
//             [--plan-ngpus T] [--plan-file PLAN.yaml] [--seed S] [--zero 0|1]
//             [--recompute-modules CLASS,...] -o plan.pb [--print]
//   nnsc-plan --print plan.pb [--graph GRAPH.pb]
// Cost model (docs/cost-model.md): [--cluster C.yaml | --device D.yaml [--comm T.yaml]
//   [--devices-per-node N]] [--optimizer adamw] [--precision fp32|mixed]
#include <iostream>
#include <optional>
#include <sstream>

#include "nnsc/Cost/Report.h"
#include "nnsc/Plan/PlanIO.h"
#include "nnsc/Support/ToolMain.h"
#include "nnsc/Transform/CommReport.h"
#include "nnsc/Transform/StepCost.h"

namespace {

struct CostFlags {
  std::string cluster, device, comm, optimizer = "adamw", precision = "fp32";
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

} // namespace

static int toolMain(int argc, char **argv) {
  CLI::App app{"nnsc-plan: choose how to parallelize a traced graph"};
  nnsc::plan::PlanOptions opts;
  std::string input, outPath, graphOverride;
  bool print = false;
  uint64_t seed = 0;
  app.add_option("input", input, "graph.pb to plan, or plan.pb to print with --print")->required();
  auto *policy = app.add_option("--policy", opts.policy,
                                "parallelization policy; one of: " + nnsc::plan::policyNames())
                     ->default_val("dp");
  auto *ngpus = app.add_option("--runtime-ngpus", opts.runtimeNgpus, "total ranks at run time")
                    ->default_val(1);
  auto *planNgpus = app.add_option("--plan-ngpus", opts.planNgpus,
                                   "devices one model copy spans (tp, data, hybrid, file)");
  auto *planFile = app.add_option("--plan-file", opts.planFile, "policy file: the plan YAML");
  auto *seedOpt = app.add_option("--seed", seed, "tp/hybrid: pick split dims at random");
  auto *micro =
      app.add_option("--micro-batches", opts.microBatches, "micro-batches per optimizer step")
          ->default_val(1);
  auto *recompute = app.add_option("--recompute-modules", opts.recomputeModules,
                                   "module classes to recompute in backward, each instance a group "
                                   "(Block,LlamaDecoderLayer)")
                        ->delimiter(',');
  auto *zero = app.add_option("--zero", opts.zero,
                              "ZeRO stage over the data-parallel copies: 0 (off) or 1 (optimizer "
                              "states sharded; docs/zero.md)");
  auto *out = app.add_option("-o,--out", outPath, "where to write plan.pb");
  app.add_option("--graph", graphOverride, "with --print PLAN.pb: the graph it was made for");
  app.add_flag("--print", print, "print the plan's text form");
  CostFlags cf;
  app.add_option("--cluster", cf.cluster,
                 "cluster file: device spec, devices per node, comm table");
  app.add_option("--device", cf.device, "device spec (configs/devices/*.yaml)");
  app.add_option("--comm", cf.comm, "communication table (configs/comm/*.yaml)");
  app.add_option("--devices-per-node", cf.devicesPerNode, "with --device: ranks per node")
      ->default_val(8);
  app.add_option("--optimizer", cf.optimizer, "memory/step model: sgd, momentum, adam, adamw")
      ->default_val("adamw");
  app.add_option("--precision", cf.precision, "memory model: fp32 or mixed")->default_val("fp32");
  NNSC_PARSE(app, argc, argv);
  if (seedOpt->count())
    opts.seed = seed;

  auto cluster = nnsc::cost::selectCluster(cf.cluster, cf.device, cf.comm, cf.devicesPerNode);
  auto optimizer = nnsc::cost::parseOptimizer(cf.optimizer);
  auto precision = nnsc::cost::parsePrecision(cf.precision);
  for (const nnsc::Status &bad : {cluster.status(), optimizer.status(), precision.status()})
    if (!bad.isOk()) {
      std::cerr << bad.message() << '\n';
      return static_cast<int>(bad.kind());
    }
  nnsc::plan::PrintOptions printOptions;
  printOptions.memory.optimizer = *optimizer;
  printOptions.memory.precision = *precision;
  if (*cluster)
    printOptions.capacity = (*cluster)->device.memoryBytes;
  auto check = partitionCheck(*cluster, printOptions.memory);

  bool planning = out->count() || policy->count() || ngpus->count() || micro->count() ||
                  planNgpus->count() || planFile->count() || recompute->count() || zero->count();
  nnsc::Status st;
  if (planning)
    st = nnsc::plan::runPlanTool(input, opts, outPath, print, std::cout, std::cerr, check,
                                 printOptions);
  else if (print)
    st = nnsc::plan::printPlanFile(input, graphOverride, std::cout, check, printOptions);
  else
    st = nnsc::Status::error("error: nothing to do: pass -o PLAN.pb to write a plan, or --print "
                             "PLAN.pb to show one");
  if (!st.isOk()) {
    std::cerr << st.message() << '\n';
    return static_cast<int>(st.kind());
  }
  return 0;
}

int main(int argc, char **argv) { return nnsc::runTool("nnsc-plan", argc, argv, toolMain); }
