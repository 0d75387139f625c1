// Replies pool handlers write themselves while their shard sleeps (src/server/responder_inline.cpp)
// and replies handed to the shard's responder share one socket: every reply arrives whole, none
// inside another, and one the socket took only part of is finished before anything queued
// after it. Run twice by meson: as is, and with RINGRPC_INLINE_REPLIES=0 (every reply handed
// over), so both ways are checked against the same expectations.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "ringrpc/client.hpp"
#include "ringrpc/server.hpp"
#include "test_support.hpp"

namespace ringrpc {
namespace {

using namespace std::chrono_literals;
using test::within;

// "N:c" -> N bytes of c; the handler first sleeps `pause`, so its shard is asleep when it
// answers (the moment a handler writes its own reply).
void add_blob(server& s, std::chrono::milliseconds pause) {
  s.add_method("blob", [pause](call_context& c) {
    const std::string_view p(reinterpret_cast<const char*>(c.payload().data()), c.payload().size());
    const std::size_t colon = p.find(':');
    const std::size_t n = std::stoul(std::string(p.substr(0, colon)));
    std::this_thread::sleep_for(pause);
    c.reply(std::string(n, p[colon + 1]));
  });
}

// Answers on the reader thread (registered `direct`): the responder writes these replies.
class mirror_endpoint : public endpoint {
 public:
  void receive_and_reply(call_context& c) override { c.reply(c.payload()); }
};

std::string payload_of(const detail::frame_view& v) {
  return {reinterpret_cast<const char*>(v.payload.data()), v.payload.size()};
}

// A peer that reads nothing for a while: the first reply (300 kB into a 4 kB socket buffer) is
// taken only in part, by whoever writes it; the replies answered after it wait, then all
// arrive whole, the big one first.
TEST(inline_replies, a_reply_the_socket_takes_in_part_is_finished_before_later_ones) {
  server_options o = test::threads(1, 2);
  o.socket_send_buffer_bytes = 4096;
  server s(o);
  add_blob(s, 20ms);
  test::start_with_builtins(s);
  for (int round = 0; round < 3; ++round) {
    test::raw_socket peer(s.port(), 4096);
    ASSERT_TRUE(peer.send_frame(test::request(1, "blob", "300000:a")));
    std::this_thread::sleep_for(100ms);  // the big reply is being written, and stuck
    ASSERT_TRUE(peer.send_frame(test::request(2, "blob", "1000:b")));
    ASSERT_TRUE(peer.send_frame(test::request(3, "echo", "c")));
    std::this_thread::sleep_for(100ms);  // both answered, behind the big one
    std::vector<std::vector<std::byte>> storage(3);
    std::vector<std::uint64_t> order;
    for (int i = 0; i < 3; ++i) {
      detail::frame_view v;
      ASSERT_TRUE(peer.read_frame(v, storage[static_cast<std::size_t>(i)])) << "round " << round << " reply " << i;
      ASSERT_EQ(v.kind, wire::Kind::Reply);
      order.push_back(v.call_id);
      const std::string got = payload_of(v);
      switch (v.call_id) {
        case 1: EXPECT_EQ(got, std::string(300000, 'a')); break;
        case 2: EXPECT_EQ(got, std::string(1000, 'b')); break;
        case 3: EXPECT_EQ(got, "c"); break;
        default: ADD_FAILURE() << "call id " << v.call_id;
      }
    }
    EXPECT_EQ(order.front(), 1u) << "the reply begun first ends first";
  }
}

// Many clients at once, calls on the pool (whose replies their handlers may write) and on the
// reader (which the responder writes) mixed on each connection, sizes from one byte to 100 kB
// (more than a write takes at once: some handlers' writes end in part): every reply is its
// own call's.
TEST(inline_replies, pool_and_reader_replies_mixed_on_connections_stay_whole) {
  server s(test::threads(1, 2));
  add_blob(s, 0ms);
  endpoint_options direct;
  direct.policy = dispatch_policy::direct;
  s.register_endpoint("mirror", std::make_shared<mirror_endpoint>(), direct);
  test::start_with_builtins(s);
  constexpr int threads = 4, calls = 300;
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      auto c = client::connect("127.0.0.1", s.port());
      std::vector<reply_future<call_result>> pending;
      std::vector<std::string> want;
      for (int i = 0; i < calls; ++i) {
        const std::size_t n = (i * 7919u + static_cast<unsigned>(t) * 104729u) % 100000u + 1;
        const char ch = static_cast<char>('a' + (i + t) % 26);
        if (i % 3 == 0) {
          want.push_back(std::string(n % 4096 + 1, ch));
          pending.push_back(c.call_future("mirror", test::bytes_of(want.back()), within(30s)));
        } else {
          want.push_back(std::string(n, ch));
          const std::string ask = std::to_string(n) + ":" + ch;
          pending.push_back(c.call_future("blob", test::bytes_of(ask), within(30s)));
        }
        if (pending.size() == 16 || i + 1 == calls) {
          for (std::size_t k = 0; k < pending.size(); ++k) {
            const auto r = pending[k].get();
            if (!r.ok() || r.payload_string() != want[k]) bad.fetch_add(1);
          }
          pending.clear();
          want.clear();
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
  // Every call was released: the bookkeeping of replies their handlers wrote catches up.
  EXPECT_TRUE(test::eventually([&] { return s.stats()[server_counter::calls_completed] >= threads * calls; }));
}

// A handler's reply to a peer that has gone: the write fails there or in the responder, the
// call is released, and the server stops without waiting for it.
TEST(inline_replies, a_reply_to_a_peer_that_left_is_released) {
  server s(test::threads(1, 1));
  add_blob(s, 50ms);
  test::start_with_builtins(s);
  {
    test::raw_socket peer(s.port());
    ASSERT_TRUE(peer.send_frame(test::request(1, "blob", "100000:z")));
    std::this_thread::sleep_for(10ms);
  }  // closed before the answer
  EXPECT_TRUE(test::eventually([&] { return s.stats()[server_counter::calls_completed] >= 1; }));
  auto c = client::connect("127.0.0.1", s.port());
  const auto r = c.call("blob", std::string_view("10:y"), within(10s));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.payload_string(), std::string(10, 'y'));
  s.stop();
}

}  // namespace
}  // namespace ringrpc
