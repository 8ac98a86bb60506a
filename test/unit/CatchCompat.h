// Catch2 v2 (Debian 12: <catch2/catch.hpp>) and v3 (Debian 13 and Ubuntu:
// <catch2/catch_all.hpp>) behind one header. Tests use the v3 spellings:
// Catch::Approx, Catch::Matchers::ContainsSubstring, Catch::Matchers::StartsWith.
#pragma once
#define NNSC_CATCH_COMPAT_H 1 // CommTestUtil.h: Catch2's CHECK is already here

#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>
#define NNSC_CATCH2_V3 1
#else
#include <catch2/catch.hpp>
#include <string>

namespace Catch {
using Detail::Approx;
namespace Matchers {
/// v3's name for v2's string Contains (v3's Contains is the range matcher).
inline StdString::ContainsMatcher ContainsSubstring(const std::string &s,
                                                    CaseSensitive::Choice cs = CaseSensitive::Yes) {
  return Contains(s, cs);
}
} // namespace Matchers
} // namespace Catch
#endif

using Catch::Approx;
