// The client side of bench/stream_memory.sh: server memory per idle open stream.
//
//   stream_memory PORT CONNECTIONS STREAMS_PER_CONNECTION [CYCLES]
//
// Connects CONNECTIONS clients (one connection each, all on one client runtime) to a
// ringrpc-server on 127.0.0.1:PORT and makes one unary `echo` call on each, so the baseline is
// connections that have read and answered a frame. Then opens STREAMS_PER_CONNECTION bidi
// `echo_stream` streams on each connection, each doing one round trip ("x" written and read
// back: the server has really opened it and run its handler), and holds them idle. Then
// half-closes and finishes every stream (the server's end, status ok). CYCLES times (default 1)
// streams and end, so that a second cycle shows whether the first one's memory is reused (kept
// by the allocator) or lost. Then it closes the connections.
//
// Between the steps it prints one line, "phase NAME", and waits for a line on stdin, so that
// the script reads the server's memory while nothing moves. Exits 1 (naming the stream) when
// an open, a round trip or an end fails: a memory figure over streams that did not open would
// be wrong.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "ringrpc/client.hpp"
#include "ringrpc/client_stream.hpp"

namespace {

using namespace std::chrono_literals;

void fail(const std::string& what) {
  std::fprintf(stderr, "stream_memory: %s\n", what.c_str());
  std::exit(1);
}

// Tells the script where we are and waits for its go-ahead (a line; end of input ends us).
void phase(const char* name) {
  std::printf("phase %s\n", name);
  std::fflush(stdout);
  std::string line;
  if (!std::getline(std::cin, line)) std::exit(0);
}

std::vector<ringrpc::client> connect_all(unsigned port, unsigned connections) {
  auto runtime = ringrpc::client_runtime::create();
  std::vector<ringrpc::client> clients;
  clients.reserve(connections);
  for (unsigned i = 0; i < connections; ++i) {
    clients.push_back(ringrpc::client::connect("127.0.0.1", static_cast<std::uint16_t>(port), {}, runtime));
    const ringrpc::call_result r = clients.back().call("echo", std::string_view("x"));
    if (!r.ok()) fail("echo on connection " + std::to_string(i) + ": " + r.message);
  }
  return clients;
}

// One stream, opened and echoed once: "x" out, "x" back.
ringrpc::client_stream open_one(ringrpc::client& c, unsigned conn, unsigned n) {
  const std::string where = "stream " + std::to_string(n) + " of connection " + std::to_string(conn);
  ringrpc::client_stream s = c.open_stream("echo_stream", ringrpc::stream_kind::bidi);
  if (s.write("x") != ringrpc::write_result::ok) {
    const ringrpc::call_result end = s.finish(1s);
    fail(where + ": write refused: " + end.message);
  }
  const auto back = s.read(10s);
  if (!back || back->size() != 1 || back->front() != std::byte{'x'}) {
    const ringrpc::call_result end = s.finish(1s);
    fail(where + ": no echo: " + (end.message.empty() ? "timed out" : end.message));
  }
  return s;
}

void end_all(std::vector<ringrpc::client_stream>& streams) {
  for (auto& s : streams) s.half_close();
  for (std::size_t i = 0; i < streams.size(); ++i) {
    const ringrpc::call_result end = streams[i].finish(10s);
    if (!end.ok()) fail("stream " + std::to_string(i) + " ended badly: " + end.message);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: stream_memory PORT CONNECTIONS STREAMS_PER_CONNECTION [CYCLES]\n");
    return 2;
  }
  const unsigned port = static_cast<unsigned>(std::strtoul(argv[1], nullptr, 10));
  const unsigned connections = static_cast<unsigned>(std::strtoul(argv[2], nullptr, 10));
  const unsigned per_connection = static_cast<unsigned>(std::strtoul(argv[3], nullptr, 10));
  const unsigned cycles = argc == 5 ? static_cast<unsigned>(std::strtoul(argv[4], nullptr, 10)) : 1;

  std::vector<ringrpc::client> clients = connect_all(port, connections);
  phase("connections");

  std::vector<ringrpc::client_stream> streams;
  streams.reserve(static_cast<std::size_t>(connections) * per_connection);
  for (unsigned cycle = 0; cycle < cycles; ++cycle) {
    for (unsigned c = 0; c < connections; ++c) {
      for (unsigned n = 0; n < per_connection; ++n) streams.push_back(open_one(clients[c], c, n));
    }
    phase("streams");
    end_all(streams);
    streams.clear();
    phase("ended");
  }

  for (auto& c : clients) c.close();
  clients.clear();
  phase("closed");
  return 0;
}
