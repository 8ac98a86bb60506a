#pragma once
/// Conversion between the in-memory IR and its protobuf form (graph.pb).

#include <string>

#include "nnsc/IR/Graph.h"
#include "nnsc/Support/Status.h"

namespace nnsc::proto {
class Graph;
}

namespace nnsc::ir {

void toProto(const Graph &graph, proto::Graph &out);
/// Fails on a format version newer than this build or on dangling ids.
Expected<Graph> fromProto(const proto::Graph &in);

/// Writes `graph` to `path` atomically in binary protobuf form.
Status writeGraph(const Graph &graph, const std::string &path);
/// Reads a graph.pb; errors name the file and what is wrong with it.
Expected<Graph> readGraph(const std::string &path);
/// As readGraph, from the file's `bytes`; `path` names it in errors.
Expected<Graph> parseGraph(const std::string &bytes, const std::string &path);

} // namespace nnsc::ir
