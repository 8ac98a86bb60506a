// nnsc-verify: train a few steps in parallel (nnsc-run on CPU processes) and
// in one process (LibTorch), and compare losses, parameters and buffers.
//   nnsc-verify MODEL.pt --inputs inputs.yaml (--policy dp|tp|data [--tp T] | --plan-file F)
//               --ranks N [--steps 3] [--accum 1] [--optimizer sgd|adam|adamw] [--lr LR]
//               [--rtol 1e-5] [--weights-rtol R] [--work DIR] [--keep]
#include <iostream>

#include "nnsc/Support/ToolMain.h"
#include "nnsc/Verify/Verify.h"

namespace {

int toolMain(int argc, char **argv) {
  CLI::App app{"nnsc-verify: check a parallel plan against the original model before a long "
               "run (a few training steps on CPU processes vs. one process; losses, "
               "parameters and buffers within a tolerance)"};
  nnsc::verify::VerifyOptions o;
  app.add_option("model", o.modelPath, "TorchScript archive (real weights)")->required();
  app.add_option("--inputs", o.inputsPath, "sample-input spec (inputs.yaml)")->required();
  auto *policy =
      app.add_option("--policy", o.policy, "dp, tp, data, hybrid or file")->default_val("dp");
  app.add_option("--tp", o.planNgpus, "devices one model copy spans (tp, data, hybrid, file)");
  auto *planFile = app.add_option("--plan-file", o.planFile, "a plan YAML (implies --policy file)");
  app.add_option("--ranks", o.ranks, "processes to train on")->default_val(2);
  app.add_option("--steps", o.steps, "optimizer steps")->default_val(3);
  app.add_option("--accum", o.accumulation, "gradient accumulation")->default_val(1);
  app.add_option("--optimizer", o.optimizer, "sgd (momentum 0.9), adam or adamw")
      ->default_val("sgd");
  app.add_option("--lr", o.lr, "learning rate (default 0.05 for sgd, 3e-3 for adam(w))");
  app.add_option("--grad-clip", o.gradClip, "max global gradient norm (0: off)");
  app.add_option("--rtol", o.rtol, "tolerance, relative to the largest magnitude")
      ->default_val(1e-5);
  app.add_option("--weights-rtol", o.weightsRtol,
                 "tolerance of parameters and buffers (default: --rtol for sgd, 10 x for adam(w))");
  app.add_option("--samples", o.samples, "rows of the generated dataset")->default_val(64);
  app.add_option("--seed", o.seed, "seed of the data")->default_val(1234);
  app.add_option("--work", o.workDir, "work directory (kept; default: a temporary one)");
  app.add_flag("--keep", o.keep, "keep the temporary work directory after a pass");
  app.add_option("--trainer", o.trainerBinary, "the nnsc-run binary (default: beside this one)");
  // Testing only: scale one tensor's shards by 1.001 before training.
  app.add_option("--inject-fault", o.faultTensor)->group("");
  NNSC_PARSE(app, argc, argv);
  if (planFile->count() && !policy->count())
    o.policy = "file";
  auto result = nnsc::verify::runVerify(o, std::cout, std::cerr);
  if (!result) {
    std::cerr << result.status().message() << '\n';
    return static_cast<int>(result.status().kind());
  }
  return result->passed ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) { return nnsc::runTool("nnsc-verify", argc, argv, toolMain); }
