// nnsc-merge-ckpt: reassemble a sharded checkpoint into one state_dict file.
//   nnsc-merge-ckpt CKPT_DIR -o merged.pt [--manifests PROGRAM_DIR] [--optimizer-output F]
//   nnsc-merge-ckpt PROGRAM_DIR --from-program -o initial.pt
#include <iostream>

#include "nnsc/Runtime/MergeCheckpoint.h"
#include "nnsc/Support/ToolMain.h"

namespace {

int toolMain(int argc, char **argv) {
  CLI::App app{"nnsc-merge-ckpt: merge the shards of every rank into the original model's "
               "state_dict (loadable with torch.load)"};
  nnsc::rt::MergeOptions opts;
  app.add_option("input", opts.input,
                 "checkpoint directory (step-<N>), run directory (its newest complete "
                 "checkpoint), or with --from-program a program directory")
      ->required();
  app.add_option("-o,--output", opts.output, "the merged file (torch.save format)")->required();
  app.add_option("--manifests", opts.manifests,
                 "program directory whose rank{r}.pb describe the shards (default: the shard "
                 "tables stored in the checkpoint)");
  app.add_option("--optimizer-output", opts.optimizerOutput,
                 "where the optimizer and training state go (default: merged.optim.pt beside "
                 "merged.pt); nnsc-run's checkpoint.resume: merged.pt reads it");
  app.add_flag("--from-program", opts.fromProgram,
               "merge the program's initial rank{r}.safetensors instead of a checkpoint");
  NNSC_PARSE(app, argc, argv);
  auto result = nnsc::rt::mergeCheckpoint(opts);
  if (!result) {
    std::cerr << result.status().message() << '\n';
    return static_cast<int>(result.status().kind());
  }
  std::cout << "merged " << result->tensors << " tensors (+" << result->aliases
            << " tied aliases) from " << result->ranks << " ranks of " << result->source << " into "
            << opts.output << '\n';
  if (!result->optimizerOutput.empty())
    std::cout << "wrote the optimizer state of step "
              << result->optimizer["nnsc/step"].item<int64_t>() << " (" << result->optimizer.size()
              << " tensors) into " << result->optimizerOutput << '\n';
  return 0;
}

} // namespace

int main(int argc, char **argv) { return nnsc::runTool("nnsc-merge-ckpt", argc, argv, toolMain); }
