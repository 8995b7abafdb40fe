// The VMTI function table (agent_api/include/vmti/vmti.h's vmtiInterface_1).
#ifndef MINIVM_AGENT_API_FUNCTIONS_H_
#define MINIVM_AGENT_API_FUNCTIONS_H_

#include "vmti/vmti.h"

namespace minivm::agent {

// The one table every environment points at.
const vmtiInterface_1& FunctionTable();

struct Environment;
// Makes an environment known to the entry checks, which reject any vmtiEnv*
// that was never registered. At most 1024 environments per process.
bool CanRegisterEnvironment();
void RegisterEnvironment(Environment* env);

}  // namespace minivm::agent

#endif  // MINIVM_AGENT_API_FUNCTIONS_H_
