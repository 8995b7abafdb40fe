#include "vm/compiler/lexer.h"

#include <cctype>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gc/object.h"

namespace minivm::compiler {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHexDigit(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool IsIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsIdentChar(char c) { return IsIdentStart(c) || IsDigit(c); }

int HexValue(char c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

// A byte as a diagnostic shows it: printable ASCII as itself, else \xNN.
std::string ShowByte(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string(1, c);
  return absl::StrFormat("\\x%02X", u);
}

// The character starting `s` as a diagnostic shows it: a whole valid UTF-8
// sequence as itself (the message is UTF-8 too), any other byte via ShowByte.
std::string ShowCharacter(std::string_view s) {
  const auto lead = static_cast<unsigned char>(s[0]);
  size_t n = 0;
  if (lead >= 0xC2 && lead <= 0xDF) n = 2;
  if (lead >= 0xE0 && lead <= 0xEF) n = 3;
  if (lead >= 0xF0 && lead <= 0xF4) n = 4;
  if (n == 0 || s.size() < n) return ShowByte(s[0]);
  for (size_t i = 1; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80 || c > 0xBF) return ShowByte(s[0]);
  }
  return std::string(s.substr(0, n));
}

struct Keyword {
  std::string_view text;
  TokenKind kind;
};
constexpr Keyword kKeywords[] = {
    {"class", TokenKind::kClass}, {"fn", TokenKind::kFn},
    {"var", TokenKind::kVar},     {"if", TokenKind::kIf},
    {"else", TokenKind::kElse},   {"while", TokenKind::kWhile},
    {"for", TokenKind::kFor},     {"return", TokenKind::kReturn},
    {"break", TokenKind::kBreak}, {"continue", TokenKind::kContinue},
    {"new", TokenKind::kNew},     {"null", TokenKind::kNull},
    {"true", TokenKind::kTrue},   {"false", TokenKind::kFalse},
    {"spawn", TokenKind::kSpawn},
};

// The character the escape `\e` stands for in a string; nullopt if none.
std::optional<char> Unescape(char e) {
  constexpr std::pair<char, char> kEscapes[] = {{'n', '\n'}, {'t', '\t'}, {'"', '"'}, {'\\', '\\'}};
  for (const auto& [escape, c] : kEscapes) {
    if (escape == e) return c;
  }
  return std::nullopt;
}

// Every token with a fixed spelling (MINIVM_TOKENS); the punctuation among
// them is what MatchPunctuation looks for.
constexpr std::pair<std::string_view, TokenKind> kSpelledTokens[] = {
#define MINIVM_SPELLED_TOKEN(name, spelling) {spelling, TokenKind::name},
    MINIVM_TOKENS(MINIVM_SPELLED_TOKEN)
#undef MINIVM_SPELLED_TOKEN
};

// The punctuation token `rest` starts with and its length, the longest one
// ("<=" rather than "<", "&&" rather than "&"); length 0 if none.
std::pair<TokenKind, size_t> MatchPunctuation(std::string_view rest) {
  std::pair<TokenKind, size_t> best = {TokenKind::kError, 0};
  for (const auto& [spelling, kind] : kSpelledTokens) {
    if (std::ispunct(static_cast<unsigned char>(spelling[0])) && spelling.size() > best.second &&
        rest.starts_with(spelling)) {
      best = {kind, spelling.size()};
    }
  }
  return best;
}

}  // namespace

bool CanStartToken(char c) {
  return IsIdentChar(c) || c == '"' || c == ' ' || c == '\t' || c == '\r' || c == '\n' ||
         MatchPunctuation(std::string_view(&c, 1)).second > 0;
}

Lexer::Lexer(std::string_view source, std::vector<Diagnostic>* diagnostics)
    : source_(source), diagnostics_(diagnostics) {}

void Lexer::Advance() {
  if (source_[pos_] == '\n') {
    ++line_;
    column_ = 1;
  } else {
    ++column_;
  }
  ++pos_;
}

void Lexer::Error(int line, int column, std::string message) {
  diagnostics_->push_back(Diagnostic{line, column, std::move(message)});
}

void Lexer::SkipSpaceAndComments() {
  while (!AtEnd()) {
    const char c = Peek();
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      Advance();
    } else if (c == '/' && Peek(1) == '/') {
      while (!AtEnd() && Peek() != '\n') Advance();
    } else {
      return;
    }
  }
}

