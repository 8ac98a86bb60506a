// nnsc-plan: graph.pb → plan.pb (how each node is split and placed).
//   nnsc-plan GRAPH.pb --policy dp|tp|data|hybrid|file --runtime-ngpus N
//             [--plan-ngpus T] [--plan-file PLAN.yaml] [--seed S] [--zero 0|1]
//             [--recompute-modules CLASS,...] -o plan.pb [--print]
//   nnsc-plan --print plan.pb [--graph GRAPH.pb]
#include <iostream>
#include <sstream>

#include "nnsc/Plan/PlanIO.h"
#include "nnsc/Support/ToolMain.h"
#include "nnsc/Transform/CommReport.h"

namespace {

// Every plan must partition; with several plan devices --print also shows
// the communication the partition implies.
nnsc::Expected<std::string> partitionCheck(const nnsc::proto::Plan &plan,
                                           const nnsc::ir::Graph &graph) {
  auto pg = nnsc::transform::partitionGraph(graph, plan);
  if (!pg)
    return nnsc::Status(pg.status()).withContext("error: the plan does not partition");
  if (plan.plan_ngpus() <= 1)
    return std::string();
  std::ostringstream os;
  nnsc::transform::printCommunication(graph, *pg, os);
  return os.str();
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
  NNSC_PARSE(app, argc, argv);
  if (seedOpt->count())
    opts.seed = seed;

  bool planning = out->count() || policy->count() || ngpus->count() || micro->count() ||
                  planNgpus->count() || planFile->count() || recompute->count() || zero->count();
  nnsc::Status st;
  if (planning)
    st = nnsc::plan::runPlanTool(input, opts, outPath, print, std::cout, std::cerr, partitionCheck);
  else if (print)
    st = nnsc::plan::printPlanFile(input, graphOverride, std::cout, partitionCheck);
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
