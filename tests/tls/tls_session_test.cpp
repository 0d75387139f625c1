// The TLS record sessions alone, with no socket: a client and a server session of
// ringrpc-tls pass bytes through vectors, so the handshake, records larger than one TLS record,
// refusals and garbage are checked byte for byte. Certificates are made by the openssl CLI
// into a temporary directory for this run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ringrpc/tls.hpp"
#include "tls/test_certs.hpp"

namespace {

using ringrpc::record_session;
using ringrpc::test::files;
using bytes = std::vector<std::byte>;

// Moves bytes both ways until neither side has anything to say.
struct pair {
  std::unique_ptr<record_session> client, server;
  bytes client_plain, server_plain;
  record_session::outcome client_rc = record_session::outcome::ok, server_rc = record_session::outcome::ok;

  void pump(bytes to_server) {
    bytes to_client;
    for (int i = 0; i < 20 && (!to_server.empty() || !to_client.empty()); ++i) {
      if (!to_server.empty()) {
        bytes in;
        in.swap(to_server);
        server_rc = server->receive(in, server_plain, to_client);
        if (server_rc == record_session::outcome::failed) {
          // The alert still reaches the client.
        }
      }
      if (!to_client.empty()) {
        bytes in;
        in.swap(to_client);
        client_rc = client->receive(in, client_plain, to_server);
      }
    }
  }
  void handshake() {
    bytes hello;
    ASSERT_EQ(client->start(hello), record_session::outcome::ok);
    ASSERT_FALSE(hello.empty());
    pump(std::move(hello));
  }
};

pair make_pair(const ringrpc::tls_options& so, const ringrpc::tls_client_options& co) {
  pair p;
  auto s = ringrpc::tls_context::server(so);
  auto c = ringrpc::tls_context::client(co);
  p.server = s->new_server_session();
  p.client = c->new_client_session("localhost");
  return p;
}

ringrpc::tls_options server_opts() {
  ringrpc::tls_options o;
  o.cert_file = files()("server.pem");
  o.key_file = files()("server.key");
  return o;
}

ringrpc::tls_client_options client_opts() {
  ringrpc::tls_client_options o;
  o.ca_file = files()("ca.pem");
  return o;
}

bytes random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  bytes b(n);
  for (auto& x : b) x = static_cast<std::byte>(rng());
  return b;
}

