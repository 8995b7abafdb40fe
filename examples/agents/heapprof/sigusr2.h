// SIGUSR2, heapprof's request for a numbered dump (heapprof.cc .sigusr2).
// The signal is process-wide, the instances are not: the handler counts
// signals, and each instance's worker dumps when the count moved past what
// it last saw.
#ifndef HEAPPROF_SIGUSR2_H_
#define HEAPPROF_SIGUSR2_H_

#include <cstdint>

namespace heapprof {

// Installs the counting handler, once per process; later calls do nothing.
// It stays installed until the process ends.
void InstallSigusr2();

// How many SIGUSR2 signals the process has received since the handler was
// installed.
uint64_t Sigusr2Count();

}  // namespace heapprof

#endif  // HEAPPROF_SIGUSR2_H_
