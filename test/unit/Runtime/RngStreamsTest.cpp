// The streams of split random ops (RngStreams.h): nnsc.rng_fork and
// nnsc.rng_join as a rank program calls them, around dropout.
#include "CommTestUtil.h" // first: see there

#include <ATen/ATen.h>

#include "nnsc/Runtime/Program.h"
#include "nnsc/Runtime/RngStreams.h"

using namespace nnsc;
using namespace nnsc::rt;
using Catch::Matchers::ContainsSubstring;

namespace {

// What codegen writes for one piece of a split dropout, then a draw from the
// shared stream after the join.
const char *kPieceProgram = R"(
def piece(x: Tensor, node: int, p: int) -> Tuple[Tensor, Tensor]:
    nnsc.rng_fork(node=node, piece=p)  # this piece draws from a stream of its own
    t1 = torch.dropout(x, p=0.5, train=True)
    nnsc.rng_join()  # back to the shared stream
    t2 = torch.rand([64])
    return (t1, t2)
)";

struct Draw {
  at::Tensor piece;  // the dropped-out ones
  at::Tensor shared; // the shared stream's next values after the join
};

Draw drawPiece(const Program &program, int64_t node, int64_t piece) {
  auto out = program.run("piece", {at::ones({4, 64}), node, piece});
  NNSC_REQUIRE_OK(out.status());
  return {(*out)[0], (*out)[1]};
}

} // namespace

TEST_CASE("split dropout: pieces draw their own masks, replicas the same, the shared stream "
          "stays in step") {
  auto program = Program::compile(kPieceProgram, "rank0.py");
  NNSC_REQUIRE_OK(program.status());
  setRngStreams(7, 0, "cpu");
  setRngForward(3);

  // What the shared stream gives with no random op before it.
  at::manual_seed(11);
  at::Tensor expected = at::rand({64});

  at::manual_seed(11);
  Draw a = drawPiece(*program, 24, 0);
  at::manual_seed(11); // another rank of the copy: same seed, same program
  Draw a2 = drawPiece(*program, 24, 0);
  at::manual_seed(11);
  Draw b = drawPiece(*program, 24, 1);

  // A piece leaves the shared stream where it was: the draw after the join
  // equals the one without the op, whichever piece the rank computed.
  CHECK(at::equal(a.shared, expected));
  CHECK(at::equal(b.shared, expected));
  // Replicas of a piece draw the same mask; the other piece another one.
  CHECK(at::equal(a.piece, a2.piece));
  CHECK_FALSE(at::equal(a.piece, b.piece));
  // Both are dropout masks at p = 0.5: values 0 or 2, about half of each.
  for (const at::Tensor &m : {a.piece, b.piece}) {
    CHECK(at::logical_or(m == 0, m == 2).all().item<bool>());
    double kept = (m == 2).to(at::kDouble).mean().item<double>();
    CHECK(kept > 0.35);
    CHECK(kept < 0.65);
  }
  // The pieces are independent: they agree on about half the elements, not
  // on all of them (a shared mask would agree everywhere).
  double same = (a.piece == b.piece).to(at::kDouble).mean().item<double>();
  CHECK(same > 0.35);
  CHECK(same < 0.65);
  // Another node's piece 0 draws another mask too.
  CHECK_FALSE(at::equal(drawPiece(*program, 25, 0).piece, a.piece));
}

TEST_CASE("split dropout: a piece's mask is a function of seed, copy and forward index") {
  auto program = Program::compile(kPieceProgram, "rank0.py");
  NNSC_REQUIRE_OK(program.status());
  setRngStreams(7, 0, "cpu");
  setRngForward(3);
  at::Tensor first = drawPiece(*program, 24, 0).piece;

  // The next forward (next micro-batch or step) draws a new mask...
  setRngForward(4);
  CHECK_FALSE(at::equal(drawPiece(*program, 24, 0).piece, first));
  // ...a resumed run (or a recomputed forward) at the same index the same,
  // whatever the shared stream did in between.
  at::manual_seed(12345);
  setRngForward(3);
  CHECK(at::equal(drawPiece(*program, 24, 0).piece, first));
  // Another data-parallel copy, or another run seed, draws another mask.
  setRngStreams(7, 1, "cpu");
  setRngForward(3);
  CHECK_FALSE(at::equal(drawPiece(*program, 24, 0).piece, first));
  setRngStreams(8, 0, "cpu");
  setRngForward(3);
  CHECK_FALSE(at::equal(drawPiece(*program, 24, 0).piece, first));
  CHECK(pieceSeed(7, 0, 3, 24, 0) != pieceSeed(7, 0, 3, 24, 1));
  CHECK(pieceSeed(7, 0, 3, 24, 0) == pieceSeed(7, 0, 3, 24, 0));
}

TEST_CASE("split dropout: an unbalanced fork or join is an error naming the op") {
  const char *twice = R"(
def twice(x: Tensor) -> Tensor:
    nnsc.rng_fork(node=3, piece=1)
    nnsc.rng_fork(node=4, piece=0)
    return x
)";
  const char *joinOnly = R"(
def join_only(x: Tensor) -> Tensor:
    nnsc.rng_join()
    return x
)";
  setRngStreams(7, 0, "cpu");
  setRngForward(0);
  at::manual_seed(5);
  at::Tensor expected = at::rand({8});
  auto p1 = Program::compile(twice, "rank0.py");
  NNSC_REQUIRE_OK(p1.status());
  at::manual_seed(5);
  auto r1 = p1->run({at::ones({2})});
  REQUIRE_FALSE(r1.isOk());
  CHECK_THAT(r1.status().message(),
             ContainsSubstring("nnsc.rng_fork(node=4, piece=0): the fork of node 3 piece 1 is "
                               "still open"));
  // The next forward closes the fork the failed one left open: the shared
  // stream is back where it was before that forward.
  setRngForward(1);
  CHECK(at::equal(at::rand({8}), expected));

  auto p2 = Program::compile(joinOnly, "rank0.py");
  NNSC_REQUIRE_OK(p2.status());
  auto r2 = p2->run({at::ones({2})});
  REQUIRE_FALSE(r2.isOk());
  CHECK_THAT(r2.status().message(), ContainsSubstring("nnsc.rng_join(): no nnsc.rng_fork is open"));
}
