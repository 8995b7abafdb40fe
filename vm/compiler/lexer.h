// The lexer: source bytes to tokens, on demand (the parser pulls one token at
// a time, so memory stays proportional to the AST, not to the token count).
//
// Lexical errors are reported to the diagnostics sink and lexing continues:
// a bad number or escape still yields a token of its kind (value 0 / the
// bytes read so far) so that the parser sees well-formed input and adds no
// follow-on errors. Runs of characters that cannot start a token, and
// unterminated strings, yield one kError token and one diagnostic, which the
// parser recovers from without reporting again.
#ifndef MINIVM_VM_COMPILER_LEXER_H_
#define MINIVM_VM_COMPILER_LEXER_H_

#include <string_view>
#include <vector>

#include "vm/compiler/compiler.h"
#include "vm/compiler/token.h"

namespace minivm::compiler {

class Lexer {
 public:
  // `source` and `diagnostics` must outlive the lexer.
  Lexer(std::string_view source, std::vector<Diagnostic>* diagnostics);

  // The next token; kEof forever once the source is exhausted.
  Token Next();

  // An unterminated string swallowed the end of the input: the closing
  // tokens the parser will miss at the end are a consequence, not news.
  bool string_ran_to_end() const { return string_ran_to_end_; }

 private:
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < source_.size() ? source_[pos_ + ahead] : '\0';
  }
  bool AtEnd() const { return pos_ >= source_.size(); }
  void Advance();  // one byte, tracking line and column
  void SkipSpaceAndComments();
  void Error(int line, int column, std::string message);

  void LexNumber(Token* token);
  void LexString(Token* token);
  void LexIdentifier(Token* token);

  std::string_view source_;
  std::vector<Diagnostic>* diagnostics_;
  size_t pos_ = 0;
  int line_ = 1;
  int column_ = 1;
  bool string_ran_to_end_ = false;
};

// Whether `c` may start a token (used to group runs of invalid bytes).
bool CanStartToken(char c);

}  // namespace minivm::compiler

#endif  // MINIVM_VM_COMPILER_LEXER_H_
