// The fp16 loss scale (LossScaler.h) over hand-written overflow sequences,
// and its checkpoint field.
#include "../CatchCompat.h"

#include "nnsc/Runtime/CheckpointMeta.h"
#include "nnsc/Runtime/LossScaler.h"

using namespace nnsc;
using namespace nnsc::rt;

namespace {

LossScaleConfig config(double initial, int64_t interval, int64_t hysteresis = 1) {
  LossScaleConfig c;
  c.initial = initial;
  c.growthInterval = interval;
  c.hysteresis = hysteresis;
  return c;
}

} // namespace

TEST_CASE("loss scale backs off on overflow and grows after clean steps", "[precision]") {
  LossScaler s(config(1024, 3));
  s.update(true); // as GradScaler: every overflow halves
  CHECK(s.scale() == 512);
  s.update(true);
  CHECK(s.scale() == 256);
  s.update(false);
  s.update(false);
  CHECK(s.scale() == 256);
  s.update(false); // the third clean step in a row
  CHECK(s.scale() == 512);
  s.update(false);
  s.update(true); // resets the clean count
  s.update(false);
  s.update(false);
  CHECK(s.scale() == 256);
  s.update(false);
  CHECK(s.scale() == 512);
}

TEST_CASE("loss scale hysteresis waits for overflows in a row and stops at the floor",
          "[precision]") {
  LossScaleConfig c = config(8, 100, 2);
  c.minScale = 2;
  LossScaler s(c);
  s.update(true);
  CHECK(s.scale() == 8); // one overflow of the two allowed
  s.update(true);
  CHECK(s.scale() == 4);
  s.update(true); // the budget stays spent until the scale grows again (Megatron)
  CHECK(s.scale() == 2);
  s.update(true);
  CHECK(s.scale() == 2);
  CHECK(s.state().hysteresisLeft <= 0);
}

TEST_CASE("loss scale state survives a checkpoint's metadata", "[precision][checkpoint]") {
  LossScaler s(config(65536, 5, 2));
  s.update(true);
  s.update(false);
  CheckpointMeta m;
  m.lossScale = s.state();
  auto back = parseCheckpointMeta(checkpointMetaText(m), "rank0.json");
  REQUIRE(back);
  REQUIRE(back->lossScale);
  LossScaler resumed(config(65536, 5, 2));
  resumed.setState(*back->lossScale);
  for (bool overflow : {false, false, false, true, true, false}) {
    s.update(overflow);
    resumed.update(overflow);
    CHECK(resumed.scale() == s.scale());
  }
  CHECK_FALSE(parseCheckpointMeta(checkpointMetaText(CheckpointMeta{}), "r.json")->lossScale);
  std::string bad = checkpointMetaText(m);
  bad.replace(bad.find("\"scale\": 65536.0"), 16, "\"scale\": -1.0");
  auto refused = parseCheckpointMeta(bad, "ck/rank0.json");
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.status().message(),
             Catch::Matchers::ContainsSubstring("ck/rank0.json: error: bad checkpoint metadata: "
                                                "loss_scale -1"));
}
