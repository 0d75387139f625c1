// ringrpc::client over TLS against a loopback ringrpc::server with a TLS listener (both
// ringrpc-tls): byte-exact calls of many sizes, pipelined calls, calls made before the
// handshake finished, mutual TLS, verification failures, and the plaintext port beside it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <chrono>
#include <thread>
#include <mutex>
#include <optional>
#include <span>
#include <random>
#include <string>
#include <vector>

#include "ringrpc/authorizer.hpp"
#include "ringrpc/call_context.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/client_stream.hpp"
#include "ringrpc/endpoint.hpp"
#include "ringrpc/event_bus.hpp"
#include "ringrpc/server.hpp"
#include "ringrpc/tls.hpp"
#include "tls/test_certs.hpp"

namespace {

using ringrpc::test::files;

std::vector<std::byte> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> b(n);
  for (auto& x : b) x = static_cast<std::byte>(rng());
  return b;
}

struct tls_server {
  explicit tls_server(bool mutual = false) {
    ringrpc::server_options o;
    o.readers = 2;
    o.handlers = 2;
    o.tls = ringrpc::tls_context::server(ringrpc::test::server_tls(mutual));
    srv.emplace(o);
    ringrpc::add_builtin_methods(*srv);
    srv->start();
  }
  std::optional<ringrpc::server> srv;
};

ringrpc::client_options client_tls(ringrpc::tls_client_options t) {
  ringrpc::client_options o;
  o.tls = ringrpc::tls_context::client(t);
  return o;
}

ringrpc::tls_client_options trusting() {
  ringrpc::tls_client_options t;
  t.ca_file = files()("ca.pem");
  return t;
}

