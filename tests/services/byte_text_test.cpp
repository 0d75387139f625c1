// Hex and base64 for ringrpc-call's untyped payloads: round trips over every byte value, the
// RFC 4648 test vectors, whitespace and the URL-safe alphabet accepted, bad input refused.

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "byte_text.hpp"

namespace ringrpc::tools {
namespace {

std::string every_byte() {
  std::string s;
  for (int i = 0; i < 256; ++i) s += static_cast<char>(i);
  return s;
}

TEST(byte_text, hex_round_trips_every_byte) {
  const std::string all = every_byte();
  EXPECT_EQ(from_hex(to_hex(all)), all);
  EXPECT_EQ(to_hex(std::string("\x00\xff\x10", 3)), "00ff10");
  EXPECT_EQ(from_hex("00 FF\n10"), std::string("\x00\xff\x10", 3));
}

TEST(byte_text, hex_refuses_bad_digits_and_odd_counts) {
  EXPECT_THROW(from_hex("0g"), std::invalid_argument);
  EXPECT_THROW(from_hex("abc"), std::invalid_argument);
}

TEST(byte_text, base64_matches_rfc4648_vectors) {
  const std::pair<const char*, const char*> vectors[] = {
      {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"},
  };
  for (const auto& [plain, coded] : vectors) {
    EXPECT_EQ(to_base64(plain), coded);
    EXPECT_EQ(from_base64(coded), plain);
  }
  const std::string all = every_byte();
  EXPECT_EQ(from_base64(to_base64(all)), all);
}

TEST(byte_text, base64_accepts_url_safe_unpadded_and_spaced) {
  EXPECT_EQ(from_base64("Zm9v\nYmE"), "fooba");
  EXPECT_EQ(from_base64("-_8"), from_base64("+/8="));
}

TEST(byte_text, base64_refuses_garbage) {
  EXPECT_THROW(from_base64("Zm9v!"), std::invalid_argument);
  EXPECT_THROW(from_base64("Z"), std::invalid_argument);
  EXPECT_THROW(from_base64("Zg==Zg"), std::invalid_argument);
}

TEST(byte_text, raw_is_unchanged) {
  EXPECT_EQ(encode(byte_encoding::raw, "a\nb"), "a\nb");
  EXPECT_EQ(decode(byte_encoding::raw, "a\nb"), "a\nb");
}

// What a server sends, made safe for a terminal: no byte that a terminal acts on survives.
TEST(byte_text, printable_escapes_what_a_terminal_acts_on) {
  EXPECT_EQ(printable("\x1b]0;title\x07\x1b[2J\rfake$ \x7f"), "\\x1b]0;title\\x07\\x1b[2J\\rfake$ \\x7f");
  EXPECT_EQ(printable("a\nb\tc"), "a\\nb\\tc") << "one line by default";
  EXPECT_EQ(printable("a\nb\tc", true), "a\nb\tc") << "multiline keeps newlines and tabs";
  EXPECT_EQ(printable("\xc2\x9b" "2J"), "\\xc2\\x9b2J") << "C1 CSI as UTF-8";
  EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82"), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82")
      << "printable UTF-8 passes";
  EXPECT_EQ(printable("\xff\xc3"), "\\xff\\xc3") << "not UTF-8, or cut short";
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80") << "a surrogate is not UTF-8";
  EXPECT_EQ(printable(std::string_view("\0x", 2)), "\\x00x");
}

}  // namespace
}  // namespace ringrpc::tools
