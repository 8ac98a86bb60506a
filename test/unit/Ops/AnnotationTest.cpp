#include <set>

#include "../CatchCompat.h"

#include "nnsc/Ops/Annotation.h"
#include "nnsc/Ops/AnnotationSplit.h"

using namespace nnsc;
using namespace nnsc::ops;

namespace {

OpAnno parsed(const std::string &text) {
  Expected<OpAnno> anno = parseAnnotation(text);
  INFO(text << ": " << anno.status().message());
  REQUIRE(anno);
  return anno.take();
}

std::string parseError(const std::string &text) {
  Expected<OpAnno> anno = parseAnnotation(text);
  REQUIRE_FALSE(anno);
  return anno.status().message();
}

BoundAnno bound(const std::string &text, const std::vector<ir::Shape> &ins,
                const std::map<std::string, int64_t> &known = {}) {
  Expected<BoundAnno> b = bindShapes(parsed(text), ins, {}, known);
  INFO(text << ": " << b.status().message());
  REQUIRE(b);
  return b.take();
}

std::string bindError(const std::string &text, const std::vector<ir::Shape> &ins,
                      const std::vector<ir::Shape> &outs = {},
                      const std::map<std::string, int64_t> &known = {}) {
  Expected<BoundAnno> b = bindShapes(parsed(text), ins, outs, known);
  REQUIRE_FALSE(b);
  return b.status().message();
}

SplitEffect effect(const BoundAnno &b, const std::string &id, int n) {
  Expected<SplitEffect> e = splitEffect(b, id, n);
  INFO(id << ": " << e.status().message());
  REQUIRE(e);
  return e.take();
}

std::string splitError(const BoundAnno &b, const std::string &id, int n) {
  Expected<SplitEffect> e = splitEffect(b, id, n);
  REQUIRE_FALSE(e);
  return e.status().message();
}

using Dims = std::vector<int>;
using Names = std::vector<std::string>;

} // namespace

TEST_CASE("every construct parses and prints back", "[annotation]") {
  const char *texts[] = {"* k+, n k+ -> * n",
                         "* k^, n k^, n -> * n",
                         "* k+, n k+, n -> * n",
                         "m k+, k+ n -> m n",
                         "b l d^, n^ d^, b l -> b l",
                         "b l (h d) -> b l h d",
                         "* d^ -> * d^",
                         "n^ d, * -> * d",
                         "*, n+ e -> * e",
                         "a+ b+ -> 1",
                         "?, a b -> a b",
                         "a b, b c -> ?",
                         "a b^, a -> ()",
                         "a+, () -> ()",
                         "(1 h d) 4 -> h d 4",
                         "*^ t -> 8 *^ t",
                         "-> 1",
                         "a ->",
                         "b m k+, b k+ n -> b m n",
                         "* k+, n k+, +n -> * n",
                         "* k+, n k+, +1 -> * n",
                         "+(), m k+, k+ n -> m n",
                         "+a (b c), a k+, k+ (b c) -> a (b c)"};
  for (const char *text : texts) {
    OpAnno anno = parsed(text);
    CHECK(anno.text() == text);
    CHECK(parsed(anno.text()) == anno);
  }
}

TEST_CASE("spacing and redundant spellings print canonically", "[annotation]") {
  CHECK(parsed("  m  k+ ,k+\tn->m n ").text() == "m k+, k+ n -> m n");
  CHECK(parsed("a(b c) 8^ -> (c) a").text() == "a (b c) 8 -> c a");
}

