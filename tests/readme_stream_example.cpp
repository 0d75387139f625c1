#include <cctype>
#include <cstdio>
#include <memory>
#include <string>

#include <ringrpc/client.hpp>
#include <ringrpc/client_stream.hpp>
#include <ringrpc/server.hpp>

// A bidi stream that answers each message in capitals, and ends when the client half-closes.
class shout final : public ringrpc::stream_handler {
 public:
  void on_message(ringrpc::server_stream& stream, std::span<const std::byte> message) override {
    std::string text(reinterpret_cast<const char*>(message.data()), message.size());
    for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    // write() never blocks: `would_block` once the client's credit is used up (this client
    // reads each answer before it writes again, so it never is); a handler that may outrun its
    // client keeps the message and writes it again in on_writable(), or pause_reading()s.
    stream.write(text);
  }
  void on_half_close(ringrpc::server_stream& stream) override { stream.finish(); }
};

int main() {
  ringrpc::server_options options;
  options.port = 0;
  ringrpc::server server(options);
  server.add_stream_method("shout", ringrpc::stream_kind::bidi,
                           [](ringrpc::server_stream&, std::span<const std::byte>) { return std::make_unique<shout>(); });
  server.start();

  auto client = ringrpc::client::connect("127.0.0.1", server.port());
  ringrpc::client_stream stream = client.open_stream("shout", ringrpc::stream_kind::bidi);
  for (const char* word : {"one", "two", "three"}) {
    stream.write_wait(std::string_view(word));  // waits for the server's credit if need be
    if (auto answer = stream.read()) {
      std::printf("%.*s\n", static_cast<int>(answer->size()), reinterpret_cast<const char*>(answer->data()));
    }
  }
  stream.half_close();
  const ringrpc::call_result end = stream.finish();  // the server's end: ok, or its status
  server.stop();
  return end.ok() ? 0 : 1;
}
