// quote_input(): user input in error messages, escaped and quoted.
#include <gtest/gtest.h>

#include <string>

#include "util/quote.h"

namespace nvindex {
namespace {

TEST(QuoteInput, PrintableTextIsQuotedAsIs) { EXPECT_EQ(quote_input("abc 12"), "'abc 12'"); }

TEST(QuoteInput, BinaryBytesQuotesAndBackslashesAreEscaped) {
  EXPECT_EQ(quote_input(std::string("\xff\x01\n", 3)), "'\\xff\\x01\\x0a'");
  EXPECT_EQ(quote_input(std::string("a\0b", 3)), "'a\\x00b'");
  EXPECT_EQ(quote_input("it's a\\b"), "'it\\'s a\\\\b'");
}

TEST(QuoteInput, LongInputIsCut) {
  EXPECT_EQ(quote_input(std::string(50, 'x'), 4), "'xxxx...'");
  EXPECT_EQ(quote_input("abcd", 4), "'abcd'");
}

}  // namespace
}  // namespace nvindex
