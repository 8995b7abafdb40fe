// What minivm-attach prints of a VM's or an agent's text
// (vm/runtime/attach_protocol.h, docs/attach.md "Threat model"): nothing
// that a terminal would act on, and no field that could end its line.
#include "vm/runtime/attach_protocol.h"

#include <string>

#include "gtest/gtest.h"

namespace minivm::attach {
namespace {

TEST(AttachProtocolTest, TerminalTextKeepsLinesAndPrintableText) {
  EXPECT_EQ(EscapeForTerminal("line 1\n\tline 2\n"), "line 1\n\tline 2\n");
  // UTF-8 stays as it is: é, €, an emoji.
  EXPECT_EQ(EscapeForTerminal("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
}

TEST(AttachProtocolTest, TerminalTextEscapesControls) {
  EXPECT_EQ(EscapeForTerminal("\x1b[2J\rover\a\x7f"), "\\x1b[2J\\x0dover\\x07\\x7f");
  EXPECT_EQ(EscapeForTerminal(std::string("a\0b", 3)), "a\\x00b");
  // C1 controls: CSI as UTF-8 (C2 9B) and as a lone byte, which a terminal
  // in an 8-bit mode would take for CSI.
  EXPECT_EQ(EscapeForTerminal(std::string("\xC2\x9B") + "31m"), "\\xc2\\x9b31m");
  EXPECT_EQ(EscapeForTerminal(std::string("\x9B") + "31m"), "\\x9b31m");
}

TEST(AttachProtocolTest, TerminalTextEscapesWhatIsNotUtf8) {
  EXPECT_EQ(EscapeForTerminal("\xFF"), "\\xff");
  EXPECT_EQ(EscapeForTerminal("\xC0\x80"), "\\xc0\\x80");                    // overlong NUL
  EXPECT_EQ(EscapeForTerminal("\xED\xA0\x80"), "\\xed\\xa0\\x80");           // a surrogate
  EXPECT_EQ(EscapeForTerminal("\xF4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // > U+10FFFF
  EXPECT_EQ(EscapeForTerminal("\xE2\x82"), "\\xe2\\x82");                    // cut short
}

TEST(AttachProtocolTest, FieldCannotEndItsLineOrItsQuotes) {
  EXPECT_EQ(EscapeField("evil\n\"forged\" #9\n  at f (x.mv:1)"),
            "evil\\n\\\"forged\\\" #9\\n  at f (x.mv:1)");
  EXPECT_EQ(EscapeField("a\\n\tb\r\x1b"), "a\\\\n\\tb\\r\\x1b");
  EXPECT_EQ(EscapeField("thread-1"), "thread-1");
}

}  // namespace
}  // namespace minivm::attach