TEST_CASE("the tree records roles, merged dims, numerals, '*' and '?'", "[annotation]") {
  OpAnno linear = parsed("* k+, n k+ -> * n");
  REQUIRE(linear.inputs.size() == 2);
  CHECK(linear.inputs[0].dims[0].ellipsis);
  CHECK(linear.inputs[0].dims[1].idents[0].role == DimRole::Reduce);
  CHECK(linear.inputs[1].dims[0].idents[0].role == DimRole::Spatial);

  OpAnno view = parsed("b l (h d) 64 -> b l h d 64");
  const DimAnno &merged = view.inputs[0].dims[2];
  REQUIRE(merged.merged());
  CHECK(merged.idents[0].name == "h");
  CHECK(merged.idents[1].column == 8);
  const DimIdent &numeral = view.inputs[0].dims[3].idents[0];
  CHECK((numeral.numeric && numeral.value == 64 && numeral.role == DimRole::Frozen));

  OpAnno unknown = parsed("?, a -> a");
  CHECK((unknown.inputs[0].unknown && unknown.inputs[0].dims.empty()));
}

TEST_CASE("parse errors name the problem and point at its column", "[annotation]") {
  CHECK(parseError("m k+, k+ n") == "error: expected '->' between inputs and outputs at column 11\n"
                                    "  m k+, k+ n\n"
                                    "            ^");
  CHECK(parseError("m k++ -> m") == "error: second suffix '+' after 'k+' at column 5\n"
                                    "  m k++ -> m\n"
                                    "      ^");
  CHECK(parseError("m (h d -> m") == "error: unclosed '(' at column 3\n"
                                     "  m (h d -> m\n"
                                     "    ^");
  CHECK(parseError("a % b -> a") == "error: unexpected character '%' at column 3\n"
                                    "  a % b -> a\n"
                                    "    ^");
  CHECK(parseError("a -> a -> a").rfind("error: unexpected second '->' at column 8\n", 0) == 0);
  CHECK(parseError("(h (d)) -> h").rfind("error: nested '(' is not allowed at column 4\n", 0) == 0);
  CHECK(parseError("a, -> a").rfind("error: expected a dimension annotation at column 4\n", 0) ==
        0);
  CHECK(parseError("a ? -> a")
            .rfind("error: '?' must stand alone for its whole tensor at column 3", 0) == 0);
  CHECK(parseError("(h d)^ -> h").rfind("error: suffix '^' cannot follow ')' at column 6", 0) == 0);
  CHECK(parseError("2a -> 2a")
            .rfind("error: an identifier cannot start with a digit at column 1", 0) == 0);
  CHECK(parseError("a () -> a")
            .rfind("error: '()' (a 0-dim tensor) must stand alone for its whole tensor at column 3",
                   0) == 0);
  CHECK(parseError("() a -> a")
            .rfind("error: '()' (a 0-dim tensor) must stand alone for its whole tensor at column 1",
                   0) == 0);
  CHECK(parseError("a -> ()+").rfind("error: suffix '+' cannot follow ')' at column 8", 0) == 0);
}

TEST_CASE("an addend is a '+' directly before an input's dims", "[annotation]") {
  OpAnno linear = parsed("* k+, n k+, +n -> * n");
  CHECK((!linear.inputs[0].addend && !linear.inputs[1].addend && linear.inputs[2].addend));
  CHECK(linear.inputs[2].dims[0].idents[0].name == "n");
  CHECK(linear.inputs[2].dims[0].idents[0].column == 14);
  CHECK(parsed("+(), k+ -> ()").inputs[0].addend);
  CHECK(parsed("  +n , k+ n->n").text() == "+n, k+ n -> n");
  CHECK_FALSE(parsed("a k+, +a -> a") == parsed("a k+, a -> a"));

  CHECK(parseError("a k+, + a -> a") ==
        "error: expected the dims of the addend directly after '+' at column 8\n"
        "  a k+, + a -> a\n"
        "         ^");
  CHECK(parseError("a k+, +? -> a")
            .rfind("error: an addend cannot be '?'; a 0-dim addend is '+()' at column 8\n", 0) ==
        0);
  CHECK(parseError("a k+, ++a -> a").rfind("error: second '+' before a tensor at column 8\n", 0) ==
        0);
  CHECK(parseError("a k+ -> +a")
            .rfind("error: an addend ('+' before a tensor) is only allowed among the inputs at "
                   "column 9\n",
                   0) == 0);
  CHECK(parseError("a k+, +a k+ -> a")
            .rfind("error: the addend input 1 cannot have the reduction 'k+' at column 10\n", 0) ==
        0);
  CHECK(parseError("a k+, a +b -> a")
            .rfind("error: '+' must directly follow an identifier at column 9\n", 0) == 0);
}

