// Go's legacy text heap profile (what runtime/pprof writes for debug=1),
// from heapprof's rows, and the symbol service (Go's /debug/pprof/symbol)
// that names the addresses it contains.
//
// Design:
// .format  The format is the one pprof's legacy parser reads (google/pprof,
//     profile/legacy_profile.go, parseHeap): a header line
//       heap profile: IO: IB [AO: AB] @ SAMPLING
//     then one line per sample
//       io: ib [ao: ab] @ addr addr ...        (leaf first)
//     where io/ib are in-use objects and bytes and ao/ab allocated ones;
//     blank lines and '#' lines may appear anywhere. The parser reads
//     nothing else: the '#' lines that Go (and this file) write after each
//     sample, with function and file:line per address, are for people.
// .estimates  Values are heapprof's unbiased estimates, not raw sample counts, so the
//     header says "@ heapprofile" (pprof takes the values as they are,
//     period 1) rather than Go's "@ heap/<2*rate>": given a rate, pprof
//     scales each line by 1/(1-exp(-avgsize/rate)) itself, because Go's
//     runtime writes raw counts, and ours would be inflated a second time.
//     The sampling interval is stated in a comment instead.
// .addresses  Addresses are not machine addresses: frame f of the site table is
//     written as kFrameBase + 16 f + 8. pprof subtracts 1 from each before
//     symbolizing (return addresses point after the call), so any address in
//     [kFrameBase + 16 f, kFrameBase + 16 f + 16) names frame f. The text has
//     no memory map, so pprof puts its locations in a mapping named after the
//     profile's URL and POSTs their addresses to the symbol service beside
//     it (the URL's last element replaced by "symbol"; internal/symbolz),
//     which answers with function names. Frame ids never change (the site
//     table only grows), so a lookup made after the text was written names
//     the same frames.
// Rejected: one line per (stack, size) with raw counts, as Go's runtime
// writes: heapprof aggregates per (stack, class, thread) and unbiases each
// sample, and pprof's per-line rescaling by the average size is biased when
// sizes are mixed (docs/tools.md, "How the numbers are made").
#ifndef MINIVM_EXAMPLES_AGENTS_HEAPPROF_HEAP_TEXT_H_
#define MINIVM_EXAMPLES_AGENTS_HEAPPROF_HEAP_TEXT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "../common/sites.h"
#include "heap_profile.h"

namespace heapprof {

constexpr uint64_t kFrameBase = 0x100000;

// The address standing for site-table frame `frame` in the text.
inline uint64_t FrameAddress(uint32_t frame) { return kFrameBase + 16 * uint64_t{frame} + 8; }
// The frame an address names (see .addresses); false if none of the
// `frame_count` frames.
bool FrameOfAddress(uint64_t address, size_t frame_count, uint32_t* frame);

// The legacy text of `rows`: one sample per row whose four rounded values
// are not all 0, sorted by in-use bytes (kHeap) or allocated bytes (kAllocs),
// each followed by '#' lines naming its frames, class and thread; after the
// header, `comments` as '#' lines.
std::string BuildLegacyText(const std::vector<Row>& rows, const agent::SiteTable::Snapshot& sites,
                            int64_t interval, ProfileKind kind,
                            const std::vector<std::string>& comments = {});

// Go's symbol service: `query` is addresses joined by '+' (hexadecimal with
// 0x, or decimal); the answer is "num_symbols: 1" and one line
// "0x<address> <function>" per address that names a frame.
std::string LookupSymbols(const std::string& query, const agent::SiteTable::Snapshot& sites);

}  // namespace heapprof

#endif  // MINIVM_EXAMPLES_AGENTS_HEAPPROF_HEAP_TEXT_H_
