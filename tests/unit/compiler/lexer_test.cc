#include "vm/compiler/lexer.h"

#include <string>
#include <string_view>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace minivm::compiler {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

struct Lexed {
  std::vector<Token> tokens;  // without the final kEof
  std::vector<Diagnostic> errors;
};

Lexed LexAll(std::string_view source) {
  Lexed out;
  Lexer lexer(source, &out.errors);
  for (;;) {
    Token t = lexer.Next();
    if (t.kind == TokenKind::kEof) break;
    out.tokens.push_back(std::move(t));
  }
  return out;
}

std::vector<TokenKind> Kinds(const Lexed& l) {
  std::vector<TokenKind> kinds;
  for (const Token& t : l.tokens) kinds.push_back(t.kind);
  return kinds;
}

std::vector<std::string> Errors(const Lexed& l) {
  std::vector<std::string> out;
  for (const Diagnostic& d : l.errors) {
    out.push_back(std::to_string(d.line) + ":" + std::to_string(d.column) + ": " + d.message);
  }
  return out;
}

TEST(LexerTest, PunctuationAndOperators) {
  Lexed l = LexAll("( ) { } [ ] , ; . + - * / % ! = == != < <= > >= && ||");
  EXPECT_THAT(Errors(l), IsEmpty());
  using K = TokenKind;
  EXPECT_THAT(Kinds(l),
              ElementsAre(K::kLParen, K::kRParen, K::kLBrace, K::kRBrace, K::kLBracket,
                          K::kRBracket, K::kComma, K::kSemicolon, K::kDot, K::kPlus, K::kMinus,
                          K::kStar, K::kSlash, K::kPercent, K::kBang, K::kAssign, K::kEq, K::kNe,
                          K::kLt, K::kLe, K::kGt, K::kGe, K::kAndAnd, K::kOrOr));
}

TEST(LexerTest, BitwiseOperatorsTakeTheLongestSpelling) {
  // "&&" and "||" win over "&" and "|"; "<<" over "<", but "<=" stays one
  // token; ">>=" is ">>" then "=" (there are no compound assignments).
  Lexed l = LexAll("& | ^ ~ << >> &&& ||| <<= >>= a&b|c");
  EXPECT_THAT(Errors(l), IsEmpty());
  using K = TokenKind;
  EXPECT_THAT(Kinds(l), ElementsAre(K::kAmp, K::kPipe, K::kCaret, K::kTilde, K::kShl, K::kShr,
                                    K::kAndAnd, K::kAmp, K::kOrOr, K::kPipe, K::kShl, K::kAssign,
                                    K::kShr, K::kAssign, K::kIdentifier, K::kAmp, K::kIdentifier,
                                    K::kPipe, K::kIdentifier));
}

TEST(LexerTest, KeywordsAndIdentifiers) {
  Lexed l = LexAll(
      "class fn var if else while for return break continue new null true false spawn "
      "classy _x x1 Fn");
  using K = TokenKind;
  EXPECT_THAT(Kinds(l), ElementsAre(K::kClass, K::kFn, K::kVar, K::kIf, K::kElse, K::kWhile,
                                    K::kFor, K::kReturn, K::kBreak, K::kContinue, K::kNew, K::kNull,
                                    K::kTrue, K::kFalse, K::kSpawn, K::kIdentifier, K::kIdentifier,
                                    K::kIdentifier, K::kIdentifier));
  EXPECT_EQ(l.tokens[15].text, "classy");
  EXPECT_EQ(l.tokens[16].text, "_x");
}

TEST(LexerTest, PositionsAreOneBasedAndCommentsSkipped) {
  Lexed l = LexAll("var x; // comment ( \"\n  foo\n\tbar");
  ASSERT_EQ(l.tokens.size(), 5u);
  EXPECT_EQ(l.tokens[0].line, 1);
  EXPECT_EQ(l.tokens[0].column, 1);
  EXPECT_EQ(l.tokens[1].column, 5);
  EXPECT_EQ(l.tokens[3].line, 2);
  EXPECT_EQ(l.tokens[3].column, 3);
  EXPECT_EQ(l.tokens[4].line, 3);
  EXPECT_EQ(l.tokens[4].column, 2);  // a tab is one column
  EXPECT_THAT(Errors(l), IsEmpty());
}

TEST(LexerTest, Integers) {
  Lexed l = LexAll("0 42 1_000_000 0xff 0XFF 0xdead_beef 007 4611686018427387903");
  EXPECT_THAT(Errors(l), IsEmpty());
  std::vector<int64_t> values;
  for (const Token& t : l.tokens) values.push_back(t.int_value);
  EXPECT_THAT(values,
              ElementsAre(0, 42, 1000000, 255, 255, 0xdeadbeef, 7, int64_t{4611686018427387903}));
}

TEST(LexerTest, IntegerTooLarge) {
  Lexed l = LexAll("x 4611686018427387904 99999999999999999999999999 0x4000000000000000");
  EXPECT_THAT(Errors(l),
              ElementsAre("1:3: integer literal too large", "1:23: integer literal too large",
                          "1:50: integer literal too large"));
  EXPECT_THAT(Kinds(l), ElementsAre(TokenKind::kIdentifier, TokenKind::kInt, TokenKind::kInt,
                                    TokenKind::kInt));
}