TEST_CASE("structural rules are enforced with the column of the offender", "[annotation]") {
  CHECK(parseError("a b, b c -> a z") ==
        "error: output identifier 'z' does not appear in any input at column 15\n"
        "  a b, b c -> a z\n"
        "                ^");
  CHECK(parseError("m k+, k+ n -> m k+")
            .rfind("error: reduction 'k+' cannot appear in an output at column 17\n", 0) == 0);
  CHECK(parseError("a b+, b -> a")
            .rfind("error: role conflict: 'b+' at column 3 but 'b' at column 7\n", 0) == 0);
  CHECK(parseError("a a -> a").rfind("error: 'a' appears twice in input 0 at column 3\n", 0) == 0);
  CHECK(parseError("* * a -> a").rfind("error: second '*' in input 0 at column 3\n", 0) == 0);
  CHECK(parseError("a -> *").rfind("error: output '*' without a '*' in any input at column 6", 0) ==
        0);
  CHECK(parseError("*^ a, * -> a").rfind("error: role conflict: '*^' at column 1 but '*'", 0) == 0);
}

TEST_CASE("errors can be located in a file, and candidates parse in order", "[annotation]") {
  Expected<OpAnno> inFile = parseAnnotation("a b -> a c", SourcePos{"ops.yaml", 3, 20});
  REQUIRE_FALSE(inFile);
  CHECK(inFile.status().message() ==
        "ops.yaml:3:29: error: output identifier 'c' does not appear in any input\n"
        "  a b -> a c\n"
        "           ^");

  Expected<std::vector<OpAnno>> two = parseCandidates("a b -> a | a b -> b");
  REQUIRE(two);
  REQUIRE(two->size() == 2);
  CHECK((*two)[1].text() == "a b -> b");
  Expected<std::vector<OpAnno>> bad = parseCandidates("a b -> a | a b -> b b");
  REQUIRE_FALSE(bad);
  CHECK(bad.status().message().rfind("error: 'b' appears twice in output 0 at column 21\n", 0) ==
        0);
  Expected<std::vector<OpAnno>> badVec =
      parseCandidates(std::vector<std::string>{"a -> a", "a -> b"});
  REQUIRE_FALSE(badVec);
  CHECK(badVec.status().message().rfind("candidate 1: error: output identifier 'b'", 0) == 0);
}

TEST_CASE("bindShapes expands '*' and infers outputs", "[annotation][bind]") {
  BoundAnno linear = bound("* k+, n k+ -> * n", {{8, 16, 32}, {64, 32}});
  CHECK(linear.ellipsisRank == 2);
  CHECK(linear.expanded.text() == "*0 *1 k+, n k+ -> *0 *1 n");
  CHECK(linear.sizes ==
        std::map<std::string, int64_t>{{"*0", 8}, {"*1", 16}, {"k", 32}, {"n", 64}});
  CHECK(linear.outputShapes == std::vector<ir::Shape>{{8, 16, 64}});

  BoundAnno flat = bound("* k+, n k+ -> * n", {{32}, {64, 32}}); // '*' may stand for no dims
  CHECK(flat.ellipsisRank == 0);
  CHECK(flat.outputShapes == std::vector<ir::Shape>{{64}});

  CHECK(bindError("* d, * d -> * d", {{2, 3, 4}, {3, 4}}) ==
        "'*' stands for 2 dims in input 0 [2, 3, 4] but 1 dims in input 1 [3, 4]");
  CHECK(bindError("* d, * d -> * d", {{2, 4}, {3, 4}}) ==
        "input 1 dim 0: '*0' is 3 here but 2 in input 0 dim 0");
}

