// What a path knows of each slot, and the meet of two paths
// (vm/jit/path_state.h).
#include "vm/jit/path_state.h"

#include "gtest/gtest.h"

namespace minivm::jit {
namespace {

constexpr int kLocals = 2;  // slots 0, 1 are locals; 2, 3 operands
constexpr int kSlots = 4;

PathState Unknown() {
  PathState p;
  p.Reset(kSlots);
  return p;
}

TEST(PathStateTest, ResetKnowsNothing) {
  PathState p = Unknown();
  p.polled = true;
  p.frame_written = true;
  p.ProveInt(0);
  p.Reset(kSlots);
  EXPECT_FALSE(p.polled);
  EXPECT_FALSE(p.frame_written);
  for (int i = 0; i < kSlots; ++i) {
    EXPECT_FALSE(p.home[i]);
    EXPECT_FALSE(p.is_int[i]);
    EXPECT_FALSE(p.is_ref[i]);
    EXPECT_EQ(p.copy_of[i], -1);
  }
}

TEST(PathStateTest, MeetOfIntKnownAndUnknownIsUnknown) {
  PathState knows = Unknown();
  knows.ProveInt(0);
  knows.ProveRef(1);
  knows.home[0] = true;
  knows.polled = true;
  knows.frame_written = true;
  PathState merged = knows;
  merged.Meet(Unknown());
  EXPECT_FALSE(merged.is_int[0]);
  EXPECT_FALSE(merged.is_ref[1]);
  EXPECT_FALSE(merged.home[0]);
  EXPECT_FALSE(merged.polled);
  EXPECT_FALSE(merged.frame_written);
  // And the other way round.
  PathState other = Unknown();
  other.Meet(knows);
  EXPECT_FALSE(other.is_int[0]);
}

TEST(PathStateTest, MeetKeepsWhatEveryPathKnows) {
  PathState a = Unknown();
  PathState b = Unknown();
  for (PathState* p : {&a, &b}) {
    p->ProveInt(0);
    p->ProveRef(1);
    p->home[1] = true;
    p->polled = true;
  }
  a.Meet(b);
  EXPECT_TRUE(a.is_int[0]);
  EXPECT_TRUE(a.is_ref[1]);
  EXPECT_TRUE(a.home[1]);
  EXPECT_TRUE(a.polled);
}

TEST(PathStateTest, CopyOfSurvivesAMeetOnlyIfBothPathsLoadedTheSameLocal) {
  PathState a = Unknown();
  PathState b = Unknown();
  a.copy_of[2] = 0;
  b.copy_of[2] = 0;
  a.copy_of[3] = 0;
  b.copy_of[3] = 1;
  a.Meet(b);
  EXPECT_EQ(a.copy_of[2], 0);
  EXPECT_EQ(a.copy_of[3], -1);
}

TEST(PathStateTest, ProofOfAnOperandReachesTheLocalItWasLoadedFrom) {
  PathState p = Unknown();
  p.copy_of[2] = 1;
  p.ProveInt(2);
  EXPECT_TRUE(p.is_int[2]);
  EXPECT_TRUE(p.is_int[1]);
  EXPECT_FALSE(p.is_int[0]);
  p.copy_of[3] = 0;
  p.ProveRef(3);
  EXPECT_TRUE(p.is_ref[3]);
  EXPECT_TRUE(p.is_ref[0]);
}

TEST(PathStateTest, WritingASlotForgetsItAndTheCopiesOfIt) {
  PathState p = Unknown();
  p.copy_of[2] = 0;
  p.copy_of[3] = 1;
  p.ProveInt(2);  // and local 0
  p.home[0] = true;
  p.Forget(0, kLocals);
  EXPECT_FALSE(p.is_int[0]);
  EXPECT_FALSE(p.home[0]);
  EXPECT_EQ(p.copy_of[2], -1);  // no longer a copy of local 0
  EXPECT_TRUE(p.is_int[2]);     // but its value is still the int it was
  EXPECT_EQ(p.copy_of[3], 1);   // untouched
  p.Forget(3, kLocals);         // an operand: only itself
  EXPECT_EQ(p.copy_of[3], -1);
}

}  // namespace
}  // namespace minivm::jit
