#pragma once
/// Integers read from untrusted JSON (rank{r}.json). nlohmann's get<int>()
/// converts a float or an integer out of range with a C++ cast whose result
/// is undefined (2.6e34 as int64); these accept only integers that fit in T
/// and throw nlohmann's type_error otherwise, naming the key and the range.

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace nnsc::rt {

/// `x` as a T; `key` names it in the error.
template <typename T> T jsonInt(const nlohmann::json &x, const std::string &key) {
  constexpr auto lo = std::numeric_limits<T>::min();
  constexpr auto hi = std::numeric_limits<T>::max();
  if (x.is_number_unsigned() && x.get<uint64_t>() <= static_cast<uint64_t>(hi))
    return static_cast<T>(x.get<uint64_t>());
  if (x.is_number_integer() && !x.is_number_unsigned() && x.get<int64_t>() >= lo &&
      x.get<int64_t>() <= hi)
    return static_cast<T>(x.get<int64_t>());
  throw nlohmann::json::type_error::create(
      302, fmt::format("'{}' must be an integer from {} to {}, not {}", key, lo, hi, x.dump()), &x);
}

/// j[key] as a T.
template <typename T> T jsonIntAt(const nlohmann::json &j, const std::string &key) {
  return jsonInt<T>(j.at(key), key);
}

/// j[key], a list of int64 (a shape, offsets).
inline std::vector<int64_t> jsonIntsAt(const nlohmann::json &j, const std::string &key) {
  const nlohmann::json &list = j.at(key);
  if (!list.is_array())
    throw nlohmann::json::type_error::create(
        302, fmt::format("'{}' must be a list of integers, not {}", key, list.dump()), &list);
  std::vector<int64_t> out;
  for (const auto &x : list)
    out.push_back(jsonInt<int64_t>(x, key));
  return out;
}

} // namespace nnsc::rt