TEST_CASE("bindShapes takes merged members' sizes from the outputs", "[annotation][bind]") {
  // (c d) cannot be solved from the input alone; the output's lone dims say it.
  Expected<BoundAnno> b = bindShapes(parsed("a (c d) -> a c d"), {{2, 384}}, {{2, 6, 64}});
  INFO(b.status().message());
  REQUIRE(b);
  CHECK(b->sizes.at("c") == 6);
  CHECK(b->sizes.at("d") == 64);
  CHECK(bindError("a (c d) -> a c d", {{2, 384}}, {{2, 5, 64}}) ==
        "input 0 dim 1: (c d) multiplies to 320 but the dim has size 384");
  CHECK(bindError("a (c d) -> a c d", {{2, 384}}).find("cannot infer 'c', 'd'") !=
        std::string::npos);
}

TEST_CASE("bindShapes solves merged dims and checks numerals", "[annotation][bind]") {

  BoundAnno view = bound("b l (h d) -> b l h d", {{2, 5, 48}}, {{"h", 6}});
  CHECK(view.sizes.at("d") == 8);
  CHECK(view.outputShapes == std::vector<ir::Shape>{{2, 5, 6, 8}});
  CHECK(view.roles.at("d") == DimRole::Spatial); // splits only interleaved, on request
  CHECK(view.nonLeading == std::set<std::string>{"d"});
  CHECK(view.roles.at("h") == DimRole::Spatial);

  // A member bound by a lone dim elsewhere solves the merged dim.
  BoundAnno joined = bound("a b, (a c) -> a b c", {{4, 3}, {20}});
  CHECK(joined.sizes.at("c") == 5);

  CHECK(bindError("b l (h d) -> b l h d", {{2, 5, 48}}) ==
        "input 0 dim 2: cannot infer 'h', 'd' of (h d) from size 48; give all but one of them "
        "as known sizes");
  CHECK(bindError("b l (h d) -> b l h d", {{2, 5, 48}}, {}, {{"h", 5}}) ==
        "input 0 dim 2: size 48 of (h d) is not divisible by 5, the product of its known members");
  CHECK(bindError("a b, (a b) -> a b", {{2, 3}, {7}}) ==
        "input 1 dim 0: (a b) multiplies to 6 but the dim has size 7");
  CHECK(bindError("a 4 -> a", {{3, 5}}) == "input 0 dim 1: the fixed size 4 does not match size 5");
  CHECK(bindError("m k+, k+ n -> m n", {{8, 32}, {16, 4}}) ==
        "input 1 dim 0: 'k' is 16 here but 32 in input 0 dim 1");
  CHECK(bindError("m k+, k+ n -> m n", {{8, 32, 1}, {32, 4}}) ==
        "input 0 has rank 3 but its annotation 'm k+' has 2 dims");
  CHECK(bindError("m k+, k+ n -> m n", {{8, 32}, {32, 4}}, {{8, 5}}) ==
        "output 0 has shape [8, 5] but the annotation 'm n' gives [8, 4]");
}

TEST_CASE("bindFirstMatch takes the first candidate that fits", "[annotation][bind]") {
  std::vector<OpAnno> candidates = {parsed("a b -> a"), parsed("a b c -> a")};
  Expected<BoundAnno> second = bindFirstMatch(candidates, {{2, 3, 4}}, {});
  REQUIRE(second);
  CHECK(second->anno.text() == "a b c -> a");
  Expected<BoundAnno> none = bindFirstMatch(candidates, {{2}}, {});
  REQUIRE_FALSE(none);
  CHECK(none.status().message() ==
        "no candidate annotation matches the shapes\n"
        "  'a b -> a': input 0 has rank 1 but its annotation 'a b' has 2 dims\n"
        "  'a b c -> a': input 0 has rank 1 but its annotation 'a b c' has 3 dims");
}

