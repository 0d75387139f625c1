// A gRPC session's own cost per unary call, with no socket and no other thread: what the server
// pays between the HTTP/2 bytes a client sent and the HTTP/2 bytes of its answers, beyond what
// a ringrpc frame call pays (src/grpc; docs/grpc.md, "Speed").
//
//   BM_UnaryCalls/depth   `depth` unary echo calls of a 66-byte message, as ringrpc-load sends
//                         them (nghttp2 as the client, the same headers): the session reads the
//                         client's bytes into Request frames, the frames are decoded and each is
//                         answered with an encoded Reply (the server's share of the frame hop),
//                         and the session seals the replies into HTTP/2. Only those steps are
//                         timed; the client's side (nghttp2 making requests, reading answers)
//                         runs between them, untimed.
//
//   BM_HpackRequestHeaders  one unary request's header block (6 fields, as the client above
//                         sends them, in its steady state: indexed fields) through nghttp2's
//                         HPACK decoder alone: the floor under an HTTP/2 layer of our own that
//                         keeps nghttp2 for HPACK (docs/grpc.md, "Speed").
//
// items/s counts calls; ns_per_call is the figure to compare (bench/grpc_unary.sh measures the
// whole server's CPU per call over real sockets).

#include <nghttp2/nghttp2.h>

#include <benchmark/benchmark.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "grpc/grpc_session.hpp"
#include "wire/frame_codec.hpp"

namespace {

using namespace ringrpc::detail;

struct host final : grpc::session_host {
  health check_health(std::string_view) noexcept override { return health::serving; }
  void note(grpc::session_event) noexcept override {}
  std::uint8_t method_kind(std::string_view) noexcept override { return 0; }
};

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "grpc_session_bench: %s\n", what);
  std::abort();
}

nghttp2_nv nv(std::string_view name, std::string_view value) noexcept {
  return {reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
          NGHTTP2_NV_FLAG_NONE};
}

// A unary request's header fields, as ringrpc-load's nghttp2 client sends them.
std::array<nghttp2_nv, 6> request_headers() {
  return {nv(":method", "POST"), nv(":scheme", "http"), nv(":path", "/echo/echo"), nv(":authority", "127.0.0.1:7000"),
          nv("content-type", "application/grpc"), nv("te", "trailers")};
}

// The client: nghttp2 making gRPC requests and reading the answers, as ringrpc-load does.
class client {
 public:
  client() {
    nghttp2_session_callbacks* cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_stream_close_callback(
        cb, [](nghttp2_session*, std::int32_t, std::uint32_t code, void* user) {
          auto& self = *static_cast<client*>(user);
          if (code != NGHTTP2_NO_ERROR) self.failed = true;
          ++self.closed;
          return 0;
        });
    nghttp2_session_client_new(&_ng, cb, this);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(_ng, NGHTTP2_FLAG_NONE, nullptr, 0);
    // EchoRequest { text = 64 x's }, behind gRPC's 5-byte prefix.
    _message = {std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{66}, std::byte{0x0a},
                std::byte{64}};
    _message.resize(5 + 66, std::byte{'x'});
  }
  ~client() { nghttp2_session_del(_ng); }
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  void request() {
    const auto h = request_headers();
    nghttp2_data_provider body{};
    body.source.ptr = this;
    body.read_callback = [](nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                            std::uint32_t* flags, nghttp2_data_source* source, void*) -> ssize_t {
      const auto& m = static_cast<client*>(source->ptr)->_message;
      if (length < m.size()) fail("no room for a 71-byte message");
      std::memcpy(buf, m.data(), m.size());
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      return static_cast<ssize_t>(m.size());
    };
    if (nghttp2_submit_request(_ng, nullptr, h.data(), h.size(), &body, nullptr) < 0) fail("submit_request");
  }
  void send(std::vector<std::byte>& out) {
    for (;;) {
      const std::uint8_t* p = nullptr;
      const ssize_t n = nghttp2_session_mem_send(_ng, &p);
      if (n < 0) fail("the client's mem_send");
      if (n == 0) return;
      const auto* b = reinterpret_cast<const std::byte*>(p);
      out.insert(out.end(), b, b + n);
    }
  }
  void receive(std::span<const std::byte> in) {
    if (nghttp2_session_mem_recv(_ng, reinterpret_cast<const std::uint8_t*>(in.data()), in.size()) < 0) fail("the client's mem_recv");
  }

  std::size_t closed = 0;
  bool failed = false;

 private:
  nghttp2_session* _ng = nullptr;
  std::vector<std::byte> _message;
};

