// Checks of a manifest's pipeline section (PipelineManifest.h).
#include "nnsc/Runtime/PipelineManifest.h"

#include <fmt/format.h>

#include "nnsc/Runtime/ShardTable.h"

namespace nnsc::rt {

namespace {

// Elements a received tensor may have: 2^40 (4 TiB of float32) is beyond any
// device; a larger count is a corrupt file, not a model.
constexpr double kMaxPipeElements = 1099511627776.0;

Status checkTensor(const proto::RankManifest &m, const proto::PipeTensor &t,
                   const std::string &where) {
  if (t.peer() < 0 || t.peer() >= m.world_size())
    return errorf("{}: peer rank {} is outside the job's 0..{}", where, t.peer(),
                  m.world_size() - 1);
  if (t.tag() < 0 || t.tag() >= kPipelineGradientTag)
    return errorf("{}: tag {} is outside 0..{}", where, t.tag(), kPipelineGradientTag - 1);
  // Every rank runs as many chunks, so the virtual stages number stages x chunks.
  const int64_t virtualStages = int64_t(m.pipeline().stages()) * m.pipeline().chunks_size();
  if (t.peer_stage() < 0 || t.peer_stage() >= virtualStages)
    return errorf("{}: peer stage {} is outside the pipeline's virtual stages 0..{}", where,
                  t.peer_stage(), virtualStages - 1);
  if (t.peer() != m.rank() && m.format_version() < 2)
    return errorf("{}: this manifest (format {}) predates the pipeline's channels between "
                  "virtual stages (format 2): run nnsc-codegen again",
                  where, m.format_version());
  if (safetensorsCodeOfProtoDType(t.dtype()).empty())
    return errorf("{}: unknown dtype {}", where, int(t.dtype()));
  double elements = 1;
  for (int64_t d : t.shape()) {
    if (d < 0)
      return errorf("{}: negative dimension {}", where, d);
    elements *= double(d);
  }
  if (elements > kMaxPipeElements)
    return errorf("{}: {} elements is above the limit of 2^40", where, elements);
  return Status::ok();
}

Status checkSteps(const proto::Pipeline &p,
                  const google::protobuf::RepeatedPtrField<proto::PipeStep> &steps,
                  const char *what, int micro, const std::string &path) {
  for (int i = 0; i < steps.size(); ++i) {
    const proto::PipeStep &st = steps[i];
    std::string where = fmt::format("{}: error: pipeline {} {}", path, what, i);
    if (st.kind() < proto::PipeStep::FORWARD || st.kind() > proto::PipeStep::SEND_GRADIENTS)
      return errorf("{} has unknown kind {}", where, int(st.kind()));
    if (st.chunk() < 0 || st.chunk() >= p.chunks_size())
      return errorf("{} names chunk {}; the manifest has {}", where, st.chunk(), p.chunks_size());
    if (st.micro() < 0 || st.micro() >= micro)
      return errorf("{} names micro-batch {} of {}", where, st.micro(), micro);
  }
  return Status::ok();
}

} // namespace

Status checkPipelineManifest(const proto::RankManifest &m, const std::string &path) {
  if (!m.has_pipeline())
    return Status::ok();
  const proto::Pipeline &p = m.pipeline();
  if (p.stages() < 1 || p.stage() < 0 || p.stage() >= p.stages())
    return errorf("{}: error: pipeline stage {} of {} is impossible", path, p.stage(), p.stages());
  if (p.micro_batches() < 1)
    return errorf("{}: error: pipeline micro_batches is {}; expected 1 or more", path,
                  p.micro_batches());
  if (p.chunks_size() == 0)
    return errorf("{}: error: the pipeline has no chunks", path);
  for (int c = 0; c < p.chunks_size(); ++c) {
    const proto::PipeChunk &chunk = p.chunks(c);
    if (chunk.function().empty())
      return errorf("{}: error: pipeline chunk {} names no function", path, c);
    for (int i = 0; i < chunk.recv_size(); ++i)
      NNSC_RETURN_IF_ERROR(checkTensor(
          m, chunk.recv(i), fmt::format("{}: error: pipeline chunk {} received tensor {}", path,
                                        c, chunk.recv(i).name())));
    for (int i = 0; i < chunk.send_size(); ++i)
      NNSC_RETURN_IF_ERROR(checkTensor(
          m, chunk.send(i),
          fmt::format("{}: error: pipeline chunk {} sent tensor {}", path, c, chunk.send(i).name())));
  }
  NNSC_RETURN_IF_ERROR(checkSteps(p, p.steps(), "step", p.micro_batches(), path));
  return checkSteps(p, p.eval_steps(), "evaluation step", 1, path);
}

} // namespace nnsc::rt