TEST(TlsClient, CallsOfEverySizeAreByteExact) {
  tls_server s;
  EXPECT_EQ(s.srv->tls_record_layer(), "userspace OpenSSL");
  auto c = ringrpc::client::connect("127.0.0.1", s.srv->tls_port(), client_tls(trusting()));
  for (std::size_t size : {0u, 1u, 100u, 16383u, 16384u, 16385u, 100'000u, 1u << 20, 3u << 20}) {
    const auto payload = random_bytes(size, static_cast<unsigned>(size));
    const auto r = c.call("echo", payload);
    ASSERT_TRUE(r.ok()) << size << ": " << r.message;
    EXPECT_EQ(r.payload, payload) << size;
  }
  const auto st = s.srv->stats();
  EXPECT_EQ(st[ringrpc::server_counter::tls_handshakes], 1u);
  EXPECT_EQ(st[ringrpc::server_counter::tls_handshakes_in_progress], 0u);
  // Closing and stopping leave nothing behind: no handshake slot, no connection.
  c.close();
  s.srv->stop();
  EXPECT_EQ(s.srv->stats()[ringrpc::server_counter::connections_open], 0u);
  EXPECT_EQ(s.srv->stats()[ringrpc::server_counter::tls_handshakes_in_progress], 0u);
}

TEST(TlsClient, PipelinedCallsMadeBeforeTheHandshakeFinished) {
  tls_server s;
  auto c = ringrpc::client::connect("127.0.0.1", s.srv->tls_port(), client_tls(trusting()));
  // Posted at once: they wait in the queue for the handshake, then go sealed together.
  std::vector<std::future<ringrpc::call_result>> futures;
  std::vector<std::vector<std::byte>> sent;
  for (unsigned i = 0; i < 300; ++i) {
    sent.push_back(random_bytes(i % 7 == 0 ? 40'000 : 1 + i % 300, i));
    futures.push_back(c.call_future("echo", sent.back()));
  }
  for (unsigned i = 0; i < futures.size(); ++i) {
    const auto r = futures[i].get();
    ASSERT_TRUE(r.ok()) << i << ": " << r.message;
    EXPECT_EQ(r.payload, sent[i]) << i;
  }
}

TEST(TlsClient, PlaintextPortStillPlaintext) {
  tls_server s;
  auto plain = ringrpc::client::connect("127.0.0.1", s.srv->port());
  EXPECT_EQ(plain.call("echo", std::string_view("plain")).payload_string(), "plain");
  // A TLS client on the plaintext port fails cleanly instead of hanging.
  auto wrong = ringrpc::client::connect("127.0.0.1", s.srv->port(), client_tls(trusting()));
  ringrpc::call_options o;
  o.timeout = std::chrono::seconds(5);
  const auto r = wrong.call("echo", std::string_view("x"), o);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error, ringrpc::call_error::timeout) << r.message;
}

TEST(TlsClient, UnverifiableServerFailsTheCallsInsecureSkipsTheCheck) {
  tls_server s;
  auto t = trusting();
  t.ca_file = files()("other.pem");
  auto c = ringrpc::client::connect("127.0.0.1", s.srv->tls_port(), client_tls(t));
  const auto r = c.call("echo", std::string_view("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error, ringrpc::call_error::connection_closed);
  EXPECT_NE(r.message.find("certificate"), std::string::npos) << r.message;
  // Wrong name: the certificate names localhost and 127.0.0.1 only.
  t = trusting();
  t.server_name = "elsewhere.example";
  auto named = ringrpc::client::connect("127.0.0.1", s.srv->tls_port(), client_tls(t));
  EXPECT_FALSE(named.call("echo", std::string_view("x")).ok());
  t = {};
  t.insecure = true;
  auto insecure = ringrpc::client::connect("127.0.0.1", s.srv->tls_port(), client_tls(t));
  EXPECT_EQ(insecure.call("echo", std::string_view("ok")).payload_string(), "ok");
}

// The handshake may fail before the first call reaches the client's loop (connect() returns
// at once; a busy machine can hold the caller back until the server's certificate has been
// refused): the calls and streams made after that still say why, not only "closed".
TEST(TlsClient, CallsMadeAfterTheHandshakeFailedSayWhy) {
  tls_server s;
  auto t = trusting();
  t.ca_file = files()("other.pem");
  auto c = ringrpc::client::connect("127.0.0.1", s.srv->tls_port(), client_tls(t));
  // No deadline: the wait ends when the handshake has failed, however long that takes.
  while (c.connected()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  for (int i = 0; i < 2; ++i) {
    const auto r = c.call("echo", std::string_view("x"));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error, ringrpc::call_error::connection_closed);
    EXPECT_NE(r.message.find("certificate verify failed"), std::string::npos) << r.message;
  }
  ringrpc::client_stream st = c.open_stream("echo_stream", ringrpc::stream_kind::bidi);
  const auto r = st.finish();
  EXPECT_EQ(r.error, ringrpc::call_error::connection_closed);
  EXPECT_NE(r.message.find("certificate verify failed"), std::string::npos) << r.message;
}

TEST(TlsClient, MutualTls) {
  tls_server s(true);
  {
    auto c = ringrpc::client::connect("127.0.0.1", s.srv->tls_port(), client_tls(trusting()));
    const auto r = c.call("echo", std::string_view("x"));
    EXPECT_FALSE(r.ok()) << "served without a client certificate";
  }
  {
    auto t = trusting();
    t.cert_file = files()("stranger.pem");
    t.key_file = files()("stranger.key");
    auto c = ringrpc::client::connect("127.0.0.1", s.srv->tls_port(), client_tls(t));
    EXPECT_FALSE(c.call("echo", std::string_view("x")).ok()) << "served a certificate of another CA";
  }
  auto t = trusting();
  t.cert_file = files()("client.pem");
  t.key_file = files()("client.key");
  auto c = ringrpc::client::connect("127.0.0.1", s.srv->tls_port(), client_tls(t));
  EXPECT_EQ(c.call("echo", std::string_view("trusted")).payload_string(), "trusted");
  const auto st = s.srv->stats();
  EXPECT_GE(st[ringrpc::server_counter::tls_handshake_failures], 2u);
  EXPECT_EQ(st[ringrpc::server_counter::tls_handshakes], 1u);
}

// The verified client certificate becomes the caller's identity: the handler sees it in
// call_context::peer(), and the server's authorizer decides on it before the call runs.
TEST(TlsClient, VerifiedCertificateIsTheIdentityTheAuthorizerDecidesOn) {
  ringrpc::server_options o;
  o.readers = 1;
  o.handlers = 1;
  o.tls = ringrpc::tls_context::server(ringrpc::test::server_tls(true));
  ringrpc::server srv(o);
  srv.add_method("whoami", [](ringrpc::call_context& ctx) {
    const ringrpc::peer_identity* p = ctx.peer();
    if (p == nullptr) return ctx.fail(ringrpc::status::internal, "no identity");
    std::string s = p->subject;
    for (const auto& u : p->uris) s.append(" uri=").append(u);
    for (const auto& d : p->dns_names) s.append(" dns=").append(d);
    for (const auto& i : p->ip_addresses) s.append(" ip=").append(i);
    s.append(p->certificate_verified ? " verified" : " unverified");
    ctx.reply(s);
  });
  srv.add_method("admin.reset", [](ringrpc::call_context& ctx) { ctx.reply(std::string_view("reset")); });
  srv.set_authorizer(ringrpc::make_authorizer([](const ringrpc::authorization_request& r) {
    if (r.peer == nullptr || !r.peer->certificate_verified) return ringrpc::authorization::unauthenticated;
    const bool is_admin = std::find(r.peer->uris.begin(), r.peer->uris.end(), "spiffe://unit/admin") != r.peer->uris.end();
    if (r.method.starts_with("admin.") && !is_admin) return ringrpc::authorization::permission_denied;
    return ringrpc::authorization::allow;
  }));
  srv.start();

  auto ct = trusting();
  ct.cert_file = files()("client.pem");
  ct.key_file = files()("client.key");
  auto c = ringrpc::client::connect("127.0.0.1", srv.tls_port(), client_tls(ct));
  const auto who = c.call("whoami", std::string_view(""));
  ASSERT_TRUE(who.ok()) << who.message;
  EXPECT_EQ(who.payload_string(), "CN=client-1 uri=spiffe://unit/client-1 dns=client-1.unit ip=10.0.0.7 verified");
  const auto denied = c.call("admin.reset", std::string_view(""));
  EXPECT_EQ(denied.code, ringrpc::status::permission_denied) << denied.message;
  EXPECT_EQ(srv.stats()[ringrpc::server_counter::calls_permission_denied], 1u);

  // The plaintext port beside it: no certificate, so the same authorizer says unauthenticated.
  auto plain = ringrpc::client::connect("127.0.0.1", srv.port());
  EXPECT_EQ(plain.call("whoami", std::string_view("")).code, ringrpc::status::unauthenticated);
  EXPECT_EQ(srv.stats()[ringrpc::server_counter::calls_unauthenticated], 1u);
}

// Connection events of a TLS connection come once its handshake is done: the endpoint's
// on_connected and the bus's connection_opened both know the client certificate's identity; a
// connection whose handshake fails is counted as a failure and announced to nobody.
TEST(TlsClient, ConnectionEventsComeAfterTheHandshakeWithTheIdentity) {
  struct recorder : ringrpc::endpoint, ringrpc::event_listener {
    void receive_and_reply(ringrpc::call_context& ctx) override { ctx.reply(std::string_view("ok")); }
    void on_connected(const ringrpc::peer_info& p) override {
      std::lock_guard lock(mu);
      seen.push_back(std::string("connected ").append(p.identity ? p.identity->subject : "(none)"));
    }
    void on_disconnected(const ringrpc::peer_info& p) override {
      std::lock_guard lock(mu);
      seen.push_back(std::string("disconnected ").append(p.identity ? p.identity->subject : "(none)"));
    }
    void on_event(const ringrpc::event& e) override {
      std::lock_guard lock(mu);
      if (e.kind == ringrpc::event_kind::connection_opened) seen.push_back(std::string("opened ").append(e.detail));
      if (e.kind == ringrpc::event_kind::connection_closed) seen.push_back("closed");
    }
    std::vector<std::string> snapshot() {
      std::lock_guard lock(mu);
      return seen;
    }
    std::mutex mu;
    std::vector<std::string> seen;
  };
  tls_server s(true);
  auto rec = std::make_shared<recorder>();
  s.srv->register_endpoint("rec", rec);
  ringrpc::event_kind_set kinds;
  kinds.add(ringrpc::event_kind::connection_opened).add(ringrpc::event_kind::connection_closed);
  s.srv->events().subscribe("log", rec, kinds);
  auto wait_for = [&](std::size_t n) {
    for (int i = 0; i < 500 && rec->snapshot().size() < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return rec->snapshot();
  };
  {
    // No client certificate: the handshake fails, nobody hears of the connection.
    auto c = ringrpc::client::connect("127.0.0.1", s.srv->tls_port(), client_tls(trusting()));
    EXPECT_FALSE(c.call("rec", std::string_view("x")).ok());
  }
  for (int i = 0; i < 200 && s.srv->stats()[ringrpc::server_counter::tls_handshake_failures] < 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(s.srv->stats()[ringrpc::server_counter::tls_handshake_failures], 1u);
  {
    auto t = trusting();
    t.cert_file = files()("client.pem");
    t.key_file = files()("client.key");
    auto c = ringrpc::client::connect("127.0.0.1", s.srv->tls_port(), client_tls(t));
    EXPECT_EQ(c.call("rec", std::string_view("x")).payload_string(), "ok");
  }
  auto seen = wait_for(4);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"closed", "connected CN=client-1", "disconnected CN=client-1",
                                            "opened CN=client-1"}));
}

TEST(TlsClient, ManyConnectionsAtOnce) {
  tls_server s;
  auto runtime = ringrpc::client_runtime::create();
  std::vector<ringrpc::client> clients;
  for (int i = 0; i < 20; ++i) {
    clients.push_back(ringrpc::client::connect("127.0.0.1", s.srv->tls_port(), client_tls(trusting()), runtime));
  }
  std::vector<std::future<ringrpc::call_result>> f;
  const std::string hi = "hi";
  const std::span<const std::byte> payload(reinterpret_cast<const std::byte*>(hi.data()), hi.size());
  for (auto& c : clients) f.push_back(c.call_future("echo", payload));
  for (auto& x : f) EXPECT_EQ(x.get().payload_string(), "hi");
  EXPECT_EQ(s.srv->stats()[ringrpc::server_counter::tls_handshakes], 20u);
}

}  // namespace
