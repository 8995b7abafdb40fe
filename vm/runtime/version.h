#ifndef MINIVM_VM_RUNTIME_VERSION_H_
#define MINIVM_VM_RUNTIME_VERSION_H_

namespace minivm {
// "minivm X.Y.Z", printed by --version.
const char* VersionString();
}  // namespace minivm

#endif  // MINIVM_VM_RUNTIME_VERSION_H_
