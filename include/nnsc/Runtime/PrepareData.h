#pragma once
/// Character-level tokenization as nanoGPT's shakespeare_char/prepare.py:
/// the sorted unique characters (Unicode code points of the UTF-8 input)
/// get ids 0..V-1; the first 90% of the characters (int(n * 0.9)) are the
/// training split, the rest validation. Writes DIR/train.bin and DIR/val.bin
/// (raw little-endian uint16) and DIR/meta.json {"vocab_size", "itos",
/// "stoi"}. No LibTorch.

#include <cstdint>
#include <string>

#include "nnsc/Support/Status.h"

namespace nnsc::rt {

struct PreparedData {
  int64_t vocabSize = 0;
  int64_t trainTokens = 0;
  int64_t valTokens = 0;
};

/// Tokenizes `inputPath` into `outDir` (created if missing). Errors: missing
/// or empty input, invalid UTF-8 (with the byte offset), more than 65,536
/// distinct characters.
Expected<PreparedData> prepareCharData(const std::string &inputPath, const std::string &outDir);

} // namespace nnsc::rt
