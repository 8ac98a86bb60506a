#include "nnsc/Ops/Annotation.h"

#include <cctype>

#include <fmt/format.h>

namespace nnsc::ops {
namespace {

bool isIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool isIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool isSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string suffixOf(DimRole role) {
  switch (role) {
  case DimRole::Reduce:
    return "+";
  case DimRole::Frozen:
    return "^";
  case DimRole::Spatial:
    break;
  }
  return "";
}

/// Recursive-descent parser over text[begin, end); columns count from text[0].
class Parser {
public:
  Parser(std::string_view text, size_t begin, size_t end) : text_(text), pos_(begin), end_(end) {}

  /// The annotation, or false with issue() set.
  bool parse(OpAnno &out);
  const detail::AnnoIssue &issue() const { return issue_; }

private:
  bool atEnd() const { return pos_ >= end_; }
  char peek(size_t ahead = 0) const { return pos_ + ahead < end_ ? text_[pos_ + ahead] : '\0'; }
  bool atArrow() const { return peek() == '-' && peek(1) == '>'; }
  bool atSideEnd() const { return atEnd() || atArrow(); }
  int column() const { return static_cast<int>(pos_) + 1; }
  void skipSpaces() {
    while (!atEnd() && isSpace(peek()))
      ++pos_;
  }
  bool fail(std::string what, int column) {
    issue_ = {std::move(what), column};
    return false;
  }
  bool failHere(std::string what) { return fail(std::move(what), column()); }
  bool unexpectedHere();

  bool parseSide(std::vector<ShapeAnno> &side, bool outputs);
  bool parseTensor(ShapeAnno &shape, bool output);
  bool parseAddend(ShapeAnno &shape, bool output);
  bool parseUnknown(ShapeAnno &shape);
  bool atScalar() const;
  bool parseScalar();
  bool parseDim(DimAnno &dim);
  bool parseGroup(DimAnno &dim);
  bool parseEllipsis(DimAnno &dim);
  bool parseIdent(DimIdent &id);
  bool parseNumeral(DimIdent &id);
  bool parseSuffix(DimIdent &id);
  bool checkDimEnd(const std::string &after);

