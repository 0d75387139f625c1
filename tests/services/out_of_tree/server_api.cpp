// Every declaration of ringrpc/server.hpp, in a program linked against libringrpc alone
// (pkg-config ringrpc, never ringrpc-ops): if one of them were defined in another library this
// would not link. A server on 127.0.0.1 answers calls, takes local messages, swaps its tokens
// and stops. Exit codes as hello.cpp.
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <system_error>
#include <thread>

#include <ringrpc/authorizer.hpp>
#include <ringrpc/client.hpp>
#include <ringrpc/event_bus.hpp>
#include <ringrpc/server.hpp>

namespace {

int failures = 0;

void expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "server_api: unexpected: %s\n", what);
    ++failures;
  }
}

// Counts the one-way messages it receives (server::post, server::post_to_all).
class inbox final : public ringrpc::endpoint {
 public:
  void receive(ringrpc::call_context&) override { received.fetch_add(1); }
  std::atomic<int> received{0};
};

// Remembers what the server told it (server::add_registration).
class noted_registration final : public ringrpc::registration {
 public:
  void on_started(std::uint16_t p) override { port = p; }
  void before_stop() noexcept override { asked_to_leave = true; }
  void on_stopped() noexcept override { stopped = true; }
  std::atomic<std::uint16_t> port{0};
  std::atomic<bool> asked_to_leave{false}, stopped{false};
};

ringrpc::call_result call_with(ringrpc::client& c, const char* method, const char* token) {
  ringrpc::call_options o;
  o.timeout = std::chrono::seconds(5);
  o.metadata.push_back({"authorization", std::string("Bearer ") + token});
  return c.call(method, std::string_view("ping"), o);
}

std::span<const std::byte> bytes(std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); }

void exercise() {
  ringrpc::server_options options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.readers = 1;
  options.handlers = 2;
  options.bearer_tokens = {{"token-one", "first", {}}};
  auto reg = std::make_shared<noted_registration>();
  auto messages = std::make_shared<inbox>();
  {
    ringrpc::server server(options);
    ringrpc::pool_options side;
    side.threads = 1;
    server.add_pool("side", side);
    server.set_authorizer(ringrpc::make_authorizer([](const ringrpc::authorization_request&) {
      return ringrpc::authorization::allow;
    }));
    ringrpc::endpoint_options on_side;
    on_side.pool = "side";
    server.register_endpoint("inbox", messages, on_side);
    server.add_method("greet", [](ringrpc::call_context& call) { call.reply(std::string("hello")); });
    ringrpc::add_builtin_methods(server);
    server.add_registration(reg);
    server.start();

    expect(server.port() != 0, "port() after start()");
    expect(reg->port.load() == server.port(), "registration::on_started got the bound port");
    expect(server.tls_port() == 0, "tls_port() without TLS");
    expect(server.tls_record_layer().empty(), "tls_record_layer() without TLS");
    expect(server.options().host == "127.0.0.1", "options()");

    auto client = ringrpc::client::connect("127.0.0.1", server.port());
    const ringrpc::call_result greeted = call_with(client, "greet", "token-one");
    expect(greeted.ok() && greeted.payload_string() == "hello", "greet with the first token");
    expect(call_with(client, "echo", "token-one").payload_string() == "ping", "the built-in echo");

    server.replace_bearer_tokens({{"token-two", "second", {}}});
    expect(call_with(client, "greet", "token-one").code == ringrpc::status::unauthenticated,
           "the first token refused after replace_bearer_tokens()");
    expect(call_with(client, "greet", "token-two").ok(), "the second token accepted");

    expect(server.post("inbox", bytes("one")), "post()");
    expect(server.post_to_all(bytes("all")) >= 1, "post_to_all()");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (messages->received.load() < 2 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    expect(messages->received.load() >= 2, "both messages received");
    expect(server.unregister_endpoint("inbox"), "unregister_endpoint()");

    const ringrpc::server_stats st = server.stats();
    expect(st[ringrpc::server_counter::calls_received] >= 4, "stats() counted the calls");
    bool side_seen = false;
    for (const auto& p : server.pool_stats_all()) side_seen = side_seen || p.name == "side";
    expect(side_seen, "pool_stats_all() lists the added pool");
    expect(server.events().stats("log").has_value(), "events() has the log queue");

    std::thread stopper([&server] { server.stop(); });
    expect(server.wait() == 0, "wait() returns 0 after stop() by another thread");
    stopper.join();
    expect(reg->asked_to_leave.load() && reg->stopped.load(), "the registration saw the stop");
  }  // ~server after stop(): nothing left to do
}

}  // namespace

int main() {
  try {
    exercise();
  } catch (const std::system_error& e) {
    std::fprintf(stderr, "server_api: %s\n", e.what());
    const int err = e.code().value();
    return err == ENOSYS || err == EPERM || err == EACCES ? 77 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "server_api: %s\n", e.what());
    return 1;
  }
  if (failures != 0) return 1;
  std::printf("server_api: every declaration of ringrpc/server.hpp linked from libringrpc and ran\n");
  return 0;
}
