// The text gRPC carries in HTTP/2 headers (src/grpc/grpc_text.hpp).
#include "grpc/grpc_text.hpp"

#include <gtest/gtest.h>

namespace g = ringrpc::detail::grpc;

TEST(GrpcText, PathNamesTypedOrRawMethod) {
  // One string for every path, as a stream record keeps it: nothing of the last name stays.
  std::string m = "stale.name.longer.than.any.below";
  const auto method = [&](std::string_view path) {
    g::method_of_path(path, m);
    return m;
  };
  EXPECT_EQ(method("/pkg.Greeter/Hello"), "pkg.Greeter.Hello");
  EXPECT_EQ(method("/echo"), "echo");
  EXPECT_EQ(method("/"), "");
  EXPECT_EQ(method("/pkg.Greeter/Hello"), "pkg.Greeter.Hello");
  EXPECT_EQ(method("echo"), "");
  EXPECT_EQ(method("//Hello"), "");
  EXPECT_EQ(method("/Greeter/"), "");
  EXPECT_EQ(method("/a/b/c"), "");
}

TEST(GrpcText, TimeoutUnits) {
  EXPECT_EQ(g::parse_timeout("1H"), 3'600'000'000ull);
  EXPECT_EQ(g::parse_timeout("2M"), 120'000'000ull);
  EXPECT_EQ(g::parse_timeout("3S"), 3'000'000ull);
  EXPECT_EQ(g::parse_timeout("200m"), 200'000ull);
  EXPECT_EQ(g::parse_timeout("99999999u"), 99'999'999ull);
  EXPECT_EQ(g::parse_timeout("1500n"), 1ull);
  EXPECT_EQ(g::parse_timeout("10n"), 1ull);  // due at once, not unbounded
  EXPECT_EQ(g::parse_timeout("0n"), 1ull);
  EXPECT_EQ(g::parse_timeout("0S"), 1ull);
}

TEST(GrpcText, MalformedTimeoutsAreRefused) {
  EXPECT_FALSE(g::parse_timeout(""));
  EXPECT_FALSE(g::parse_timeout("S"));
  EXPECT_FALSE(g::parse_timeout("10"));
  EXPECT_FALSE(g::parse_timeout("10s"));
  EXPECT_FALSE(g::parse_timeout("123456789S"));  // nine digits
  EXPECT_FALSE(g::parse_timeout("-1S"));
  EXPECT_FALSE(g::parse_timeout("1 S"));
}

TEST(GrpcText, PercentEncodingKeepsPrintableAscii) {
  EXPECT_EQ(g::percent_encode("no method named 'x'"), "no method named 'x'");
  EXPECT_EQ(g::percent_encode("100%"), "100%25");
  EXPECT_EQ(g::percent_encode("a\nb"), "a%0Ab");
  EXPECT_EQ(g::percent_encode("\xc3\xa9"), "%C3%A9");
}

TEST(GrpcText, Base64BothWays) {
  EXPECT_EQ(g::base64_encode(""), "");
  EXPECT_EQ(g::base64_encode("f"), "Zg");
  EXPECT_EQ(g::base64_encode("fo"), "Zm8");
  EXPECT_EQ(g::base64_encode("foo"), "Zm9v");
  EXPECT_EQ(g::base64_encode(std::string("\x00\xff\x10", 3)), "AP8Q");
  EXPECT_EQ(g::base64_decode("Zm9v"), "foo");
  EXPECT_EQ(g::base64_decode("Zg=="), "f");
  EXPECT_EQ(g::base64_decode("Zg"), "f");
  EXPECT_EQ(g::base64_decode("AP8Q"), std::string("\x00\xff\x10", 3));
  EXPECT_FALSE(g::base64_decode("Z"));
  EXPECT_FALSE(g::base64_decode("Zm9v!"));
  EXPECT_TRUE(g::binary_key("trace-bin"));
  EXPECT_FALSE(g::binary_key("-bin"));
  EXPECT_FALSE(g::binary_key("bin"));
}
