// --verify-heap: a whole-heap consistency check run before and after every
// collection (and on request). Any violation is a CHECK failure naming the
// invariant, the phase and the addresses involved.
//
// Invariants checked:
// .parse  Parsability: eden below its top parses as objects, zero words,
//    retired TLABs' filler words and live TLABs' unused tails (young_gen.h);
//    the from-survivor parses as back-to-back objects; every old page parses
//    as cells (objects or free) or one large object. Every object has a
//    non-null klass of a known kind, a sane size that stays inside its space
//    (and, in the old generation, its own size class or run), and a gc_word
//    with neither the forwarded nor the marked bit set.
// .refs  References: every reference in a root, in a weak slot, in an
//    old-generation object and in every object reachable from the roots
//    points at the start of an object in a live space (eden below top,
//    from-survivor below top, an allocated old cell or large object).
//    Unreachable young objects are not required to hold valid references.
// .cards  Cards: every old->young reference has the holder's header card dirty.
// .free-lists  Free lists: well-formed, class-consistent, counts match the pages.
// .tlabs  TLABs: start <= top <= current_end <= end inside eden's used part.
//    Their unused tails are not zero (tlab.h) and are not read.
#ifndef MINIVM_GC_VERIFIER_H_
#define MINIVM_GC_VERIFIER_H_

#include <vector>

#include "gc/card_table.h"
#include "gc/mutator.h"
#include "gc/old_space.h"
#include "gc/vm_interface.h"
#include "gc/weak_table.h"
#include "gc/young_gen.h"

namespace minivm::gc {

struct VerifierInputs {
  const YoungGen* young;
  const OldSpace* old;
  const CardTable* cards;
  VmInterface* vm;
  const std::vector<Mutator*>* mutators;
  const WeakTable* weak;
};

// Runs every check; `when` names the phase in failure messages.
void VerifyHeap(const VerifierInputs& in, const char* when);

}  // namespace minivm::gc

#endif  // MINIVM_GC_VERIFIER_H_
