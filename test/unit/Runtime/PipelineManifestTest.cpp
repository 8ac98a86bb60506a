// A manifest's pipeline section is checked before the runtime indexes
// chunks, micro-batches or ranks with its numbers.
#include "../CatchCompat.h"

#include "nnsc/Runtime/PipelineManifest.h"

using namespace nnsc;

namespace {

// Rank 1 of 2, the last of 2 stages: receives t5 from rank 0, computes the
// loss; 1F1B over 2 micro-batches.
proto::RankManifest lastStage() {
  proto::RankManifest m;
  m.set_format_version(2);
  m.set_world_size(2);
  m.set_rank(1);
  proto::Pipeline &p = *m.mutable_pipeline();
  p.set_stages(2);
  p.set_stage(1);
  p.set_micro_batches(2);
  p.set_schedule("1f1b");
  proto::PipeChunk &c = *p.add_chunks();
  c.set_stage(1);
  c.set_function("stage1");
  c.set_has_loss(true);
  proto::PipeTensor &t = *c.add_recv();
  t.set_name("t5");
  t.add_shape(2);
  t.add_shape(8);
  t.set_dtype(proto::FLOAT32);
  t.set_peer(0);
  t.set_peer_stage(0);
  t.set_requires_grad(true);
  for (int micro = 0; micro < 2; ++micro)
    for (auto kind : {proto::PipeStep::RECV_ACTIVATIONS, proto::PipeStep::FORWARD,
                      proto::PipeStep::BACKWARD, proto::PipeStep::SEND_GRADIENTS}) {
      proto::PipeStep &s = *p.add_steps();
      s.set_kind(kind);
      s.set_micro(micro);
    }
  *p.add_eval_steps() = p.steps(0);
  *p.add_eval_steps() = p.steps(1);
  return m;
}

std::string check(const proto::RankManifest &m) {
  return rt::checkPipelineManifest(m, "rank1.pb").message();
}

} // namespace

TEST_CASE("a sound pipeline section passes, a manifest without one too", "[pipeline]") {
  CHECK(rt::checkPipelineManifest(lastStage(), "rank1.pb").isOk());
  CHECK(rt::checkPipelineManifest(proto::RankManifest(), "rank1.pb").isOk());
}

TEST_CASE("bad pipeline numbers are errors naming the file and the entry", "[pipeline]") {
  auto m = lastStage();
  m.mutable_pipeline()->mutable_steps(3)->set_chunk(4);
  CHECK(check(m) == "rank1.pb: error: pipeline step 3 names chunk 4; the manifest has 1");
  m = lastStage();
  m.mutable_pipeline()->mutable_steps(5)->set_micro(2);
  CHECK(check(m) == "rank1.pb: error: pipeline step 5 names micro-batch 2 of 2");
  m = lastStage();
  m.mutable_pipeline()->mutable_eval_steps(1)->set_micro(1);
  CHECK(check(m) == "rank1.pb: error: pipeline evaluation step 1 names micro-batch 1 of 1");
  m = lastStage();
  m.mutable_pipeline()->mutable_steps(0)->set_kind(static_cast<proto::PipeStep::Kind>(9));
  CHECK(check(m) == "rank1.pb: error: pipeline step 0 has unknown kind 9");
  m = lastStage();
  m.mutable_pipeline()->mutable_chunks(0)->mutable_recv(0)->set_peer(2);
  CHECK(check(m) ==
        "rank1.pb: error: pipeline chunk 0 received tensor t5: peer rank 2 is outside the job's 0..1");
  m = lastStage();
  m.mutable_pipeline()->mutable_chunks(0)->mutable_recv(0)->set_shape(0, -3);
  CHECK(check(m) == "rank1.pb: error: pipeline chunk 0 received tensor t5: negative dimension -3");
  m = lastStage();
  m.mutable_pipeline()->mutable_chunks(0)->mutable_recv(0)->set_shape(0, int64_t(1) << 40);
  CHECK_THAT(check(m), Catch::Matchers::ContainsSubstring("above the limit of 2^40"));
  m = lastStage();
  m.mutable_pipeline()->mutable_chunks(0)->mutable_recv(0)->set_tag(1 << 20);
  CHECK(check(m) == "rank1.pb: error: pipeline chunk 0 received tensor t5: tag 1048576 is outside "
                    "0..1048575");
  m = lastStage();
  m.mutable_pipeline()->mutable_chunks(0)->mutable_recv(0)->set_peer_stage(2);
  CHECK(check(m) == "rank1.pb: error: pipeline chunk 0 received tensor t5: peer stage 2 is "
                    "outside the pipeline's virtual stages 0..1");
  m = lastStage();
  m.set_format_version(1); // before PipeTensor.peer_stage: its channels cannot be named
  CHECK(check(m) == "rank1.pb: error: pipeline chunk 0 received tensor t5: this manifest "
                    "(format 1) predates the pipeline's channels between virtual stages "
                    "(format 2): run nnsc-codegen again");
  m = lastStage();
  m.mutable_pipeline()->set_stage(2);
  CHECK(check(m) == "rank1.pb: error: pipeline stage 2 of 2 is impossible");
  m = lastStage();
  m.mutable_pipeline()->set_micro_batches(0);
  CHECK(check(m) == "rank1.pb: error: pipeline micro_batches is 0; expected 1 or more");
  m = lastStage();
  m.mutable_pipeline()->mutable_chunks(0)->clear_function();
  CHECK(check(m) == "rank1.pb: error: pipeline chunk 0 names no function");
  m = lastStage();
  m.mutable_pipeline()->clear_chunks();
  CHECK(check(m) == "rank1.pb: error: the pipeline has no chunks");
}
