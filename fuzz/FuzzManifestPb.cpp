// Fuzzes a rank manifest (rank{r}.pb) as nnsc-codegen --print and the
// runtime read it: parse and check (codegen::parseManifest), print it as text
// and JSON, and take its shard table (what checkpoints carry).
#include <sstream>

#include "FuzzCommon.h"
#include "nnsc/CodeGen/Manifest.h"
#include "nnsc/Runtime/ShardTable.h"
#include "nnsc/manifest.pb.h"

#include <nlohmann/json.hpp>

using namespace nnsc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto manifest = codegen::parseManifest(fuzz::bytesOf(data, size), "rank0.pb");
  if (!manifest) {
    fuzz::checkMessage(manifest.status());
    return 0;
  }
  std::ostringstream os;
  codegen::printManifest(*manifest, os);
  (void)codegen::manifestToJson(*manifest);
  auto shards = rt::shardsOfManifest(*manifest);
  auto back = rt::shardsFromJson(rt::shardsToJson(shards), "rank0.json");
  NNSC_FUZZ_CHECK(back && back->size() == shards.size(), "the shard table does not read back");
  return 0;
}