Token Lexer::Next() {
  SkipSpaceAndComments();
  Token token;
  token.line = line_;
  token.column = column_;
  const size_t start = pos_;
  if (AtEnd()) {
    token.kind = TokenKind::kEof;
    return token;
  }
  const char c = Peek();
  if (IsDigit(c)) {
    LexNumber(&token);
  } else if (IsIdentStart(c)) {
    LexIdentifier(&token);
  } else if (c == '"') {
    LexString(&token);
  } else if (const auto [kind, length] = MatchPunctuation(source_.substr(pos_)); length > 0) {
    for (size_t i = 0; i < length; ++i) Advance();
    token.kind = kind;
  } else {
    switch (c) {
      case '\'': {
        // A single-quoted "string": one error for the whole of it.
        size_t end = pos_ + 1;
        while (end < source_.size() && source_[end] != '\'' && source_[end] != '\n') ++end;
        if (end < source_.size() && source_[end] == '\'') {
          while (pos_ <= end) Advance();
        } else {
          Advance();
        }
        token.kind = TokenKind::kError;
        Error(token.line, token.column, "unexpected character \"'\" (strings use double quotes)");
        break;
      }
      default: {
        // One diagnostic for a whole run of bytes that cannot start a token
        // (binary junk, UTF-8 outside strings) rather than one per byte.
        // Identifier characters next to the junk are part of it: `été` or
        // `$x` is one bad word, not a bad character and then a name.
        const std::string shown = ShowCharacter(source_.substr(pos_));
        Advance();
        while (!AtEnd() && (!CanStartToken(Peek()) || IsIdentChar(Peek())) && Peek() != '\'') {
          Advance();
        }
        token.kind = TokenKind::kError;
        Error(token.line, token.column, absl::StrCat("unexpected character '", shown, "'"));
        break;
      }
    }
  }
  token.text = source_.substr(start, pos_ - start);
  return token;
}

void Lexer::LexIdentifier(Token* token) {
  const size_t start = pos_;
  while (!AtEnd() && IsIdentChar(Peek())) Advance();
  const std::string_view text = source_.substr(start, pos_ - start);
  token->kind = TokenKind::kIdentifier;
  for (const Keyword& k : kKeywords) {
    if (k.text == text) {
      token->kind = k.kind;
      break;
    }
  }
}

void Lexer::LexNumber(Token* token) {
  token->kind = TokenKind::kInt;
  const size_t start = pos_;
  // The literal is the whole run of identifier characters, so that `12ab` is
  // one bad literal rather than a literal followed by a name.
  while (!AtEnd() && IsIdentChar(Peek())) Advance();
  const std::string_view text = source_.substr(start, pos_ - start);
  auto bad = [&] {
    token->int_value = 0;
    const std::string_view shown = text.size() > 32 ? text.substr(0, 32) : text;
    Error(token->line, token->column,
          absl::StrCat("invalid integer literal '", std::string(shown),
                       text.size() > 32 ? "..." : "", "'"));
  };
  bool hex = text.size() >= 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  const std::string_view digits = hex ? text.substr(2) : text;
  if (digits.empty() || digits.front() == '_' || digits.back() == '_') return bad();
  const int base = hex ? 16 : 10;
  uint64_t value = 0;
  bool too_large = false;
  for (char d : digits) {
    if (d == '_') continue;
    if (hex ? !IsHexDigit(d) : !IsDigit(d)) return bad();
    if (too_large) continue;  // keep validating the rest of the digits
    value = value * base + HexValue(d);
    if (value > static_cast<uint64_t>(gc::kMaxInt)) too_large = true;
  }
  if (too_large) {
    token->int_value = 0;
    Error(token->line, token->column, "integer literal too large");
    return;
  }
  token->int_value = static_cast<int64_t>(value);
}

void Lexer::LexString(Token* token) {
  token->kind = TokenKind::kString;
  Advance();  // opening quote
  std::string value;
  while (true) {
    if (AtEnd() || Peek() == '\n') {
      Error(token->line, token->column, "unterminated string");
      // An error token, not a string: what follows on the next lines was
      // never meant as code after this point, so the parser should resync
      // rather than report what it finds there.
      token->kind = TokenKind::kError;
      if (AtEnd()) string_ran_to_end_ = true;
      return;
    }
    const char c = Peek();
    if (c == '"') {
      Advance();
      break;
    }
    if (c == '\\') {
      const int line = line_;
      const int column = column_;
      Advance();
      if (AtEnd() || Peek() == '\n') continue;  // reported as unterminated
      const char e = Peek();
      Advance();
      if (const std::optional<char> unescaped = Unescape(e)) {
        value.push_back(*unescaped);
      } else {
        Error(line, column, absl::StrCat("invalid escape '\\", ShowByte(e), "'"));
      }
      continue;
    }
    value.push_back(c);
    Advance();
  }
  token->string_value = std::move(value);
}

}  // namespace minivm::compiler