// The server's side of the frame hop: each Request frame decoded, answered with a Reply.
// A frame is decoded where it lies when aligned, as the server's assembler hands it over, else
// from a copy (as the assembler copies a frame it has to).
void answer(std::span<const std::byte> frames, std::vector<std::byte>& replies, frame_encoder& encoder,
            std::vector<std::byte>& aligned, std::size_t& calls) {
  std::size_t at = 0;
  while (frames.size() - at >= frame_prefix_bytes) {
    const std::size_t whole = frame_prefix_bytes + read_frame_length(frames.data() + at);
    std::span<const std::byte> f = frames.subspan(at, whole);
    if (reinterpret_cast<std::uintptr_t>(f.data()) % 8 != 0) {
      aligned.assign(f.begin(), f.end());
      f = aligned;
    }
    frame_view v;
    if (decode_frame(f, v) != decode_outcome::ok) fail("a frame from the session does not decode");
    at += whole;
    if (v.kind != ringrpc::wire::Kind::Request) continue;
    frame_view r;
    r.call_id = v.call_id;
    r.kind = ringrpc::wire::Kind::Reply;
    r.payload = v.payload;
    const auto bytes = encoder.encode(r);
    replies.insert(replies.end(), bytes.begin(), bytes.end());
    ++calls;
  }
}

void BM_UnaryCalls(benchmark::State& state) {
  const auto depth = static_cast<std::size_t>(state.range(0));
  host h;
  grpc::session server(grpc::session_limits{}, h);
  client c;
  frame_encoder encoder;
  std::vector<std::byte> wire, plain, out, replies, aligned;
  // The connection's start: preface, both SETTINGS and their acknowledgements.
  out.clear();
  server.start(out);
  c.receive(out);
  c.send(wire);  // nghttp2's client starts with the preface itself
  out.clear();
  if (server.receive(wire, plain, out) != ringrpc::record_session::outcome::ok) fail("the session's start");
  c.receive(out);

  std::size_t calls = 0;
  for (auto _ : state) {
    wire.clear();
    for (std::size_t i = 0; i < depth; ++i) c.request();
    c.send(wire);
    const auto t0 = std::chrono::steady_clock::now();
    plain.clear();
    out.clear();
    replies.clear();
    if (server.receive(wire, plain, out) != ringrpc::record_session::outcome::ok) fail("the session's receive");
    answer(plain, replies, encoder, aligned, calls);
    if (server.seal(replies, out) != ringrpc::record_session::outcome::ok) fail("the session's seal");
    const auto t1 = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    c.receive(out);
  }
  if (c.failed || c.closed != calls) state.SkipWithError("a call did not end with its answer");
  state.SetItemsProcessed(static_cast<std::int64_t>(calls));
  // Timed seconds over calls, in ns: a rate of calls x 1e-9, inverted.
  state.counters["ns_per_call"] = benchmark::Counter(static_cast<double>(calls) * 1e-9,
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_UnaryCalls)->Arg(1)->Arg(16)->ArgName("depth")->UseManualTime();

// The floor under an HTTP/2 layer of our own that keeps nghttp2's HPACK decoder: one request's
// header block, in the steady state a client's encoder reaches after its first request (every
// field an index into the dynamic table), decoded field by field.
void BM_HpackRequestHeaders(benchmark::State& state) {
  nghttp2_hd_deflater* client = nullptr;
  nghttp2_hd_inflater* server = nullptr;
  if (nghttp2_hd_deflate_new(&client, 4096) != 0 || nghttp2_hd_inflate_new(&server) != 0) fail("HPACK set-up");
  const auto h = request_headers();
  std::vector<std::uint8_t> block(nghttp2_hd_deflate_bound(client, h.data(), h.size()));
  const auto decode_all = [&](std::span<const std::uint8_t> in) {
    std::size_t fields = 0;
    for (;;) {
      nghttp2_nv nv;
      int flags = 0;
      const ssize_t n = nghttp2_hd_inflate_hd2(server, &nv, &flags, in.data(), in.size(), 1);
      if (n < 0) fail("HPACK decoding");
      in = in.subspan(static_cast<std::size_t>(n));
      if (flags & NGHTTP2_HD_INFLATE_EMIT) ++fields;
      if (flags & NGHTTP2_HD_INFLATE_FINAL) break;
    }
    nghttp2_hd_inflate_end_headers(server);
    return fields;
  };
  // The first request fills both tables; the second is the block every later one repeats.
  for (int i = 0; i < 2; ++i) {
    const ssize_t n = nghttp2_hd_deflate_hd(client, block.data(), block.size(), h.data(), h.size());
    if (n < 0) fail("HPACK encoding");
    block.resize(static_cast<std::size_t>(n));
    if (decode_all(block) != h.size()) fail("fields lost in HPACK");
    block.resize(block.capacity());
  }
  const ssize_t n = nghttp2_hd_deflate_hd(client, block.data(), block.size(), h.data(), h.size());
  if (n < 0) fail("HPACK encoding");
  block.resize(static_cast<std::size_t>(n));
  for (auto _ : state) benchmark::DoNotOptimize(decode_all(block));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.counters["block_bytes"] = static_cast<double>(block.size());
  nghttp2_hd_deflate_del(client);
  nghttp2_hd_inflate_del(server);
}
BENCHMARK(BM_HpackRequestHeaders);

}  // namespace

BENCHMARK_MAIN();
