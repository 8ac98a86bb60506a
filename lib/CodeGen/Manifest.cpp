#include "nnsc/CodeGen/Manifest.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>

#include "nnsc/CodeGen/Program.h"
#include "nnsc/Plan/PipelineSchedule.h"
#include "nnsc/Runtime/PipelineManifest.h"
#include "nnsc/Support/File.h"

namespace nnsc::codegen {

namespace {

proto::DType toProtoDType(ir::DType t) {
  return static_cast<proto::DType>(static_cast<int>(t)); // same order by design
}

// The shard's reducer is set by fillGroupsAndReducers.
void fillShard(const ir::Graph &graph, const ShardSpec &s, proto::Shard &out) {
  const ir::Tensor &t = graph.tensor(s.tensor);
  out.set_local_name(s.localName);
  out.set_original_name(s.constant ? fmt::format("__const.{}", t.id) : t.name);
  for (const std::string &a : t.aliases)
    out.add_aliases(a);
  for (int64_t d : t.shape)
    out.add_full_shape(d);
  for (int64_t d : s.shape())
    out.add_shape(d);
  out.set_dtype(toProtoDType(t.dtype));
  proto::SliceMap *slice = out.mutable_slice();
  for (size_t d = 0; d < s.start.size(); ++d) {
    slice->add_start(s.start[d]);
    slice->add_stop(s.stop[d]);
  }
  for (int64_t b : s.blocks)
    slice->add_blocks(b);
  slice->set_value_index(s.valueIndex);
  slice->set_value_chunks(s.valueChunks);
  bool trainable = !s.constant && t.kind == ir::TensorKind::Param && t.requiresGrad;
  out.set_trainable(trainable);
  out.set_reducer(-1);
  out.set_replicas(s.replicas);
  out.set_constant(s.constant);
}

// The ids an input carries must index what reads them: an embedding's rows,
// or a loss's classes (the last dim of its scores). Followed through ops that
// only reshape. Returns the least such bound, and the tensor that sets it.
std::pair<int64_t, std::string> indexBound(const ir::Graph &graph, int64_t tensor) {
  static const std::set<std::string> reshapes = {"aten::view",    "aten::reshape",
                                                 "aten::flatten", "aten::contiguous",
                                                 "aten::squeeze", "aten::unsqueeze"};
  std::pair<int64_t, std::string> best = {0, ""};
  auto offer = [&](const ir::Tensor &t, int64_t bound) {
    if (bound > 0 && (best.first == 0 || bound < best.first))
      best = {bound, fmt::format("{} {}", t.name.empty() ? "%" + std::to_string(t.id) : t.name,
                                 ir::shapeString(t.shape))};
  };
  std::vector<int64_t> ids = {tensor};
  for (size_t k = 0; k < ids.size(); ++k)
    for (const ir::Node &n : graph.nodes()) {
      auto at = std::find(n.inputs.begin(), n.inputs.end(), ids[k]);
      if (at == n.inputs.end())
        continue;
      size_t slot = size_t(at - n.inputs.begin());
      if (reshapes.count(n.op) && slot == 0 && !n.outputs.empty())
        ids.push_back(n.outputs[0]);
      const ir::Tensor &first = graph.tensor(n.inputs[0]);
      if (n.op == "aten::embedding" && slot == 1 && !first.shape.empty())
        offer(first, first.shape[0]);
      if ((n.op == "aten::cross_entropy_loss" || n.op == "aten::nll_loss_nd" ||
           n.op == "aten::nll_loss") &&
          slot == 1 && !first.shape.empty())
        offer(first, first.shape.size() == 1 ? first.shape[0] : first.shape[1]);
    }
  return best;
}

void fillInputs(const ir::Graph &graph, const RankLayout &layout, proto::RankManifest &m) {
  for (const InputSpec &in : layout.inputs) {
    const ir::Tensor &t = graph.tensor(in.tensor);
    proto::ProgramInput *p = m.add_inputs();
    p->set_name(t.name);
    for (int64_t d : t.shape)
      p->add_full_shape(d);
    for (int64_t d : in.shape)
      p->add_shape(d);
    p->set_dtype(toProtoDType(t.dtype));
    p->set_batch_dim(in.batchDim);
    if (!ir::isFloatingPoint(t.dtype)) {
      auto [bound, of] = indexBound(graph, in.tensor);
      p->set_index_bound(bound);
      p->set_index_bound_of(of);
    }
  }
}

void fillGroupsAndReducers(const RankLayout &layout, int64_t bucketBytes, proto::RankManifest &m) {
  for (const CommGroupSpec &spec : layout.groups) {
    proto::CommGroup *g = m.add_groups();
    g->set_id(spec.id);
    for (int r : spec.ranks)
      g->add_ranks(r);
  }
  std::map<std::string, int> reducerOf;
  for (const ReducerSpec &spec : layout.reducers) {
    proto::Reducer *r = m.add_reducers();
    r->set_group(spec.group);
    r->set_bucket_bytes(bucketBytes);
    r->set_average(spec.average);
    r->set_divisor(spec.divisor);
    if (spec.zeroSplit) {
      r->mutable_zero_split()->set_shard_group(spec.zeroShardGroup);
      r->mutable_zero_split()->set_cross_group(spec.zeroCrossGroup);
    }
    for (const std::string &s : spec.shards) {
      r->add_shards(s);
      reducerOf[s] = m.reducers_size() - 1;
    }
  }
  for (proto::Shard &s : *m.mutable_shards()) {
    auto it = reducerOf.find(s.local_name());
    s.set_reducer(s.trainable() && it != reducerOf.end() ? it->second : -1);
  }
  for (const BufferSyncSpec &spec : layout.bufferSyncs) {
    proto::BufferSync *b = m.add_buffer_syncs();
    b->set_group(spec.group);
    for (const std::string &s : spec.shards)
      b->add_shards(s);
  }
}

int64_t dtypeBytes(proto::DType t) {
  return ir::dtypeSize(static_cast<ir::DType>(static_cast<int>(t)));
}

// Bytes of the reducers' flat buckets (Reducer.cpp), as copies of the
// gradients: every reduced gradient once; under ZeRO each bucket is padded
// to the group size and the rank keeps its shard of it besides; under ZeRO-2
// only the shard and the buckets in flight (about four a reducer,
// MemoryReport.cpp). nnsc-run's report counts what they add to the gradients.
double reducerBucketBytes(const proto::RankManifest &m) {
  std::vector<double> perReducer(static_cast<size_t>(m.reducers_size()), 0.0);
  for (const proto::Shard &s : m.shards()) {
    if (s.reducer() < 0 || s.reducer() >= m.reducers_size())
      continue;
    double n = 1;
    for (int64_t d : s.shape())
      n *= static_cast<double>(d);
    perReducer[static_cast<size_t>(s.reducer())] += n * static_cast<double>(dtypeBytes(s.dtype()));
  }
  double total = 0;
  for (int r = 0; r < m.reducers_size(); ++r) {
    double bytes = perReducer[static_cast<size_t>(r)];
    // The ranks ZeRO shards over: the group, or in blocks the shard group.
    const proto::Reducer &red = m.reducers(r);
    int shardGroup = red.has_zero_split() ? red.zero_split().shard_group() : red.group();
    int groupSize = 1;
    for (const proto::CommGroup &g : m.groups())
      if (g.id() == shardGroup)
        groupSize = std::max(1, g.ranks_size());
    if (groupSize == 1) // nothing sharded: the reducer all-reduces
      total += bytes;
    else if (m.zero() >= 2)
      total += bytes / groupSize +
               std::min(2 * bytes, 4.0 * static_cast<double>(m.reducers(r).bucket_bytes()));
    else
      total += m.zero() > 0 ? bytes * (1.0 + 1.0 / groupSize) : bytes;
  }
  return total;
}

} // namespace

namespace {

// The cost model's memory of `load` as its tensors' own dtypes give it: the
// optimizer's states are nnsc-run's to add (from its config).
void fillEstimate(const cost::DeviceLoad &load, const proto::RankManifest &m,
                  proto::MemoryEstimate &e) {
  cost::MemoryOptions options;
  options.optimizer = cost::Optimizer::Sgd;
  cost::DeviceMemory memory = cost::deviceMemory(load, options);
  double trainable = 0;
  for (const cost::StateHolding &s : load.state)
    if (s.trainable)
      trainable += s.elements;
  e.set_param_bytes(memory.paramBytes);
  if (m.zero() >= 3) { // the parameters one recompute group alone reads, over the copies
    options.zero = m.zero();
    options.dpSize = std::max(1, m.dp_size());
    options.zeroNgroups = std::max(1, m.zero_ngroups());
    e.set_param_bytes(cost::deviceMemory(load, options).paramBytes);
  }
  e.set_grad_bytes(memory.gradBytes);
  e.set_activation_bytes(memory.activationBytes);
  e.set_transient_bytes(memory.transientBytes);
  e.set_comm_bytes(reducerBucketBytes(m));
  e.set_trainable_elements(trainable);
  e.set_mask_elements(memory.maskElements);
}

} // namespace

void fillMemoryEstimate(const cost::DeviceLoad &load, proto::RankManifest &m,
                        const cost::DeviceLoad *load16) {
  fillEstimate(load, m, *m.mutable_memory_estimate());
  if (load16)
    fillEstimate(*load16, m, *m.mutable_memory_estimate_16bit());
}

namespace {

void fillPipeTensors(const ir::Graph &graph, const std::vector<PipeTensorSpec> &specs,
                     google::protobuf::RepeatedPtrField<proto::PipeTensor> &out) {
  for (const PipeTensorSpec &spec : specs) {
    proto::PipeTensor &t = *out.Add();
    t.set_name(fmt::format("t{}", spec.tensor));
    for (int64_t d : spec.shape)
      t.add_shape(d);
    t.set_dtype(toProtoDType(graph.tensor(spec.tensor).dtype));
    t.set_peer(spec.peer);
    t.set_tag(spec.tag);
    t.set_peer_stage(spec.peerStage);
    t.set_requires_grad(spec.requiresGrad);
  }
}

// A schedule's passes as steps: a forward receives its chunk's inputs first
// and sends its outputs after; a backward receives the outputs' gradients
// first and sends the inputs' after.
void addSteps(const std::vector<plan::PipelinePass> &passes, const proto::Pipeline &p,
              google::protobuf::RepeatedPtrField<proto::PipeStep> &out) {
  auto add = [&](proto::PipeStep::Kind kind, const plan::PipelinePass &pass) {
    proto::PipeStep &s = *out.Add();
    s.set_kind(kind);
    s.set_micro(pass.micro);
    s.set_chunk(pass.chunk);
  };
  auto needsGrad = [](const auto &tensors) {
    return std::any_of(tensors.begin(), tensors.end(),
                       [](const proto::PipeTensor &t) { return t.requires_grad(); });
  };
  for (const plan::PipelinePass &pass : passes) {
    const proto::PipeChunk &chunk = p.chunks(pass.chunk);
    if (pass.forward) {
      if (chunk.recv_size() > 0)
        add(proto::PipeStep::RECV_ACTIVATIONS, pass);
      add(proto::PipeStep::FORWARD, pass);
      if (chunk.send_size() > 0)
        add(proto::PipeStep::SEND_ACTIVATIONS, pass);
    } else {
      if (needsGrad(chunk.send()))
        add(proto::PipeStep::RECV_GRADIENTS, pass);
      add(proto::PipeStep::BACKWARD, pass);
      if (needsGrad(chunk.recv()))
        add(proto::PipeStep::SEND_GRADIENTS, pass);
    }
  }
}

void fillPipeline(const ir::Graph &graph, const RankLayout &layout, proto::Pipeline &p) {
  p.set_stages(layout.stages);
  p.set_stage(layout.stage);
  p.set_micro_batches(layout.microBatches);
  p.set_schedule(layout.schedule);
  for (const ChunkSpec &c : layout.chunks) {
    proto::PipeChunk &chunk = *p.add_chunks();
    chunk.set_stage(c.stage);
    chunk.set_function(c.function);
    chunk.set_has_loss(c.hasLoss);
    fillPipeTensors(graph, c.recv, *chunk.mutable_recv());
    fillPipeTensors(graph, c.send, *chunk.mutable_send());
  }
  int chunks = static_cast<int>(layout.chunks.size());
  // layoutRank checked both schedules.
  addSteps(*plan::pipelinePasses(layout.schedule, layout.stages, chunks,
                                      layout.microBatches, layout.stage),
           p, *p.mutable_steps());
  addSteps(*plan::pipelinePasses("forward", layout.stages, chunks, 1, layout.stage), p,
           *p.mutable_eval_steps());
}

} // namespace

proto::RankManifest buildManifest(const ir::Graph &graph, const RankLayout &layout,
                                  const ManifestOptions &options) {
  proto::RankManifest m;
  m.set_format_version(kManifestFormatVersion);
  m.set_rank(layout.rank);
  m.set_world_size(layout.worldSize);
  m.set_plan_ngpus(layout.planNgpus);
  m.set_dp_size(layout.dpSize);
  m.set_dp_rank(layout.dpRank);
  m.set_zero(layout.zero);
  if (layout.zeroNgroups > 1)
    m.set_zero_ngroups(layout.zeroNgroups);
  m.set_program(fmt::format("rank{}.py", layout.rank));
  m.set_entry(kEntryName);
  if (options.weightsWritten)
    m.set_weights(fmt::format("rank{}.safetensors", layout.rank));
  m.set_model_name(graph.name);
  fillInputs(graph, layout, m);
  for (const ShardSpec &s : layout.shards)
    fillShard(graph, s, *m.add_shards());
  fillGroupsAndReducers(layout, options.bucketBytes, m);
  m.set_loss_output(layout.lossOutput);
  m.set_num_outputs(static_cast<int32_t>(layout.outputs.size()));
  m.set_loss_scale(layout.lossScale);
  m.set_loss_replicas(layout.lossReplicas);
  if (!layout.chunks.empty()) {
    fillPipeline(graph, layout, *m.mutable_pipeline());
    m.set_entry(layout.chunks[0].function);
  }
  return m;
}

namespace {

// One pipeline transfer as a channel's two ends see it.
struct Transfer {
  int tag = 0, micro = 0;
  bool operator==(const Transfer &o) const { return tag == o.tag && micro == o.micro; }
};
struct ChannelEnds {
  std::vector<Transfer> sent, received;
};

// Appends what `m`'s `steps` send and receive to the channels they use, in
// the order the runtime issues them (PipelineRunner::runStep).
void addTransfers(const proto::RankManifest &m,
                  const google::protobuf::RepeatedPtrField<proto::PipeStep> &steps,
                  std::map<rt::PipeChannel, ChannelEnds> &channels) {
  const int me = m.rank();
  for (const proto::PipeStep &st : steps) {
    if (st.chunk() < 0 || st.chunk() >= m.pipeline().chunks_size())
      continue; // checkPipelineManifest's to report
    const bool gradients = st.kind() == proto::PipeStep::RECV_GRADIENTS ||
                           st.kind() == proto::PipeStep::SEND_GRADIENTS;
    const bool sending = st.kind() == proto::PipeStep::SEND_ACTIVATIONS ||
                         st.kind() == proto::PipeStep::SEND_GRADIENTS;
    if (!gradients && !sending && st.kind() != proto::PipeStep::RECV_ACTIVATIONS)
      continue; // a forward or a backward
    const proto::PipeChunk &chunk = m.pipeline().chunks(st.chunk());
    // Values go out along `send` and come in along `recv`; gradients the other way.
    for (const proto::PipeTensor &t : sending != gradients ? chunk.send() : chunk.recv()) {
      if (t.peer() == me || (gradients && !t.requires_grad()))
        continue;
      ChannelEnds &ends = channels[rt::pipeChannel(t, me, chunk.stage(), gradients, sending)];
      (sending ? ends.sent : ends.received).push_back({t.tag(), st.micro()});
    }
  }
}

std::string describe(const std::vector<Transfer> &ts, size_t i) {
  return i < ts.size() ? fmt::format("tag {} of micro-batch {}", ts[i].tag, ts[i].micro)
                       : std::string("nothing");
}

} // namespace

Status checkPipelineChannels(const std::vector<const proto::RankManifest *> &ranks) {
  for (bool evaluation : {false, true}) {
    std::map<rt::PipeChannel, ChannelEnds> channels;
    for (const proto::RankManifest *m : ranks)
      if (m->has_pipeline())
        addTransfers(*m, evaluation ? m->pipeline().eval_steps() : m->pipeline().steps(), channels);
    for (const auto &[c, ends] : channels) {
      if (ends.sent == ends.received)
        continue;
      size_t i = 0;
      while (i < ends.sent.size() && i < ends.received.size() && ends.sent[i] == ends.received[i])
        ++i;
      return Status::internal(fmt::format(
          "internal error: the pipeline's {} from rank {} (virtual stage {}) to rank {} (virtual "
          "stage {}), {} schedule, are not received in the order they are sent: transfer {} is "
          "{} at rank {} and {} at rank {} (NCCL pairs them by order)",
          c.gradients ? "gradients" : "values", c.srcRank, c.srcStage, c.dstRank, c.dstStage,
          evaluation ? "evaluation" : "training", i, describe(ends.sent, i), c.srcRank,
          describe(ends.received, i), c.dstRank));
    }
  }
  return Status::ok();
}

std::string manifestToJson(const proto::RankManifest &manifest) {
  std::string json;
  google::protobuf::util::JsonPrintOptions opts;
  opts.add_whitespace = true;
  opts.preserve_proto_field_names = true;
  opts.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(manifest, &json, opts);
  return json;
}

Status writeManifest(const proto::RankManifest &manifest, const std::string &path) {
  std::string bytes;
  if (!manifest.SerializeToString(&bytes))
    return Status::internal(fmt::format("{}: error: cannot serialize the manifest", path));
  return writeFileAtomic(path, bytes);
}

Expected<proto::RankManifest> readManifest(const std::string &path) {
  auto bytes = readFile(path);
  if (!bytes)
    return bytes.status();
  return parseManifest(*bytes, path);
}

Expected<proto::RankManifest> parseManifest(const std::string &bytes, const std::string &path) {
  proto::RankManifest m;
  if (!m.ParseFromString(bytes) || m.program().empty() || m.world_size() <= 0)
    return errorf("{}: error: not an nnsc rank manifest (written by nnsc-codegen)", path);
  if (m.format_version() == 0 || m.format_version() > kManifestFormatVersion)
    return errorf("{}: error: unsupported manifest format version {} (this build reads 1..{})",
                  path, m.format_version(), kManifestFormatVersion);
  return m;
}

} // namespace nnsc::codegen
