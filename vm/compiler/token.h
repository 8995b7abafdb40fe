// Tokens produced by the lexer (lexer.h) and consumed by the parser.
#ifndef MINIVM_VM_COMPILER_TOKEN_H_
#define MINIVM_VM_COMPILER_TOKEN_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace minivm::compiler {

// X(name, spelling): the spelling is what diagnostics show.
#define MINIVM_TOKENS(X)         \
  X(kEof, "end of file")         \
  X(kError, "invalid character") \
  X(kIdentifier, "identifier")   \
  X(kInt, "integer")             \
  X(kString, "string")           \
  X(kLParen, "(")                \
  X(kRParen, ")")                \
  X(kLBrace, "{")                \
  X(kRBrace, "}")                \
  X(kLBracket, "[")              \
  X(kRBracket, "]")              \
  X(kComma, ",")                 \
  X(kSemicolon, ";")             \
  X(kDot, ".")                   \
  X(kPlus, "+")                  \
  X(kMinus, "-")                 \
  X(kStar, "*")                  \
  X(kSlash, "/")                 \
  X(kPercent, "%")               \
  X(kBang, "!")                  \
  X(kAssign, "=")                \
  X(kEq, "==")                   \
  X(kNe, "!=")                   \
  X(kLt, "<")                    \
  X(kLe, "<=")                   \
  X(kGt, ">")                    \
  X(kGe, ">=")                   \
  X(kAndAnd, "&&")               \
  X(kOrOr, "||")                 \
  X(kAmp, "&")                   \
  X(kPipe, "|")                  \
  X(kCaret, "^")                 \
  X(kTilde, "~")                 \
  X(kShl, "<<")                  \
  X(kShr, ">>")                  \
  X(kClass, "class")             \
  X(kFn, "fn")                   \
  X(kVar, "var")                 \
  X(kIf, "if")                   \
  X(kElse, "else")               \
  X(kWhile, "while")             \
  X(kFor, "for")                 \
  X(kReturn, "return")           \
  X(kBreak, "break")             \
  X(kContinue, "continue")       \
  X(kNew, "new")                 \
  X(kNull, "null")               \
  X(kTrue, "true")               \
  X(kFalse, "false")             \
  X(kSpawn, "spawn")

enum class TokenKind : uint8_t {
#define MINIVM_TOKEN_ENUM(name, spelling) name,
  MINIVM_TOKENS(MINIVM_TOKEN_ENUM)
#undef MINIVM_TOKEN_ENUM
};

// How a kind is named in messages and test output: ";", "identifier".
std::string_view TokenKindSpelling(TokenKind kind);

struct Token {
  TokenKind kind = TokenKind::kEof;
  int line = 1;    // 1-based
  int column = 1;  // 1-based, in bytes
  // The source bytes of the token (identifiers, keywords, punctuation).
  std::string_view text;
  int64_t int_value = 0;     // kInt
  std::string string_value;  // kString, escapes resolved
};

}  // namespace minivm::compiler

#endif  // MINIVM_VM_COMPILER_TOKEN_H_
