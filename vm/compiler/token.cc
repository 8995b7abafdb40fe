#include "vm/compiler/token.h"

namespace minivm::compiler {

std::string_view TokenKindSpelling(TokenKind kind) {
  static constexpr std::string_view kSpellings[] = {
#define MINIVM_TOKEN_SPELLING(name, spelling) spelling,
      MINIVM_TOKENS(MINIVM_TOKEN_SPELLING)
#undef MINIVM_TOKEN_SPELLING
  };
  return kSpellings[static_cast<uint8_t>(kind)];
}

}  // namespace minivm::compiler
