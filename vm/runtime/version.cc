#include "vm/runtime/version.h"

namespace minivm {
const char* VersionString() { return "minivm 0.1.0"; }
}  // namespace minivm