  std::string_view text_;
  size_t pos_, end_;
  detail::AnnoIssue issue_;
};

bool Parser::parse(OpAnno &out) {
  if (!parseSide(out.inputs, false))
    return false;
  skipSpaces();
  if (!atArrow())
    return atEnd() ? failHere("expected '->' between inputs and outputs") : unexpectedHere();
  pos_ += 2;
  if (!parseSide(out.outputs, true))
    return false;
  skipSpaces();
  if (atArrow())
    return failHere("unexpected second '->'");
  return atEnd() ? true : unexpectedHere();
}

bool Parser::unexpectedHere() {
  if (atArrow())
    return failHere("unexpected second '->'");
  if (peek() == '+' || peek() == '^')
    return failHere(fmt::format("'{}' must directly follow an identifier", peek()));
  if (peek() == ')')
    return failHere("unmatched ')'");
  if (peek() == '|')
    return failHere("unexpected '|' in a single annotation");
  return failHere(fmt::format("unexpected character '{}'", peek()));
}

bool Parser::parseSide(std::vector<ShapeAnno> &side, bool outputs) {
  skipSpaces();
  if (atSideEnd())
    return true; // an empty side: no tensors
  while (true) {
    ShapeAnno shape;
    if (!parseTensor(shape, outputs))
      return false;
    side.push_back(std::move(shape));
    skipSpaces();
    if (peek() != ',')
      return true;
    ++pos_;
  }
}

bool Parser::parseTensor(ShapeAnno &shape, bool output) {
  skipSpaces();
  if (peek() == '+' && !parseAddend(shape, output))
    return false;
  if (peek() == '?')
    return parseUnknown(shape);
  if (atScalar())
    return parseScalar();
  while (true) {
    skipSpaces();
    if (atSideEnd() || peek() == ',')
      break;
    DimAnno dim;
    if (!parseDim(dim))
      return false;
    shape.dims.push_back(std::move(dim));
  }
  if (shape.dims.empty())
    return failHere("expected a dimension annotation");
  return true;
}

// A '+' before a tensor's dims: an addend (Annotation.h).
bool Parser::parseAddend(ShapeAnno &shape, bool output) {
  if (output)
    return failHere("an addend ('+' before a tensor) is only allowed among the inputs");
  ++pos_;
  if (atEnd() || isSpace(peek()) || peek() == ',' || atArrow())
    return failHere("expected the dims of the addend directly after '+'");
  if (peek() == '?')
    return failHere("an addend cannot be '?'; a 0-dim addend is '+()'");
  if (peek() == '+')
    return failHere("second '+' before a tensor");
  shape.addend = true;
  return true;
}

bool Parser::parseUnknown(ShapeAnno &shape) {
  ++pos_;
  if (peek() == '+' || peek() == '^')
    return failHere("suffix after '?'");
  skipSpaces();
  if (!atSideEnd() && peek() != ',')
    return failHere("'?' must stand alone for its whole tensor");
  shape.unknown = true;
  return true;
}

// `()` (spaces allowed inside): a 0-dim tensor, no dims.
bool Parser::atScalar() const {
  if (peek() != '(')
    return false;
  size_t ahead = 1;
  while (isSpace(peek(ahead)))
    ++ahead;
  return peek(ahead) == ')';
}

bool Parser::parseScalar() {
  int open = column();
  pos_ = text_.find(')', pos_) + 1;
  if (peek() == '+' || peek() == '^')
    return failHere(fmt::format("suffix '{}' cannot follow ')'", peek()));
  skipSpaces();
  if (!atSideEnd() && peek() != ',')
    return fail("'()' (a 0-dim tensor) must stand alone for its whole tensor", open);
  return true;
}

bool Parser::parseDim(DimAnno &dim) {
  char c = peek();
  if (c == '(')
    return parseGroup(dim);
  if (c == '*')
    return parseEllipsis(dim);
  if (c == '?')
    return failHere("'?' must stand alone for its whole tensor");
  if (!isIdentStart(c) && !std::isdigit(static_cast<unsigned char>(c)))
    return unexpectedHere();
  DimIdent id;
  if (!parseIdent(id))
    return false;
  dim.idents.push_back(std::move(id));
  return checkDimEnd(identText(dim.idents.back()));
}

bool Parser::parseGroup(DimAnno &dim) {
  int open = column();
  ++pos_;
  while (true) {
    skipSpaces();
    char c = peek();
    if (c == ')')
      break;
    if (atEnd() || atArrow() || c == ',')
      return fail("unclosed '('", open);
    if (c == '(')
      return failHere("nested '(' is not allowed");
    if (c == '*' || c == '?')
      return failHere(fmt::format("'{}' cannot be part of a merged dimension", c));
    if (!isIdentStart(c) && !std::isdigit(static_cast<unsigned char>(c)))
      return unexpectedHere();
    DimIdent id;
    if (!parseIdent(id))
      return false;
    dim.idents.push_back(std::move(id));
  }
  if (dim.idents.empty())
    return fail("'()' (a 0-dim tensor) must stand alone for its whole tensor", open);
  ++pos_;
  if (peek() == '+' || peek() == '^')
    return failHere(fmt::format("suffix '{}' cannot follow ')'", peek()));
  return checkDimEnd(dimText(dim));
}

bool Parser::parseEllipsis(DimAnno &dim) {
  DimIdent id;
  id.name = "*";
  id.column = column();
  ++pos_;
  if (!parseSuffix(id))
    return false;
  dim.ellipsis = true;
  dim.idents.push_back(std::move(id));
  return checkDimEnd(dimText(dim));
}

bool Parser::parseIdent(DimIdent &id) {
  id.column = column();
  if (std::isdigit(static_cast<unsigned char>(peek())))
    return parseNumeral(id);
  size_t start = pos_;
  while (!atEnd() && isIdentChar(peek()))
    ++pos_;
  id.name = std::string(text_.substr(start, pos_ - start));
  return parseSuffix(id);
}

bool Parser::parseNumeral(DimIdent &id) {
  size_t start = pos_;
  while (!atEnd() && std::isdigit(static_cast<unsigned char>(peek())))
    ++pos_;
  if (isIdentChar(peek()))
    return fail("an identifier cannot start with a digit", id.column);
  if (pos_ - start > 18)
    return fail("numeral is too large", id.column);
  id.name = std::string(text_.substr(start, pos_ - start));
  id.numeric = true;
  id.value = std::stoll(id.name);
  if (peek() == '+')
    return failHere("reduction '+' on a fixed-size numeral");
  if (peek() == '^')
    ++pos_; // accepted, though every numeral is frozen anyway
  id.role = DimRole::Frozen;
  return true;
}

bool Parser::parseSuffix(DimIdent &id) {
  if (peek() == '+')
    id.role = DimRole::Reduce;
  else if (peek() == '^')
    id.role = DimRole::Frozen;
  else
    return true;
  ++pos_;
  return true;
}

bool Parser::checkDimEnd(const std::string &after) {
  char c = peek();
  if (c == '+' || c == '^')
    return failHere(fmt::format("second suffix '{}' after '{}'", c, after));
  if (isIdentChar(c) || c == '*' || c == '?')
    return failHere(fmt::format("expected a space after '{}'", after));
  return true;
}

std::string formatIssue(std::string_view text, const detail::AnnoIssue &issue,
                        const SourcePos &origin) {
  std::string out;
  if (origin.file.empty() && origin.line == 0) {
    out = formatError({}, fmt::format("{} at column {}", issue.what, issue.column));
  } else {
    SourcePos pos = origin;
    pos.col = (origin.col > 0 ? origin.col : 1) + issue.column - 1;
    out = formatError(pos, issue.what);
  }
  out += fmt::format("\n  {}\n  {}^", text, std::string(std::max(issue.column - 1, 0), ' '));
  return out;
}

Expected<OpAnno> parseRange(std::string_view text, size_t begin, size_t end,
                            const SourcePos &origin) {
  Parser parser(text, begin, end);
  OpAnno anno;
  detail::AnnoIssue issue;
  if (!parser.parse(anno))
    issue = parser.issue();
  else
    issue = detail::validateAnnotation(anno);
  if (!issue.what.empty())
    return Status::error(formatIssue(text, issue, origin));
  return anno;
}

} // namespace

std::string identText(const DimIdent &id) {
  return id.numeric ? id.name : id.name + suffixOf(id.role);
}

std::string dimText(const DimAnno &dim) {
  if (dim.ellipsis)
    return "*" + suffixOf(dim.idents.empty() ? DimRole::Spatial : dim.idents[0].role);
  std::string out;
  for (const DimIdent &id : dim.idents)
    out += (out.empty() ? "" : " ") + identText(id);
  return dim.merged() ? "(" + out + ")" : out;
}

std::string shapeText(const ShapeAnno &shape) {
  if (shape.unknown)
    return "?";
  std::string out = shape.addend ? "+" : "";
  if (shape.dims.empty())
    return out + "()";
  for (size_t d = 0; d < shape.dims.size(); ++d)
    out += (d == 0 ? "" : " ") + dimText(shape.dims[d]);
  return out;
}

std::string OpAnno::text() const {
  auto join = [](const std::vector<ShapeAnno> &side) {
    std::string out;
    for (const ShapeAnno &s : side)
      out += (out.empty() ? "" : ", ") + shapeText(s);
    return out;
  };
  std::string in = join(inputs), out = join(outputs);
  return (in.empty() ? "" : in + " ") + "->" + (out.empty() ? "" : " " + out);
}

Expected<OpAnno> parseAnnotation(std::string_view text) {
  return parseRange(text, 0, text.size(), SourcePos{});
}

Expected<OpAnno> parseAnnotation(std::string_view text, const SourcePos &origin) {
  return parseRange(text, 0, text.size(), origin);
}

Expected<std::vector<OpAnno>> parseCandidates(std::string_view text) {
  std::vector<OpAnno> out;
  size_t begin = 0;
  while (true) {
    size_t bar = text.find('|', begin);
    size_t end = bar == std::string_view::npos ? text.size() : bar;
    Expected<OpAnno> anno = parseRange(text, begin, end, SourcePos{});
    if (!anno)
      return anno.status();
    out.push_back(anno.take());
    if (bar == std::string_view::npos)
      return out;
    begin = bar + 1;
  }
}

Expected<std::vector<OpAnno>> parseCandidates(const std::vector<std::string> &texts) {
  std::vector<OpAnno> out;
  for (size_t i = 0; i < texts.size(); ++i) {
    Expected<OpAnno> anno = parseAnnotation(texts[i]);
    if (!anno)
      return anno.status().withContext(fmt::format("candidate {}", i));
    out.push_back(anno.take());
  }
  return out;
}

} // namespace nnsc::ops
