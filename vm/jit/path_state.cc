#include "vm/jit/path_state.h"

namespace minivm::jit {

void PathState::Meet(const PathState& other) {
  polled = polled && other.polled;
  frame_written = frame_written && other.frame_written;
  for (size_t i = 0; i < home.size(); ++i) {
    home[i] = home[i] && other.home[i];
    is_int[i] = is_int[i] && other.is_int[i];
    is_ref[i] = is_ref[i] && other.is_ref[i];
    if (copy_of[i] != other.copy_of[i]) copy_of[i] = -1;
  }
}

void PathState::Reset(size_t slots) {
  *this = PathState();
  home.assign(slots, false);
  is_int.assign(slots, false);
  is_ref.assign(slots, false);
  copy_of.assign(slots, -1);
}

void PathState::Forget(int slot, int num_locals) {
  home[slot] = false;
  is_int[slot] = false;
  is_ref[slot] = false;
  copy_of[slot] = -1;
  if (slot < num_locals) {
    for (size_t j = num_locals; j < copy_of.size(); ++j) {
      if (copy_of[j] == slot) copy_of[j] = -1;
    }
  }
}

void PathState::ProveInt(int slot) {
  is_int[slot] = true;
  if (copy_of[slot] >= 0) is_int[copy_of[slot]] = true;
}

void PathState::ProveRef(int slot) {
  is_ref[slot] = true;
  if (copy_of[slot] >= 0) is_ref[copy_of[slot]] = true;
}

}  // namespace minivm::jit