TEST_CASE("linear: k is a value split, n splits the weight rows", "[annotation][split]") {
  BoundAnno linear = bound("* k+, n k+ -> * n", {{8, 16, 32}, {64, 32}});
  CHECK(splittableIdents(linear) == Names{"*0", "*1", "k", "n"});

  SplitEffect k = effect(linear, "k", 4);
  CHECK(k.valueSplit);
  CHECK(k.inputDims == Dims{2, 1});
  CHECK(k.outputDims == Dims{-1});

  SplitEffect n = effect(linear, "n", 4);
  CHECK_FALSE(n.valueSplit);
  CHECK(n.inputDims == Dims{-1, 0});
  CHECK(n.outputDims == Dims{2});

  SplitEffect batch = effect(linear, "*0", 2); // data parallel over the leading batch dim
  CHECK(batch.inputDims == Dims{0, -1});
  CHECK(batch.outputDims == Dims{0});

  CHECK(splitError(linear, "n", 3) ==
        "dimension 'n' has size 64, which is not divisible into 3 parts");
  CHECK(splitError(linear, "x", 2) == "unknown dimension 'x'; expected one of: *0, *1, k, n");
}

TEST_CASE("linear with bias: along k the bias is value-split, added by one part",
          "[annotation][split]") {
  BoundAnno linear = bound("* k+, n k+, +n -> * n", {{2, 8, 32}, {64, 32}, {64}});
  CHECK(splittableIdents(linear) == Names{"*0", "*1", "k", "n"});

  SplitEffect k = effect(linear, "k", 2); // row parallel: partial sums
  CHECK((k.valueSplit && k.inputDims == Dims{2, 1, -1} && k.outputDims == Dims{-1}));
  CHECK(k.inputValue == std::vector<bool>{false, false, true});
  CHECK((!k.valueInput(0) && !k.valueInput(1) && k.valueInput(2) && !k.valueInput(3)));

  SplitEffect n = effect(linear, "n", 2); // column parallel: the bias splits with n
  CHECK((!n.valueSplit && n.inputDims == Dims{-1, 0, 0} && n.outputDims == Dims{2}));
  CHECK(n.inputValue == std::vector<bool>{false, false, false});

  SplitEffect batch = effect(linear, "*0", 2); // data parallel: every part adds the bias
  CHECK((batch.inputDims == Dims{0, -1, -1} && !batch.valueInput(2)));
  CHECK_FALSE(effect(linear, "k", 1).valueInput(2)); // one part: nothing is split

  // A bias of one element broadcasts: whole along n, value-split along k.
  BoundAnno one = bound("* k+, n k+, +1 -> * n", {{8, 32}, {64, 32}, {1}});
  CHECK(effect(one, "k", 4).inputValue == std::vector<bool>{false, false, true});
  CHECK(effect(one, "n", 4).inputDims == Dims{-1, 0, -1});
  CHECK_FALSE(effect(one, "n", 4).valueInput(2));
  BoundAnno scalar = bound("* k+, n k+, +() -> * n", {{8, 32}, {64, 32}, {}});
  CHECK(effect(scalar, "k", 2).valueInput(2));

  // nnScaler's older form freezes k instead.
  BoundAnno frozen = bound("* k^, n k^, n -> * n", {{8, 32}, {64, 32}, {64}});
  CHECK(splittableIdents(frozen) == Names{"*0", "n"});
  CHECK(splitError(frozen, "k", 2) == "dimension 'k' is frozen (^) and cannot be split");
}