TEST(TlsSession, HandshakeThenBytesBothWaysAcrossManyRecords) {
  pair p = make_pair(server_opts(), client_opts());
  p.handshake();
  ASSERT_TRUE(p.server->established()) << p.server->error();
  ASSERT_TRUE(p.client->established()) << p.client->error();
  EXPECT_NE(p.server->describe().find("TLSv1.3"), std::string::npos) << p.server->describe();
  for (std::size_t size : {1u, 16384u, 16385u, 100'000u, 1u << 20}) {
    const bytes msg = random_bytes(size, static_cast<unsigned>(size));
    bytes wire;
    ASSERT_EQ(p.client->seal(msg, wire), record_session::outcome::ok);
    EXPECT_GT(wire.size(), msg.size());  // records add headers and tags
    // Delivered in odd slices, as a receive buffer would cut them.
    p.server_plain.clear();
    bytes out;
    for (std::size_t at = 0; at < wire.size(); at += 1000) {
      const std::size_t n = std::min<std::size_t>(1000, wire.size() - at);
      ASSERT_EQ(p.server->receive({wire.data() + at, n}, p.server_plain, out), record_session::outcome::ok);
    }
    EXPECT_EQ(p.server_plain, msg) << size;
    bytes back;
    ASSERT_EQ(p.server->seal(msg, back), record_session::outcome::ok);
    p.client_plain.clear();
    ASSERT_EQ(p.client->receive(back, p.client_plain, out), record_session::outcome::ok);
    EXPECT_EQ(p.client_plain, msg) << size;
  }
}

TEST(TlsSession, GarbageFailsTheServerSessionWithAReason) {
  auto s = ringrpc::tls_context::server(server_opts());
  auto session = s->new_server_session();
  const std::string junk = "GET / HTTP/1.1\r\nHost: example\r\n\r\n";
  bytes plain, out;
  const auto rc = session->receive({reinterpret_cast<const std::byte*>(junk.data()), junk.size()}, plain, out);
  EXPECT_EQ(rc, record_session::outcome::failed);
  EXPECT_FALSE(session->error().empty());
  EXPECT_TRUE(plain.empty());
  EXPECT_FALSE(session->established());
}

// The admin port's sessions: one server context, two ALPN answers.
TEST(TlsSession, HttpSessionsSelectHttp11AndRingrpcSessionsRingrpc) {
  auto s = ringrpc::tls_context::server(server_opts());
  auto offer = [&](std::vector<std::string> alpn, bool http) {
    ringrpc::tls_client_options co = client_opts();
    co.alpn = std::move(alpn);
    auto c = ringrpc::tls_context::client(co);
    pair p;
    p.server = http ? s->new_http_server_session() : s->new_server_session();
    p.client = c->new_client_session("localhost");
    p.handshake();
    return p.server->established() && p.client->established();
  };
  EXPECT_TRUE(offer({"h2", "http/1.1"}, true));   // what curl and browsers offer
  EXPECT_FALSE(offer({"h2"}, true));              // nothing it speaks
  EXPECT_FALSE(offer({"ringrpc/1"}, true));
  EXPECT_FALSE(offer({"h2", "http/1.1"}, false));  // the RPC listener still wants ringrpc/1
  EXPECT_TRUE(offer({"ringrpc/1"}, false));
}

TEST(TlsSession, MutualTlsRefusesMissingAndForeignCertificates) {
  auto so = server_opts();
  so.ca_file = files()("ca.pem");
  so.require_client_cert = true;
  {
    pair p = make_pair(so, client_opts());
    p.handshake();
    EXPECT_FALSE(p.server->established());
    EXPECT_EQ(p.server_rc, record_session::outcome::failed);
    EXPECT_NE(p.server->error().find("certificate"), std::string::npos) << p.server->error();
  }
  {
    auto co = client_opts();
    co.cert_file = files()("stranger.pem");
    co.key_file = files()("stranger.key");
    pair p = make_pair(so, co);
    p.handshake();
    EXPECT_FALSE(p.server->established());
    EXPECT_EQ(p.server_rc, record_session::outcome::failed);
  }
  {
    auto co = client_opts();
    co.cert_file = files()("client.pem");
    co.key_file = files()("client.key");
    pair p = make_pair(so, co);
    p.handshake();
    ASSERT_TRUE(p.server->established()) << p.server->error();
    const auto id = p.server->peer_identity();
    EXPECT_EQ(id.subject, "CN=client-1");
    EXPECT_EQ(id.uris, std::vector<std::string>{"spiffe://unit/client-1"});
    EXPECT_EQ(id.dns_names, std::vector<std::string>{"client-1.unit"});
    EXPECT_EQ(id.ips, std::vector<std::string>{"10.0.0.7"});
  }
}

TEST(TlsSession, ClientRefusesAServerItCannotVerify) {
  auto co = client_opts();
  co.ca_file = files()("other.pem");
  pair p = make_pair(server_opts(), co);
  p.handshake();
  EXPECT_FALSE(p.client->established());
  EXPECT_EQ(p.client_rc, record_session::outcome::failed);
  EXPECT_NE(p.client->error().find("certificate"), std::string::npos) << p.client->error();
  EXPECT_TRUE(p.client->peer_unverified());
  // Insecure skips the check (and says nothing of who the server is).
  co.insecure = true;
  pair q = make_pair(server_opts(), co);
  q.handshake();
  EXPECT_TRUE(q.client->established()) << q.client->error();
  EXPECT_FALSE(q.client->peer_unverified());
}

// A handshake that fails for another reason is not a verification failure, even when the
// client would not have trusted the server either.
TEST(TlsSession, OtherHandshakeFailuresAreNotVerificationFailures) {
  auto co = client_opts();
  co.ca_file = files()("other.pem");
  auto ctx = ringrpc::tls_context::client(co);
  auto session = ctx->new_client_session("localhost");
  bytes out, plain;
  ASSERT_EQ(session->start(out), record_session::outcome::ok);
  const std::string junk = "HTTP/1.1 400 Bad Request\r\n\r\n";
  EXPECT_EQ(session->receive({reinterpret_cast<const std::byte*>(junk.data()), junk.size()}, plain, out),
            record_session::outcome::failed);
  EXPECT_FALSE(session->error().empty());
  EXPECT_FALSE(session->peer_unverified()) << session->error();
}

TEST(TlsSession, BadFilesAreClearErrors) {
  auto o = server_opts();
  o.key_file = files()("client.key");
  try {
    ringrpc::tls_context::server(o);
    FAIL() << "mismatched key accepted";
  } catch (const ringrpc::tls_error& e) {
    EXPECT_NE(std::string(e.what()).find("does not match"), std::string::npos) << e.what();
  }
  o = server_opts();
  o.cert_file = files()("nope.pem");
  EXPECT_THROW(ringrpc::tls_context::server(o), ringrpc::tls_error);
  o = server_opts();
  o.min_version = "1.1";
  EXPECT_THROW(ringrpc::tls_context::server(o), ringrpc::tls_error);
  o = server_opts();
  o.require_client_cert = true;  // without a CA
  EXPECT_THROW(ringrpc::tls_context::server(o), ringrpc::tls_error);
}

TEST(TlsSession, IdentityOfDerIgnoresNonCertificates) {
  EXPECT_TRUE(ringrpc::identity_of_der_certificate("").empty());
  EXPECT_TRUE(ringrpc::identity_of_der_certificate("\x30\x82\x01").empty());
}

// Reload swaps the context while other threads make sessions from it (concurrency suite).
TEST(TlsSession, ReloadWhileThreadsHandshake) {
  auto s = ringrpc::tls_context::server(server_opts());
  auto c = ringrpc::tls_context::client(client_opts());
  std::atomic<bool> stop{false};
  std::atomic<int> done{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < 2; ++t) {
    workers.emplace_back([&] {
      while (!stop.load()) {
        pair p;
        p.server = s->new_server_session();
        p.client = c->new_client_session("localhost");
        p.handshake();
        if (p.server->established() && p.client->established()) done.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < 20; ++i) s->reload();
  while (done.load() < 20) std::this_thread::yield();
  stop.store(true);
  for (auto& w : workers) w.join();
  EXPECT_GE(done.load(), 20);
}

}  // namespace
