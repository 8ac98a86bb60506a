// Fuzzes the trainer config (docs/trainer-config.md) as nnsc-run reads it:
// parse with an override and an environment, check the batch sizes for 2
// data-parallel copies, describe and hash it.
#include "FuzzCommon.h"
#include "nnsc/Runtime/TrainerConfig.h"

using namespace nnsc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rt::EnvLookup env = [](const std::string &name) -> std::optional<std::string> {
    if (name == "NNSC_FUZZ_STEPS")
      return std::string("7");
    return std::nullopt;
  };
  auto config =
      rt::parseTrainerConfig(fuzz::bytesOf(data, size), "train.yaml", {"train.seed=3"}, env);
  if (!config) {
    fuzz::checkMessage(config.status());
    return 0;
  }
  Status st = rt::checkBatchSizes(*config, 2);
  if (!st)
    fuzz::checkMessage(st);
  (void)rt::describeConfig(*config);
  (void)rt::configHash(*config);
  return 0;
}
