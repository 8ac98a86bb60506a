// nnsc-profile-comm: measure collective times over group and message sizes
// and write a communication table (docs/profile-comm.md).
//   nnsc-profile-comm --out TABLE.yaml [--nproc N] [--backend gloo|nccl] [--device ID]
//                     [--sizes MIN:MAX[:FACTOR]] [--collectives LIST] [--iters N] [--warmup N]
//                     [--gap-ms MS]
#include <iostream>

#include "nnsc/Profile/ProfileComm.h"
#include "nnsc/Support/ToolMain.h"

namespace {

int toolMain(int argc, char **argv) {
  CLI::App app{"nnsc-profile-comm: time all_reduce, all_gather, reduce_scatter, all_to_all, "
               "broadcast and send_recv over group and message sizes on this machine's backend "
               "and write a communication table (docs/profile-comm.md)"};
  nnsc::profile::ProfileCommOptions o;
  app.add_option("--out,-o", o.out, "the table to write (YAML)")->required();
  app.add_option("--nproc,--nproc-per-node", o.nproc,
                 "start and supervise N local workers (else: one worker, placed by torchrun's "
                 "environment)");
  app.add_option("--backend", o.backend, "gloo (CPU tensors) or nccl (CUDA tensors)")
      ->default_val("gloo");
  app.add_option("--device", o.device,
                 "the device id written in the table (default cpu-local / cuda-local)");
  app.add_option("--sizes", o.sizes, "message sizes MIN:MAX[:FACTOR], FACTOR 4 by default")
      ->default_val("1KiB:64MiB");
  app.add_option("--collectives", o.collectives,
                 "comma-separated: all_reduce, all_gather, reduce_scatter, all_to_all, "
                 "broadcast, send_recv, or all")
      ->default_val("all");
  app.add_option("--iters", o.iters, "timed iterations per point")->default_val(20);
  app.add_option("--warmup", o.warmup, "untimed iterations per point")->default_val(5);
  app.add_option("--rounds", o.rounds,
                 "sweeps over all points, sharing the iterations; each point keeps its fastest "
                 "round's median")
      ->default_val(3);
  app.add_option("--point-seconds", o.pointSeconds,
                 "time budget of a point: fewer timed iterations (at least 5) beyond it")
      ->default_val(0.5);
  app.add_option("--timeout", o.timeoutSeconds, "seconds an operation may take before it fails")
      ->default_val(60);
  app.add_option("--gap-ms", o.gapMs,
                 "milliseconds of matmuls before each timed operation, as a step computes "
                 "between collectives; the figure is then the mean (default: 5 on gloo, 0 on nccl)");
  bool noSpin = false;
  app.add_flag("--no-spin", noSpin,
               "let the CPUs idle in waits (default: a SCHED_IDLE thread per worker keeps them "
               "awake, as training does; docs/profile-comm.md)");
  NNSC_PARSE(app, argc, argv);
  o.spin = !noSpin;
  o.argv.assign(argv + 1, argv + argc);
  return nnsc::profile::profileCommCommand(o, std::cout, std::cerr);
}

} // namespace

int main(int argc, char **argv) { return nnsc::runTool("nnsc-profile-comm", argc, argv, toolMain); }
