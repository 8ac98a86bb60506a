// nnsc-trace: TorchScript archive + sample inputs → graph.pb + weights.
//   nnsc-trace MODEL.pt --inputs SPEC.yaml -o OUTDIR [--device meta|cpu] [--print]
//              [--verify | --no-verify]
//   nnsc-trace --print OUTDIR/graph.pb
#include <filesystem>
#include <iostream>

#include "nnsc/Support/ToolMain.h"
#include "nnsc/Trace/Trace.h"

namespace {

int toolMain(int argc, char **argv) {
  CLI::App app{"nnsc-trace: turn a TorchScript model into nnsc graph IR"};
  nnsc::trace::TraceOptions opts;
  std::string outDir;
  bool print = false;
  app.add_option("model", opts.modelPath, "TorchScript archive (.pt), or graph.pb with --print")
      ->required();
  app.add_option("--inputs", opts.inputsPath, "sample-input spec (YAML)");
  app.add_option("-o,--out", outDir, "output directory for graph.pb and weights.safetensors");
  app.add_option("--device", opts.device, "where to execute while tracing: meta or cpu")
      ->default_val("meta");
  app.add_option("--custom-ops", opts.customOps, "YAML with annotations of user ops");
  app.add_option("--seed", opts.seed, "seed for random sample inputs")
      ->default_val(0)
      ->check(nnsc::unsignedInteger());
  app.add_flag("--print", print, "print the graph's text form");
  bool verify = false, noVerify = false;
  auto *v = app.add_flag("--verify", verify,
                         "check the traced graph against LibTorch running the archive, whatever "
                         "its size (default: when the weights are real and at most 1 GiB)");
  app.add_flag("--no-verify", noVerify, "skip that check")->excludes(v);
  NNSC_PARSE(app, argc, argv);
  if (verify)
    opts.verify = nnsc::trace::TraceOptions::Verify::On;
  if (noVerify)
    opts.verify = nnsc::trace::TraceOptions::Verify::Off;

  nnsc::Status st = nnsc::Status::ok();
  bool isGraph =
      opts.modelPath.size() > 3 && opts.modelPath.compare(opts.modelPath.size() - 3, 3, ".pb") == 0;
  std::error_code ec;
  if (opts.inputsPath.empty() && std::filesystem::is_directory(opts.modelPath, ec))
    st = nnsc::errorf("{}: error: is a directory, expected a graph.pb to print (or an archive to "
                      "trace with --inputs)",
                      opts.modelPath);
  else if (isGraph && opts.inputsPath.empty())
    st = nnsc::trace::printGraphFile(opts.modelPath, std::cout);
  else if (opts.inputsPath.empty())
    st = nnsc::Status::error("error: --inputs SPEC.yaml is required to trace a model");
  else
    st = nnsc::trace::runTrace(opts, outDir, print, std::cout, std::cerr);
  if (!st.isOk()) {
    std::cerr << st.message() << '\n';
    return static_cast<int>(st.kind());
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) { return nnsc::runTool("nnsc-trace", argc, argv, toolMain); }
