// nnsc-profile-device: measure this machine's device (matmul FLOP/s per
// dtype, memory bandwidth, launch floor) and write a device spec
// (docs/profile-comm.md).
//   nnsc-profile-device --out SPEC.yaml [--device cpu|cuda] [--name NAME] [--nproc N]
//                       [--threads T] [--dtypes LIST] [--seconds S]
#include <iostream>

#include "nnsc/Profile/ProfileDevice.h"
#include "nnsc/Support/ToolMain.h"

namespace {

int toolMain(int argc, char **argv) {
  CLI::App app{"nnsc-profile-device: measure peak matmul FLOP/s, memory bandwidth and the "
               "launch floor of this machine's device with the threads a training worker uses, "
               "and write a device spec (docs/profile-comm.md)"};
  nnsc::profile::ProfileDeviceOptions o;
  app.add_option("--out,-o", o.out, "the device spec to write (YAML)")->required();
  app.add_option("--device", o.device, "cpu or cuda")->default_val("cpu");
  app.add_option("--name", o.name, "the spec's name (default cpu-local / cuda-local)");
  app.add_option("--nproc,--nproc-per-node", o.nproc,
                 "measure in N local workers at once, as N training workers would run");
  app.add_option("--threads", o.threads,
                 "intra-op threads per worker (default: cores / workers on the node, as "
                 "nnsc-run)");
  app.add_option("--dtypes", o.dtypes,
                 "matmul dtypes: float32, tf32 (cuda: float32 on tensor cores), bfloat16, "
                 "float16 (default float32,bfloat16; on cuda also tf32 and float16)");
  app.add_option("--seconds", o.seconds, "time budget of each measured matmul size")
      ->default_val(0.3);
  NNSC_PARSE(app, argc, argv);
  o.argv.assign(argv + 1, argv + argc);
  return nnsc::profile::profileDeviceCommand(o, std::cout, std::cerr);
}

} // namespace

int main(int argc, char **argv) {
  return nnsc::runTool("nnsc-profile-device", argc, argv, toolMain);
}
