#pragma once
// The table of trainer-config keys: name, type, default and where the typed
// value goes. One place lists them all (docs/trainer-config.md mirrors it).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nnsc/Runtime/TrainerConfig.h"

namespace nnsc::rt {

enum class KeyType { Int, Float, String, Choice, FloatPair, RankList };

struct KeySpec {
  std::string key;
  KeyType type = KeyType::String;
  std::string def;                  ///< default, as YAML text (may use ${...})
  std::vector<std::string> choices; ///< for Choice
  double min = -1e300;              ///< for Int and Float
  double max = 1e300;               ///< for Int and Float: a limit checked before any work
  std::function<int64_t &(TrainerConfig &)> intRef;
  std::function<double &(TrainerConfig &)> floatRef;
  std::function<std::string &(TrainerConfig &)> strRef;
  std::function<void(TrainerConfig &, double, double)> setPair;
  std::function<std::vector<int64_t> &(TrainerConfig &)> ranksRef; ///< RankList: empty = all
};

/// Every accepted key, in documentation order.
const std::vector<KeySpec> &trainerConfigKeys();

} // namespace nnsc::rt
