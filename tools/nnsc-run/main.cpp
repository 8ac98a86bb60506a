// nnsc-run: train a generated program from a YAML trainer config.
//   nnsc-run CONFIG.yaml [--key.path=value ...] [--nproc-per-node N] [--print-config]
#include <iostream>

#include "nnsc/Runtime/Launcher.h"
#include "nnsc/Runtime/RunCommand.h"
#include "nnsc/Support/ToolMain.h"

namespace {

int toolMain(int argc, char **argv) {
  CLI::App app{"nnsc-run: train a per-rank program (docs/trainer-config.md); extra "
               "--key.path=value arguments override config keys"};
  nnsc::rt::RunOptions opts;
  app.add_option("config", opts.config, "trainer config (YAML)")->required();
  app.add_option("--nproc-per-node", opts.nprocPerNode,
                 "start and supervise N local workers (else: one worker, placed by torchrun's "
                 "environment)");
  app.add_flag("--print-config", opts.printConfig, "print every key's resolved value and exit");
  app.allow_extras();
  NNSC_PARSE(app, argc, argv);
  if (app.count("--nproc-per-node"))
    if (auto st = nnsc::rt::checkLocalWorkers("--nproc-per-node", opts.nprocPerNode); !st) {
      std::cerr << st.message() << '\n';
      return 1;
    }
  for (const auto &extra : app.remaining()) {
    if (extra.rfind("--", 0) != 0 || extra.find('=') == std::string::npos) {
      std::cerr << "command line: error: unexpected argument '" << extra
                << "'; config overrides look like --train.steps=20\n";
      return 1;
    }
    opts.overrides.push_back(extra);
  }
  opts.argv.assign(argv + 1, argv + argc);
  return nnsc::rt::runCommand(opts, std::cout, std::cerr);
}

} // namespace

int main(int argc, char **argv) { return nnsc::runTool("nnsc-run", argc, argv, toolMain); }
