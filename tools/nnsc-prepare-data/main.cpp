// nnsc-prepare-data: character-level token files, as nanoGPT's shakespeare_char.
//   nnsc-prepare-data INPUT.txt -o DIR   → DIR/train.bin, DIR/val.bin, DIR/meta.json
#include <iostream>

#include "nnsc/Runtime/PrepareData.h"
#include "nnsc/Support/ToolMain.h"

namespace {

int toolMain(int argc, char **argv) {
  CLI::App app{"nnsc-prepare-data: tokenize a text file by characters (90% train, 10% val)"};
  std::string input, outDir;
  app.add_option("input", input, "UTF-8 text file")->required();
  app.add_option("-o,--out", outDir, "output directory")->required();
  NNSC_PARSE(app, argc, argv);
  auto result = nnsc::rt::prepareCharData(input, outDir);
  if (!result) {
    std::cerr << result.status().message() << '\n';
    return static_cast<int>(result.status().kind());
  }
  std::cout << "vocab " << result->vocabSize << ", train " << result->trainTokens << " tokens, val "
            << result->valTokens << " tokens -> " << outDir << '\n';
  return 0;
}

} // namespace

int main(int argc, char **argv) { return nnsc::runTool("nnsc-prepare-data", argc, argv, toolMain); }