TEST_CASE("matmul and the chunked loss", "[annotation][split]") {
  BoundAnno mm = bound("m k+, k+ n -> m n", {{128, 256}, {256, 512}});
  CHECK(splittableIdents(mm) == Names{"m", "k", "n"});
  SplitEffect m = effect(mm, "m", 8);
  CHECK((m.inputDims == Dims{0, -1} && m.outputDims == Dims{0} && !m.valueSplit));
  SplitEffect k = effect(mm, "k", 8);
  CHECK((k.inputDims == Dims{1, 0} && k.outputDims == Dims{-1} && k.valueSplit));

  BoundAnno loss = bound("b l d^, n^ d^, b l -> b l", {{4, 1024, 768}, {50304, 768}, {4, 1024}});
  CHECK(splittableIdents(loss) == Names{"b", "l"});
  SplitEffect l = effect(loss, "l", 4);
  CHECK(l.inputDims == Dims{1, -1, 1});
  CHECK(l.outputDims == Dims{1});
  CHECK(splitError(loss, "n", 2) == "dimension 'n' is frozen (^) and cannot be split");
  CHECK(splitError(loss, "d", 2) == "dimension 'd' is frozen (^) and cannot be split");
}

TEST_CASE("merged dims, numerals and '?' limit what can be split", "[annotation][split]") {
  BoundAnno view = bound("b l (h d) -> b l h d", {{2, 5, 48}}, {{"h", 6}});
  CHECK(splittableIdents(view) == Names{"b", "l", "h"});
  SplitEffect h = effect(view, "h", 3);
  CHECK((h.inputDims == Dims{2} && h.outputDims == Dims{2}));
  CHECK((h.inputBlocks == std::vector<int64_t>{1} && h.outputBlocks == std::vector<int64_t>{1}));
  // A non-leading member splits interleaved: each part takes its chunk of d
  // from every one of the h blocks of the merged input dim.
  SplitEffect d = effect(view, "d", 2);
  CHECK((d.inputDims == Dims{2} && d.outputDims == Dims{3}));
  CHECK((d.inputBlocks == std::vector<int64_t>{6} && d.outputBlocks == std::vector<int64_t>{1}));
  CHECK(splitError(view, "d", 3) ==
        "dimension 'd' has size 8, which is not divisible into 3 parts");

  // A fused projection: n = 3 * C split so that every part gets its share of
  // each of the three blocks.
  BoundAnno fused = bound("* k+, n k+ -> * n", {{2, 8, 16}, {48, 16}});
  SplitEffect n = *splitEffect(fused, "n", 2, 3);
  CHECK((n.inputDims == Dims{-1, 0} && n.outputDims == Dims{2}));
  CHECK((n.inputBlocks == std::vector<int64_t>{1, 3} && n.outputBlocks == std::vector<int64_t>{3}));
  CHECK(splitEffect(fused, "n", 32, 3).status().message() ==
        "dimension 'n' has size 48, which is not divisible into 3 blocks of 32 parts");
  // Found by fuzz-annotation_split: parts times blocks past int64 overflowed.
  CHECK(splitEffect(fused, "n", INT32_MAX, INT64_MAX).status().message() ==
        "dimension 'n' has size 48, which is not divisible into 9223372036854775807 blocks of "
        "2147483647 parts");

  BoundAnno fixed = bound("a 4 -> a", {{6, 4}});
  CHECK(splitError(fixed, "4", 2) == "'4' is a fixed size and cannot be split");

  BoundAnno replicated = bound("?, a b -> a b", {{}, {6, 4}});
  CHECK(effect(replicated, "a", 2).inputDims == Dims{-1, 0});
  BoundAnno opaque = bound("a b, b c -> ?", {{6, 4}, {4, 2}});
  CHECK(splittableIdents(opaque).empty());
  CHECK(splitError(opaque, "a", 2) ==
        "output 0 is '?': an op with an unknown output can only be replicated");
}

