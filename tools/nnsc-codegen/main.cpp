// nnsc-codegen: graph.pb + plan.pb → per-rank programs, manifests, shards.
//   nnsc-codegen GRAPH.pb PLAN.pb [--weights W.safetensors] -o OUTDIR [--bucket-mb 25] [--print]
//   nnsc-codegen --print-manifest OUTDIR/rank0.pb [--json]
#include <cmath>
#include <iostream>

#include <fmt/format.h>

#include "nnsc/CodeGen/CodeGen.h"
#include "nnsc/Support/ToolMain.h"

namespace {

// 1 TiB: far past any gradient bucket, and its bytes fit int64.
constexpr int64_t kMaxBucketMb = 1024 * 1024;

int toolMain(int argc, char **argv) {
  CLI::App app{"nnsc-codegen: generate one TorchScript program per rank from a plan"};
  nnsc::codegen::CodeGenOptions opts;
  std::string manifestPath;
  double bucketMb = 25;
  bool json = false;
  app.add_option("graph", opts.graphPath, "graph.pb from nnsc-trace");
  app.add_option("plan", opts.planPath, "plan.pb from nnsc-plan");
  app.add_option("--weights", opts.weightsPath,
                 "full weights (default: weights.safetensors beside the graph)");
  app.add_option("-o,--out", opts.outDir, "output directory for rank{r}.py/.pb/.safetensors");
  app.add_option("--bucket-mb", bucketMb, "gradient allreduce bucket size in MiB")->default_val(25);
  app.add_flag("--print", opts.print, "print rank 0's program and manifest");
  app.add_option("--print-manifest", manifestPath, "print the text form of a rank manifest");
  app.add_flag("--json", json, "with --print-manifest: print JSON");
  NNSC_PARSE(app, argc, argv);

  nnsc::Status st;
  if (!manifestPath.empty()) {
    st = nnsc::codegen::printManifestFile(manifestPath, json, std::cout);
  } else if (opts.graphPath.empty() || opts.planPath.empty()) {
    st = nnsc::Status::error("error: expected GRAPH.pb PLAN.pb (or --print-manifest RANK.pb)");
  } else if (opts.outDir.empty() && !opts.print) {
    st = nnsc::Status::error("error: nothing to do: pass -o OUTDIR to write the ranks, or --print");
  } else if (!(bucketMb > 0 && bucketMb <= double(kMaxBucketMb))) { // NaN fails too
    st = nnsc::Status::error(fmt::format(
        "error: impossible --bucket-mb {:g}; expected 0 < MiB <= {}", bucketMb, kMaxBucketMb));
  } else {
    opts.bucketBytes = static_cast<int64_t>(std::llround(bucketMb * 1024 * 1024));
    st = nnsc::codegen::runCodeGen(opts, std::cout, std::cerr);
  }
  if (!st.isOk()) {
    std::cerr << st.message() << '\n';
    return static_cast<int>(st.kind());
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) { return nnsc::runTool("nnsc-codegen", argc, argv, toolMain); }
