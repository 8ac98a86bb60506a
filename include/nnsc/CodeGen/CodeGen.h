#pragma once
/// `nnsc-codegen`: graph.pb + plan.pb (+ weights) → per-rank programs,
/// manifests and weight shards.

#include <cstdint>
#include <ostream>
#include <string>

#include "nnsc/CodeGen/Manifest.h"
#include "nnsc/Support/Status.h"

namespace nnsc::codegen {

struct CodeGenOptions {
  std::string graphPath, planPath;
  std::string weightsPath; ///< empty: weights.safetensors beside the graph
  std::string outDir;      ///< empty: generate and print only
  int64_t bucketBytes = kDefaultBucketBytes;
  bool print = false; ///< print rank 0's program and manifest
};

/// Generates every rank in memory first (so bad input writes nothing), then
/// writes OUT/rank{r}.py, rank{r}.pb and, when the graph has weights,
/// rank{r}.safetensors for each rank, and removes rank files of higher ranks
/// left by an earlier run. Progress lines go to `log`, --print text to `out`.
Status runCodeGen(const CodeGenOptions &options, std::ostream &out, std::ostream &log);

/// `nnsc-codegen --print-manifest rank{r}.pb [--json]`.
Status printManifestFile(const std::string &path, bool json, std::ostream &out);

} // namespace nnsc::codegen