// Found by fuzz-annotation_split: sizes multiplied past int64 (undefined
// behaviour) when binding merged dims and when counting the blocks of an
// interleaved split.
TEST_CASE("merged dims and blocks whose sizes pass 64 bits", "[annotation][split]") {
  const int64_t big = int64_t(1) << 40;
  CHECK(bindError("a b -> (a b)", {{big, big}}) ==
        "output 0 dim 0: the sizes of (a b) multiply past 64 bits");
  CHECK_THAT(bindError("(a b) -> a b", {{0}}, {}, {{"a", INT64_MAX}, {"b", INT64_MAX}}),
             Catch::Matchers::ContainsSubstring("the sizes of (a b) multiply past 64 bits"));
  // An empty tensor (c = 0) splits; its merged output dim keeps one block.
  BoundAnno empty = bound("a b c -> a (b c)", {{2, INT64_MAX, 0}});
  Expected<SplitEffect> e = splitEffect(empty, "c", 2, big);
  REQUIRE(e);
  CHECK(e->outputBlocks == std::vector<int64_t>{1});
}

TEST_CASE("a '()' output is a 0-dim tensor that lets the op split", "[annotation][split]") {
  OpAnno scalar = parsed("a b^, a -> ( )");
  CHECK((scalar.outputs[0].dims.empty() && !scalar.outputs[0].unknown));
  CHECK(scalar.text() == "a b^, a -> ()");
  CHECK(bindError("a b^, a -> ()", {{8, 5}, {8}}, {{1}}) ==
        "output 0 has shape [1] but the annotation '()' gives []");

  // A loss's per-part mean: the output is not split (the partitioner weighs it).
  Expected<BoundAnno> mean = bindShapes(scalar, {{8, 5}, {8}}, {{}});
  REQUIRE(mean);
  CHECK(splittableIdents(*mean) == Names{"a"});
  SplitEffect a = effect(*mean, "a", 2);
  CHECK((a.inputDims == Dims{0, 0} && a.outputDims == Dims{-1} && !a.valueSplit));
  // A sum: partial sums.
  CHECK(effect(bound("a+ b^, a+ -> ()", {{8, 5}, {8}}), "a", 4).valueSplit);
}

TEST_CASE("identAt maps a plan's (input, dim) to an identifier", "[annotation][split]") {
  BoundAnno linear = bound("* k+, n k+ -> * n", {{8, 16, 32}, {64, 32}});
  CHECK(*identAt(linear, 0, 1) == "*1");
  CHECK(*identAt(linear, 0, -1) == "k");
  CHECK(*identAt(linear, 1, 0) == "n");
  BoundAnno lead = bound("(1 h d) -> h d", {{48}}, {{"h", 6}});
  CHECK(*identAt(lead, 0, 0) == "h"); // leading '1's are skipped, as in nnScaler
  CHECK(identAt(linear, 2, 0).status().message() == "input 2 is out of range: the op has 2 inputs");
  CHECK(identAt(linear, 1, 2).status().message() == "dim 2 is out of range for input 1 of rank 2");
  BoundAnno replicated = bound("?, a -> a", {{3}, {6}});
  CHECK(identAt(replicated, 0, 0).status().message() ==
        "input 0 is '?' (replicate-only) and has no dims");
}

TEST_CASE("splittable identifiers match nnScaler's transform_space", "[annotation][split]") {
  // Cases from nnScaler's tests/graph/function/test_dimops.py: a member that is
  // not leading in any merged dim (after leading '1's) is frozen everywhere.
  std::vector<ir::Shape> shapes = {{2, 3}, {12, 5}};
  CHECK(splittableIdents(bound("a b, b c -> a c", {{2, 3}, {3, 5}})) == Names{"a", "b", "c"});
  CHECK(splittableIdents(bound("a b, (b n) c -> a (n c)", shapes)) == Names{"a", "b"});
  CHECK(splittableIdents(bound("a b, (b n) c -> a (n b c)", shapes)) == Names{"a"});
  CHECK(splittableIdents(bound("a b, (b n) c -> a (1 1 1 b c) n", shapes)) == Names{"a", "b"});
  CHECK(splittableIdents(bound("a b, (d^ n) c -> a (c n) d^", {{2, 3}, {8, 5}}, {{"d", 2}})) ==
        Names{"a", "b", "c"});
}
