#ifndef NNSC_RUNTIME_OPTIMIZERSTATEKEY_H
#define NNSC_RUNTIME_OPTIMIZERSTATEKEY_H

/// \file
/// The keys of a rank's optimizer state in its checkpoint: "PARAM/FIELD" for
/// a whole shard's state ("p3/step", "p3/exp_avg") and "PARAM/FIELD@OFFSET"
/// for a ZeRO piece, the slice of the shard's flattened elements from OFFSET
/// on. ZeroOptimizer writes and reads them; nnsc-merge-ckpt reads them.

#include <cstdint>
#include <optional>
#include <string>

namespace nnsc::rt {

struct OptimizerStateKey {
  std::string param; ///< the shard's name in the rank's program
  std::string field; ///< step, exp_avg, exp_avg_sq, momentum_buffer
  int64_t offset = -1; ///< a ZeRO piece's first element; -1: the whole shard
};

/// "p3/exp_avg@128" -> {p3, exp_avg, 128}; nullopt without a '/' or with an
/// offset that is not a decimal int64_t.
inline std::optional<OptimizerStateKey> parseOptimizerStateKey(const std::string &key) {
  size_t slash = key.find('/');
  if (slash == std::string::npos)
    return std::nullopt;
  OptimizerStateKey k{key.substr(0, slash), key.substr(slash + 1)};
  size_t at = k.field.find('@');
  if (at == std::string::npos)
    return k;
  std::string digits = k.field.substr(at + 1);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos ||
      digits.size() > 18) // beyond int64_t: no offset of a real tensor
    return std::nullopt;
  k.offset = std::stoll(digits);
  k.field.resize(at);
  return k;
}

/// The key of a ZeRO piece (offset >= 0) or of a whole shard's state.
inline std::string optimizerStateKey(const std::string &param, const std::string &field,
                                     int64_t offset = -1) {
  std::string key = param + "/" + field;
  if (offset >= 0)
    key += "@" + std::to_string(offset);
  return key;
}

} // namespace nnsc::rt

#endif