TEST(LexerTest, MalformedIntegers) {
  Lexed l = LexAll("1_ 0x 0x_1 12ab 0xfg 1__2");
  EXPECT_THAT(
      Errors(l),
      ElementsAre("1:1: invalid integer literal '1_'", "1:4: invalid integer literal '0x'",
                  "1:7: invalid integer literal '0x_1'", "1:12: invalid integer literal '12ab'",
                  "1:17: invalid integer literal '0xfg'"));
  EXPECT_EQ(l.tokens.size(), 6u);  // one token per literal: no cascades
}

TEST(LexerTest, StringsAndEscapes) {
  Lexed l = LexAll(R"("" "abc" "a\nb\t\"\\" )"
                   "\"caf\xC3\xA9\"");
  EXPECT_THAT(Errors(l), IsEmpty());
  ASSERT_EQ(l.tokens.size(), 4u);
  EXPECT_EQ(l.tokens[0].string_value, "");
  EXPECT_EQ(l.tokens[1].string_value, "abc");
  EXPECT_EQ(l.tokens[2].string_value, "a\nb\t\"\\");
  EXPECT_EQ(l.tokens[3].string_value, "caf\xC3\xA9");  // UTF-8 passes through
}

TEST(LexerTest, StringMayHoldAnyByteButNewline) {
  const std::string src("\"a\0\xff\"", 5);
  Lexed l = LexAll(src);
  EXPECT_THAT(Errors(l), IsEmpty());
  ASSERT_EQ(l.tokens.size(), 1u);
  EXPECT_EQ(l.tokens[0].string_value, std::string("a\0\xff", 3));
}

TEST(LexerTest, InvalidEscape) {
  Lexed l = LexAll(R"(x "ab\qc\x" y)");
  EXPECT_THAT(Errors(l), ElementsAre("1:6: invalid escape '\\q'", "1:9: invalid escape '\\x'"));
  EXPECT_THAT(Kinds(l),
              ElementsAre(TokenKind::kIdentifier, TokenKind::kString, TokenKind::kIdentifier));
}

TEST(LexerTest, UnterminatedString) {
  Lexed l = LexAll("x = \"abc\ny;\n\"def");
  EXPECT_THAT(Errors(l), ElementsAre("1:5: unterminated string", "3:1: unterminated string"));
  // The string stops at the newline, so the next line lexes normally.
  EXPECT_EQ(l.tokens[2].kind, TokenKind::kError);
  EXPECT_EQ(l.tokens[3].kind, TokenKind::kIdentifier);
  EXPECT_EQ(l.tokens[3].line, 2);
}

TEST(LexerTest, BackslashAtEndOfInput) {
  Lexed l = LexAll("\"abc\\");
  EXPECT_THAT(Errors(l), ElementsAre("1:1: unterminated string"));
}

TEST(LexerTest, InvalidCharactersOneErrorPerRun) {
  static constexpr char kSource[] = "a @#$ b \0\x01 c \xC3\xA9 d ` e \\ f";
  Lexed l = LexAll(std::string(kSource, sizeof(kSource) - 1));
  EXPECT_THAT(Errors(l),
              ElementsAre("1:3: unexpected character '@'", "1:9: unexpected character '\\x00'",
                          "1:14: unexpected character '\xC3\xA9'",
                          "1:19: unexpected character '`'", "1:23: unexpected character '\\'"));
  using K = TokenKind;
  EXPECT_THAT(Kinds(l), ElementsAre(K::kIdentifier, K::kError, K::kIdentifier, K::kError,
                                    K::kIdentifier, K::kError, K::kIdentifier, K::kError,
                                    K::kIdentifier, K::kError, K::kIdentifier));
}

TEST(LexerTest, JunkSwallowsAdjacentIdentifierCharacters) {
  Lexed l = LexAll("var \xC3\xA9t\xC3\xA9 = $x1 + \xFF;");
  EXPECT_THAT(Errors(l),
              ElementsAre("1:5: unexpected character '\xC3\xA9'", "1:13: unexpected character '$'",
                          "1:19: unexpected character '\\xFF'"));
  using K = TokenKind;
  EXPECT_THAT(Kinds(l), ElementsAre(K::kVar, K::kError, K::kAssign, K::kError, K::kPlus, K::kError,
                                    K::kSemicolon));
}

TEST(LexerTest, KindSpellings) {
  EXPECT_EQ(TokenKindSpelling(TokenKind::kSemicolon), ";");
  EXPECT_EQ(TokenKindSpelling(TokenKind::kAndAnd), "&&");
  EXPECT_EQ(TokenKindSpelling(TokenKind::kSpawn), "spawn");
  EXPECT_EQ(TokenKindSpelling(TokenKind::kEof), "end of file");
}

TEST(LexerTest, EofIsSticky) {
  std::vector<Diagnostic> errors;
  Lexer lexer("x", &errors);
  EXPECT_EQ(lexer.Next().kind, TokenKind::kIdentifier);
  EXPECT_EQ(lexer.Next().kind, TokenKind::kEof);
  EXPECT_EQ(lexer.Next().kind, TokenKind::kEof);
}

TEST(LexerTest, HugeInputIsLinear) {
  std::string src;
  for (int i = 0; i < 200000; ++i) src += "abc + 12 // c\n";
  Lexed l = LexAll(src);
  EXPECT_EQ(l.tokens.size(), 600000u);
  EXPECT_THAT(Errors(l), IsEmpty());
}

}  // namespace
}  // namespace minivm::compiler
