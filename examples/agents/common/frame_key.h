// A frame's identity as a hash-map key: the method and the bytecode
// location in it. The site table keys frames by vmtiMethodID (common/
// sites.h); the collector by the method ids its records carry
// (examples/collector/session.h).
#ifndef MINIVM_EXAMPLES_AGENTS_COMMON_FRAME_KEY_H_
#define MINIVM_EXAMPLES_AGENTS_COMMON_FRAME_KEY_H_

#include <cstddef>
#include <cstdint>
#include <functional>

namespace agent {

template <typename Method>
struct FrameKey {
  Method method;
  int64_t location;

  bool operator==(const FrameKey& o) const { return method == o.method && location == o.location; }

  struct Hash {
    size_t operator()(const FrameKey& k) const {
      return std::hash<Method>()(k.method) * 1000003u ^ std::hash<int64_t>()(k.location);
    }
  };
};

}  // namespace agent

#endif  // MINIVM_EXAMPLES_AGENTS_COMMON_FRAME_KEY_H_
