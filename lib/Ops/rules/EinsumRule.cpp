// einsum: the annotation is read off the equation. Labels kept in the output
// are plain, summed-out labels get '+', '...' becomes fresh names aligned to
// the right (broadcast size-1 dims become the numeral 1).
#include <algorithm>
#include <cctype>
#include <map>

#include "RuleUtil.h"

namespace nnsc::ops::rules {
namespace {

/// One operand of the equation: its labels, with "..." kept as one entry.
using Term = std::vector<std::string>;

std::optional<Term> parseTerm(const std::string &text) {
  Term term;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 3, "...") == 0) {
      term.push_back("...");
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(text[i]))) {
      term.push_back(std::string(1, text[i]));
    } else {
      return std::nullopt;
    }
  }
  Term sorted = term;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    return std::nullopt; // a repeated label (a diagonal) has no annotation
  return term;
}

struct Equation {
  std::vector<Term> operands;
  Term output;
};

/// The implicit output: "..." first, then the labels used exactly once, sorted.
Term implicitOutput(const std::vector<Term> &operands) {
  std::map<std::string, int> uses;
  bool ellipsis = false;
  for (const Term &t : operands)
    for (const std::string &l : t)
      l == "..." ? (void)(ellipsis = true) : (void)++uses[l];
  Term out;
  if (ellipsis)
    out.push_back("...");
  for (const auto &[label, count] : uses)
    if (count == 1)
      out.push_back(label);
  return out;
}

std::optional<Equation> parseEquation(std::string eq) {
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  Equation out;
  size_t begin = 0;
  while (true) {
    size_t comma = lhs.find(',', begin);
    auto term = parseTerm(lhs.substr(begin, comma - begin));
    if (!term)
      return std::nullopt;
    out.operands.push_back(*term);
    if (comma == std::string::npos)
      break;
    begin = comma + 1;
  }
  if (arrow == std::string::npos) {
    out.output = implicitOutput(out.operands);
    return out;
  }
  auto rhs = parseTerm(eq.substr(arrow + 2));
  if (!rhs)
    return std::nullopt;
  out.output = *rhs;
  return out;
}

/// Annotates the operands of an equation whose label sizes are known.
class EinsumAnnotator {
public:
  EinsumAnnotator(const Equation &eq, const std::vector<ir::Shape> &shapes)
      : eq_(eq), shapes_(shapes) {}

  std::optional<std::string> run() {
    if (!collectSizes())
      return std::nullopt;
    std::set<std::string> labels;
    for (const auto &[l, s] : sizes_)
      labels.insert(l);
    ellipsisNames_ = NameGen(labels).take(ellipsisShape_.size());
    std::vector<Dims> ins;
    for (size_t i = 0; i < eq_.operands.size(); ++i)
      ins.push_back(operandDims(i));
    return annoStr(ins, {termDims(eq_.output, ellipsisShape_, /*suffixSums=*/false)});
  }

private:
  bool collectSizes();
  /// Broadcasts `size` into `into` (0 = not seen yet); false on a conflict.
  static bool merge(int64_t &into, int64_t size) {
    if (into != 0 && into != 1 && size != 1 && size != into)
      return false;
    into = (into == 0 || into == 1) ? size : into;
    return true;
  }
  Dims operandDims(size_t i) const;
  Dims termDims(const Term &term, const ir::Shape &ellipsis, bool suffixSums) const;
  bool inOutput(const std::string &label) const {
    return std::find(eq_.output.begin(), eq_.output.end(), label) != eq_.output.end();
  }

  const Equation &eq_;
  const std::vector<ir::Shape> &shapes_;
  std::map<std::string, int64_t> sizes_;
  std::vector<ir::Shape> ellipsisOf_; ///< per operand, the dims '...' stands for
  ir::Shape ellipsisShape_;           ///< broadcast of all of them
  Dims ellipsisNames_;
};

bool EinsumAnnotator::collectSizes() {
  for (size_t i = 0; i < eq_.operands.size(); ++i) {
    const Term &t = eq_.operands[i];
    const ir::Shape &s = shapes_[i];
    bool hasEllipsis = std::count(t.begin(), t.end(), "...") > 0;
    size_t labels = t.size() - (hasEllipsis ? 1 : 0);
    if (s.size() < labels || (!hasEllipsis && s.size() != labels))
      return false;
    size_t ellRank = s.size() - labels, d = 0;
    ellipsisOf_.emplace_back();
    for (const std::string &l : t) {
      if (l == "...") {
        ellipsisOf_.back().assign(s.begin() + d, s.begin() + d + ellRank);
        d += ellRank;
        continue;
      }
      if (!merge(sizes_[l], s[d++]))
        return false;
    }
    const ir::Shape &e = ellipsisOf_.back();
    if (e.size() > ellipsisShape_.size())
      ellipsisShape_.insert(ellipsisShape_.begin(), e.size() - ellipsisShape_.size(), 1);
    for (size_t k = 0; k < e.size(); ++k)
      if (!merge(ellipsisShape_[ellipsisShape_.size() - e.size() + k], e[k]))
        return false;
  }
  for (const std::string &l : eq_.output)
    if (l != "..." && !sizes_.count(l))
      return false;
  return true;
}

Dims EinsumAnnotator::operandDims(size_t i) const {
  Dims dims = termDims(eq_.operands[i], ellipsisOf_[i], /*suffixSums=*/true);
  // A label whose dim is 1 here but larger elsewhere is broadcast.
  const ir::Shape &s = shapes_[i];
  for (size_t d = 0; d < dims.size(); ++d)
    if (s[d] == 1 && !isNumeral(dims[d])) {
      std::string name = dims[d].back() == '+' ? dims[d].substr(0, dims[d].size() - 1) : dims[d];
      auto it = sizes_.find(name);
      if (it != sizes_.end() && it->second != 1)
        dims[d] = "1";
    }
  return dims;
}

Dims EinsumAnnotator::termDims(const Term &term, const ir::Shape &ellipsis, bool suffixSums) const {
  Dims dims;
  for (const std::string &l : term) {
    if (l != "...") {
      dims.push_back(suffixSums && !inOutput(l) ? l + "+" : l);
      continue;
    }
    auto e = broadcastDims(ellipsis, ellipsisShape_, ellipsisNames_);
    if (e && !ellipsis.empty())
      dims.insert(dims.end(), e->begin(), e->end());
  }
  return dims;
}

} // namespace

std::vector<std::string> einsumRule(const ir::Graph &g, const ir::Node &n) {
  std::optional<std::string> equation = strArg(n, "equation");
  if (!equation || n.outputs.size() != 1)
    return {};
  std::optional<Equation> eq = parseEquation(*equation);
  if (!eq || eq->operands.size() != n.inputs.size())
    return {};
  std::vector<ir::Shape> shapes;
  for (size_t i = 0; i < n.inputs.size(); ++i)
    shapes.push_back(inShape(g, n, i));
  std::optional<std::string> anno = EinsumAnnotator(*eq, shapes).run();
  return anno ? single(*anno) : std::vector<std::string>{};
}

} // namespace nnsc::ops::rules
