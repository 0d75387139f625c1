// The TLS schemes of ringrpc-load: how their URLs parse and what the diagnoses suggest.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "protocol.hpp"
#include "sniff.hpp"

namespace {

using ringrpc::load::parse_target;

TEST(tls_target, SchemesSpeakTheirPlaintextProtocolInsideTls) {
  const auto h = parse_target("https://example.test/x");
  EXPECT_EQ(h.scheme, "http");
  EXPECT_TRUE(h.tls);
  EXPECT_EQ(h.port, 443);
  EXPECT_EQ(h.path, "/x");
  const auto h2 = parse_target("h2://127.0.0.1:8443/");
  EXPECT_EQ(h2.scheme, "h2c");
  EXPECT_TRUE(h2.tls);
  EXPECT_EQ(h2.port, 8443);
  const auto r = parse_target("rediss://localhost:6380");
  EXPECT_EQ(r.scheme, "redis");
  EXPECT_TRUE(r.tls);
  const auto g = parse_target("ringrpcs://localhost:7443/echo");
  EXPECT_EQ(g.scheme, "ringrpc");
  EXPECT_TRUE(g.tls);
  EXPECT_EQ(g.path, "echo");
  EXPECT_EQ(parse_target("grpcs://h:1/p.S/M").scheme, "grpc");
  EXPECT_FALSE(parse_target("http://h/").tls);
  EXPECT_THROW(parse_target("ringrpcs://h/echo"), std::invalid_argument);  // no default port
}

TEST(tls_target, TlsUrlOfAPlaintextTarget) {
  EXPECT_EQ(ringrpc::load::tls_url_of(parse_target("http://h:81/a")), "https://h:81/a");
  EXPECT_EQ(ringrpc::load::tls_url_of(parse_target("redis://h:6379")), "rediss://h:6379");
  EXPECT_EQ(ringrpc::load::tls_url_of(parse_target("h2c://h:80/")), "h2://h:80/");
  EXPECT_EQ(ringrpc::load::tls_url_of(parse_target("ringrpc://h:7/echo")), "ringrpcs://h:7/echo");
}

TEST(tls_target, ATlsRecordInReplyToPlaintextSuggestsTheTlsScheme) {
  const unsigned char alert[] = {0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x46};
  const auto line = ringrpc::load::diagnose_reply(parse_target("http://h:8443/ok"),
                                                  {reinterpret_cast<const std::byte*>(alert), sizeof alert}, "");
  EXPECT_NE(line.find("TLS server; try https://h:8443/ok"), std::string::npos) << line;
}

TEST(tls_target, AHangUpOnPlaintextMentionsTlsButNotForTlsTargets) {
  EXPECT_NE(ringrpc::load::diagnose_close(parse_target("redis://h:6380")).find("try rediss://h:6380"),
            std::string::npos);
  EXPECT_EQ(ringrpc::load::diagnose_close(parse_target("rediss://h:6380")).find("try rediss"), std::string::npos);
  const auto p = ringrpc::load::diagnose_plaintext_reply(parse_target("https://h:80/"));
  EXPECT_NE(p.find("does not speak TLS"), std::string::npos) << p;
  EXPECT_NE(p.find("try http://h:80/"), std::string::npos) << p;
}

}  // namespace
