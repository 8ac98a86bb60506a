// The text form of a rank manifest.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "nnsc/CodeGen/Manifest.h"
#include "nnsc/IR/Types.h"

namespace nnsc::codegen {

namespace {

std::string typeText(proto::DType dtype, const google::protobuf::RepeatedField<int64_t> &shape) {
  auto t = static_cast<ir::DType>(static_cast<int>(dtype));
  return fmt::format("{}[{}]", ir::dtypeName(t), fmt::join(shape, ", "));
}

std::string sliceText(const proto::SliceMap &s) {
  std::vector<std::string> dims;
  for (int d = 0; d < s.start_size() && d < s.stop_size(); ++d) {
    int64_t b = d < s.blocks_size() ? s.blocks(d) : 1;
    dims.push_back(b > 1 ? fmt::format("{}:{} x{} blocks", s.start(d), s.stop(d), b)
                         : fmt::format("{}:{}", s.start(d), s.stop(d)));
  }
  std::string text = fmt::format("[{}]", fmt::join(dims, ", "));
  if (s.value_chunks() > 1)
    text += fmt::format(" value {}/{}", s.value_index(), s.value_chunks());
  return text;
}

void printShard(const proto::Shard &s, std::ostream &os) {
  os << fmt::format("shard  {} {}: {} of [{}] at {}", s.local_name(), s.original_name(),
                    typeText(s.dtype(), s.shape()), fmt::join(s.full_shape(), ", "),
                    sliceText(s.slice()));
  if (s.constant())
    os << " constant";
  else if (s.trainable())
    os << fmt::format(" trainable reducer {}", s.reducer());
  else
    os << " frozen";
  os << fmt::format(" replicas {}", s.replicas());
  if (!s.zero3_function().empty())
    os << fmt::format(" gathered in {}", s.zero3_function());
  if (!s.aliases().empty())
    os << fmt::format(" (alias {})", fmt::join(s.aliases(), ", "));
  os << '\n';
}

std::string pipeTensorText(const proto::PipeTensor &t, const char *dir) {
  return fmt::format("{} {} rank {} stage {} (tag {}{})", t.name(), dir, t.peer(), t.peer_stage(),
                     t.tag(), t.requires_grad() ? ", gradient back" : "");
}

// "RA0 F0 SA0 RG0 B0 SG0": receive activations, forward, send activations,
// receive gradients, backward, send gradients; micro-batch, then ".c" for a
// chunk other than 0.
std::string stepsText(const google::protobuf::RepeatedPtrField<proto::PipeStep> &steps) {
  static const char *kinds[] = {"F", "B", "RA", "SA", "RG", "SG"};
  std::vector<std::string> out;
  for (const proto::PipeStep &st : steps)
    out.push_back(fmt::format("{}{}{}",
                              st.kind() >= 0 && st.kind() < 6 ? kinds[st.kind()] : "?",
                              st.micro(),
                              st.chunk() ? fmt::format(".{}", st.chunk()) : ""));
  return fmt::format("{}", fmt::join(out, " "));
}

void printPipeline(const proto::Pipeline &p, std::ostream &os) {
  os << fmt::format("pipeline: stage {} of {}, schedule {}, {} micro-batches, {} chunk(s)\n",
                    p.stage(), p.stages(), p.schedule(), p.micro_batches(), p.chunks_size());
  for (int c = 0; c < p.chunks_size(); ++c) {
    const proto::PipeChunk &chunk = p.chunks(c);
    std::vector<std::string> parts;
    for (const proto::PipeTensor &t : chunk.recv())
      parts.push_back("receives " + pipeTensorText(t, "from"));
    for (const proto::PipeTensor &t : chunk.send())
      parts.push_back("sends " + pipeTensorText(t, "to"));
    if (chunk.has_loss())
      parts.push_back("computes the loss");
    os << fmt::format("chunk  {}: stage {}, {}: {}\n", c, chunk.stage(), chunk.function(),
                      fmt::join(parts, "; "));
  }
  os << "steps: " << stepsText(p.steps()) << '\n';
  os << "eval steps: " << stepsText(p.eval_steps()) << '\n';
}

} // namespace

void printManifest(const proto::RankManifest &m, std::ostream &os) {
  os << fmt::format("manifest rank {} of {}: plan_ngpus {}, data-parallel copy {} of {}, model "
                    "{} (format {})\n",
                    m.rank(), m.world_size(), m.plan_ngpus(), m.dp_rank(), m.dp_size(),
                    m.model_name(), m.format_version());
  os << fmt::format("  program {}, entry {}, weights {}\n", m.program(), m.entry(),
                    m.weights().empty() ? "<none>" : m.weights());
  os << fmt::format("  outputs {}, loss output {}, loss scale {}, loss replicas {}\n",
                    m.num_outputs(), m.loss_output(), m.loss_scale(),
                    std::max(1, m.loss_replicas()));
  const char *what = m.zero() >= 3   ? " and gradients, and the values of shards gathered in a "
                                       "recompute function,"
                     : m.zero() >= 2 ? " and gradients"
                                     : "";
  if (m.zero() > 0 && m.zero_ngroups() > 1)
    os << fmt::format("  zero {}: optimizer states{} sharded inside each of {} blocks of {} "
                      "ranks, replicated over the blocks\n",
                      m.zero(), what, m.zero_ngroups(), m.world_size() / m.zero_ngroups());
  else if (m.zero() > 0)
    os << fmt::format("  zero {}: optimizer states{} sharded over each reducer's group\n", m.zero(),
                      what);
  for (const proto::ProgramInput &in : m.inputs())
    os << fmt::format("input  {}: {} of [{}] batch dim {}\n", in.name(),
                      typeText(in.dtype(), in.shape()), fmt::join(in.full_shape(), ", "),
                      in.batch_dim());
  for (const proto::Shard &s : m.shards())
    printShard(s, os);
  for (const proto::CommGroup &g : m.groups())
    os << fmt::format("group  {}: ranks [{}]\n", g.id(), fmt::join(g.ranks(), ", "));
  for (int i = 0; i < m.reducers_size(); ++i) {
    const proto::Reducer &r = m.reducers(i);
    std::string how = r.divisor() > 0 ? fmt::format("sum / {}", r.divisor())
                      : r.average()   ? "average"
                                      : "sum";
    std::string split;
    if (r.has_zero_split() && r.zero_split().shard_group() < 0)
      split = ", zero: this rank alone in its block (not sharded)";
    else if (r.has_zero_split())
      split = fmt::format(", zero: sharded over group {}, summed over group {}",
                          r.zero_split().shard_group(), r.zero_split().cross_group());
    os << fmt::format("reducer {}: group {}, {} shards, bucket {} bytes, {}{}\n", i, r.group(),
                      r.shards_size(), r.bucket_bytes(), how, split);
  }
  for (const proto::BufferSync &b : m.buffer_syncs())
    os << fmt::format("buffers: group {}, shards {} kept equal\n", b.group(),
                      fmt::join(b.shards(), ", "));
  if (m.has_pipeline())
    printPipeline(m.pipeline(), os);
}

} // namespace nnsc::codegen
