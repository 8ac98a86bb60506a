#include "../CatchCompat.h"

#include "nnsc/Support/Diagnostic.h"

using namespace nnsc;

TEST_CASE("formatError follows file:line:col: error: message") {
  CHECK(formatError({"a.yaml", 3, 7}, "bad key") == "a.yaml:3:7: error: bad key");
  CHECK(formatError({"a.yaml", 3, 0}, "bad key") == "a.yaml:3: error: bad key");
  CHECK(formatError({"a.yaml", 0, 0}, "bad key") == "a.yaml: error: bad key");
  CHECK(formatError({"", 0, 0}, "bad key") == "error: bad key");
}

TEST_CASE("formatErrorWithSnippet shows the line and a caret under the column") {
  std::string text = "one\ntwo three\nfour";
  CHECK(formatErrorWithSnippet({"f", 2, 5}, "here", text) ==
        "f:2:5: error: here\n  two three\n      ^");
  CHECK(lineOf(text, 3) == "four");
  CHECK(lineOf(text, 4).empty());
}
