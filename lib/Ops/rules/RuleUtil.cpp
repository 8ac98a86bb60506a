#include "RuleUtil.h"

#include <algorithm>
#include <cctype>

namespace nnsc::ops::rules {

const ir::Shape &inShape(const ir::Graph &graph, const ir::Node &node, size_t i) {
  return graph.tensor(node.inputs.at(i)).shape;
}

const ir::Shape &outShape(const ir::Graph &graph, const ir::Node &node, size_t i) {
  return graph.tensor(node.outputs.at(i)).shape;
}

size_t inRank(const ir::Graph &graph, const ir::Node &node, size_t i) {
  return inShape(graph, node, i).size();
}

std::optional<int64_t> intArg(const ir::Node &node, std::string_view name) {
  const ir::Argument *a = node.arg(name);
  if (!a)
    return std::nullopt;
  if (const auto *v = std::get_if<int64_t>(&a->value))
    return *v;
  if (const auto *v = std::get_if<bool>(&a->value))
    return *v ? 1 : 0;
  return std::nullopt;
}

std::optional<std::vector<int64_t>> intListArg(const ir::Node &node, std::string_view name) {
  const ir::Argument *a = node.arg(name);
  if (!a)
    return std::nullopt;
  if (const auto *v = std::get_if<std::vector<int64_t>>(&a->value))
    return *v;
  if (const auto *v = std::get_if<int64_t>(&a->value))
    return std::vector<int64_t>{*v};
  return std::nullopt;
}

std::optional<bool> boolArg(const ir::Node &node, std::string_view name) {
  const ir::Argument *a = node.arg(name);
  if (!a)
    return std::nullopt;
  if (const auto *v = std::get_if<bool>(&a->value))
    return *v;
  if (const auto *v = std::get_if<int64_t>(&a->value))
    return *v != 0;
  return std::nullopt;
}

std::optional<std::string> strArg(const ir::Node &node, std::string_view name) {
  const ir::Argument *a = node.arg(name);
  if (!a)
    return std::nullopt;
  if (const auto *v = std::get_if<std::string>(&a->value))
    return *v;
  return std::nullopt;
}

std::optional<size_t> normDim(int64_t dim, size_t rank) {
  int64_t r = static_cast<int64_t>(rank);
  if (dim < -r || dim >= r)
    return std::nullopt;
  return static_cast<size_t>(dim < 0 ? dim + r : dim);
}

std::optional<std::vector<size_t>> normDims(const std::vector<int64_t> &dims, size_t rank) {
  std::vector<size_t> out;
  for (int64_t d : dims) {
    std::optional<size_t> n = normDim(d, rank);
    if (!n)
      return std::nullopt;
    out.push_back(*n);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string NameGen::next() {
  while (true) {
    size_t round = counter_ / 26;
    std::string name(1, static_cast<char>('a' + counter_ % 26));
    if (round > 0)
      name += std::to_string(round);
    ++counter_;
    if (!reserved_.count(name))
      return name;
  }
}

Dims NameGen::take(size_t n) {
  Dims out;
  for (size_t i = 0; i < n; ++i)
    out.push_back(next());
  return out;
}

Dims numerals(const ir::Shape &shape) {
  Dims out;
  for (int64_t s : shape)
    out.push_back(std::to_string(s));
  return out;
}

bool isNumeral(std::string_view dim) {
  return !dim.empty() && std::all_of(dim.begin(), dim.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
}

void addSuffix(Dims &dims, size_t i, std::string_view suffix) {
  std::string &d = dims.at(i);
  if (d.empty() || isNumeral(d) || d.front() == '(' || d.back() == '^' || d.back() == '+')
    return;
  d += suffix;
}

Dims withSuffix(Dims dims, std::string_view suffix) {
  for (size_t i = 0; i < dims.size(); ++i)
    addSuffix(dims, i, suffix);
  return dims;
}

Dims scalarDims() { return {"()"}; }

Dims addendDims(Dims dims) {
  if (dims.empty())
    return {"+()"};
  dims.front().insert(0, "+");
  return dims;
}

std::string shapeStr(const Dims &dims) {
  if (dims.empty())
    return "?";
  std::string out;
  for (const std::string &d : dims)
    out += (out.empty() ? "" : " ") + d;
  return out;
}

std::string annoStr(const std::vector<Dims> &ins, const std::vector<Dims> &outs) {
  auto join = [](const std::vector<Dims> &side) {
    std::string out;
    for (const Dims &d : side)
      out += (out.empty() ? "" : ", ") + shapeStr(d);
    return out;
  };
  std::string in = join(ins), out = join(outs);
  return (in.empty() ? "" : in + " ") + "->" + (out.empty() ? "" : " " + out);
}

std::optional<Dims> broadcastDims(const ir::Shape &shape, const ir::Shape &outShape,
                                  const Dims &out) {
  if (shape.empty())
    return Dims{};
  if (shape.size() > outShape.size())
    return std::nullopt;
  size_t offset = outShape.size() - shape.size();
  Dims dims;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t want = outShape[offset + i];
    if (shape[i] == want)
      dims.push_back(out[offset + i]);
    else if (shape[i] == 1)
      dims.push_back("1");
    else
      return std::nullopt;
  }
  return dims;
}

std::vector<std::string> single(std::string anno) { return {std::move(anno)}; }

} // namespace nnsc::ops::rules
