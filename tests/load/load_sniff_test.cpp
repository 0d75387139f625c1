// The protocol diagnosis: what a first reply that did not parse looks like, and the line shown.

#include "sniff.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using namespace ringrpc::load;

std::vector<std::byte> bytes_of(std::string_view s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

target target_of(const char* scheme, const char* host = "127.0.0.1", std::uint16_t port = 7000) {
  // Constructed, not assigned: GCC 12 -O3 warns falsely (-Wrestrict) on assigning a literal.
  return target{std::string(scheme), std::string(host), port, std::string()};
}

TEST(sniff_protocol, RecognisesWhatServersAnswerToAForeignRequest) {
  EXPECT_EQ(sniff_protocol(bytes_of("HTTP/1.1 400 Bad Request\r\nServer: nginx\r\n")), "http");
  EXPECT_EQ(sniff_protocol(bytes_of("HTTP/1.0 200 OK\r\n")), "http");
  EXPECT_EQ(sniff_protocol(bytes_of("-ERR unknown command '\x05'\r\n")), "redis");
  EXPECT_EQ(sniff_protocol(bytes_of("+PONG\r\n")), "redis");
  EXPECT_EQ(sniff_protocol(bytes_of("SSH-2.0-OpenSSH_9.2\r\n")), "ssh");
  EXPECT_EQ(sniff_protocol(bytes_of(std::string("\x15\x03\x03\x00\x02\x02\x32", 7))), "tls");
  // An HTTP/2 SETTINGS frame on stream 0 (what a gRPC server sends first).
  EXPECT_EQ(sniff_protocol(bytes_of(std::string("\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x64", 15))),
            "h2");
  // A ringrpc frame: u32 length 24, root offset 12.
  EXPECT_EQ(sniff_protocol(bytes_of(std::string("\x18\x00\x00\x00\x0c\x00\x00\x00", 8) + std::string(24, '\0'))),
            "ringrpc");
  EXPECT_EQ(sniff_protocol(bytes_of("hello there")), "");
  EXPECT_EQ(sniff_protocol({}), "");
}

TEST(diagnose_reply, NamesWhatItLooksLikeAndTheUrlToTry) {
  auto line = diagnose_reply(target_of("ringrpc", "127.0.0.1", 8080), bytes_of("HTTP/1.1 400 Bad Request\r\n"), "x");
  EXPECT_NE(line.find("looks like an HTTP/1.1 server; try http://127.0.0.1:8080/"), std::string::npos) << line;
  line = diagnose_reply(target_of("http", "::1", 6379), bytes_of("-ERR Protocol error\r\n"), "x");
  EXPECT_NE(line.find("a Redis server; try redis://[::1]:6379"), std::string::npos) << line;
  line = diagnose_reply(target_of("redis"), bytes_of(std::string("\x18\x00\x00\x00\x0c\x00\x00\x00", 8)), "x");
  EXPECT_NE(line.find("try ringrpc://127.0.0.1:7000/METHOD"), std::string::npos) << line;
  // Nothing recognised: the codec's complaint and the first bytes, escaped.
  line = diagnose_reply(target_of("redis"), bytes_of(std::string("\x01zz\r\n", 5)), "bad type byte");
  EXPECT_NE(line.find("is not Redis (RESP) (bad type byte)"), std::string::npos) << line;
  EXPECT_NE(line.find("\"\\x01zz\\r\\n\""), std::string::npos) << line;
}

TEST(diagnose_silence, SaysHowLongAndWhere) {
  const auto line = diagnose_silence(target_of("ringrpc"), 5, 2);
  EXPECT_NE(line.find("5 s"), std::string::npos) << line;
  EXPECT_NE(line.find("2 connection(s) to 127.0.0.1:7000"), std::string::npos) << line;
  EXPECT_NE(line.find("--timeout"), std::string::npos) << line;
}

}  // namespace

namespace {

TEST(diagnose_close, NamesTheServerAndTheProtocol) {
  ringrpc::load::target t;
  t.scheme = "http";
  t.host = "10.0.0.1";
  t.port = 81;
  const auto line = ringrpc::load::diagnose_close(t);
  EXPECT_NE(line.find("10.0.0.1:81 closed the connection"), std::string::npos) << line;
  EXPECT_NE(line.find("HTTP/1.1"), std::string::npos) << line;
}

}  // namespace

namespace {

// Found by load_reply_fuzz: the HTTP parser's complaint quotes the server's bytes, which must
// not break the diagnosis into several lines.
TEST(diagnose_reply, EscapesTheParsersComplaintToo) {
  const auto t = target_of("http", "h", 1);
  const std::string complaint("unsupported Transfer-Encoding 'x\n\r\0y'", 37);
  const auto line = ringrpc::load::diagnose_reply(t, {}, complaint);
  EXPECT_EQ(line.find_first_of(std::string("\n\r\0", 3)), std::string::npos) << line;
  EXPECT_NE(line.find("x\\n\\r\\x00y"), std::string::npos) << line;
}

}  // namespace
