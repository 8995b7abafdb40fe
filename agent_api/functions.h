// The VMTI function table (agent_api/include/vmti/vmti.h's vmtiInterface_1).
#ifndef MINIVM_AGENT_API_FUNCTIONS_H_
#define MINIVM_AGENT_API_FUNCTIONS_H_

#include <string_view>

#include "vmti/vmti.h"

namespace minivm {
struct Function;
}

namespace minivm::agent {

// The one table every environment points at.
const vmtiInterface_1& FunctionTable();

struct Environment;

// The entry checks and helpers of functions.cc, for the functions defined in
// other files (heap_walk.cc). EnterFunction: the environment, the phase
// (`phases` is a mask of vmtiPhase values) and, unless restricted_ok, not
// inside GarbageCollectionStart/Finish.
vmtiError EnterFunction(vmtiEnv* env, unsigned phases, bool restricted_ok, Environment** out);
// Copies into memory the agent frees with Deallocate.
vmtiError CopyApiString(std::string_view s, char** out);
// The function a vmtiMethodID names, or null; and the reverse.
const Function* ResolveMethodId(Environment* e, vmtiMethodID method);
vmtiMethodID MethodIdOf(const Function* fn);

}  // namespace minivm::agent

#endif  // MINIVM_AGENT_API_FUNCTIONS_H_
