// Assertions for the agent API's implementation: base/check.h's mechanism,
// naming the agent API in the message ("agent API check failed: ...").
// These guard the implementation's own invariants only: what an agent passes
// in is validated and answered with a vmtiError, never asserted.
#ifndef MINIVM_AGENT_API_CHECK_H_
#define MINIVM_AGENT_API_CHECK_H_

#include "base/check.h"

#define MINIVM_AGENT_CHECK(cond, fmt, ...) \
  MINIVM_CHECK_AS("agent API", cond, fmt __VA_OPT__(, ) __VA_ARGS__)
#define MINIVM_AGENT_DCHECK(cond, fmt, ...) \
  MINIVM_DCHECK_AS("agent API", cond, fmt __VA_OPT__(, ) __VA_ARGS__)

#endif  // MINIVM_AGENT_API_CHECK_H_
