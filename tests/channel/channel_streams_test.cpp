// Streams on a channel (ringrpc/channel.hpp, open_stream): real servers on loopback behind a
// static resolver, each counting which streams' messages reach it, and a scripted server for a
// member whose connection is lost mid-stream.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>

#include "ringrpc/channel.hpp"
#include "ringrpc/client_stream.hpp"
#include "ringrpc/server.hpp"
#include "ringrpc/stream.hpp"
#include "stream_handlers.hpp"
#include "test_support.hpp"

namespace ringrpc {
namespace {

using namespace std::chrono_literals;
using test::text_of;

std::string text_of(const std::optional<std::vector<std::byte>>& m) {
  return m ? text_of(std::span<const std::byte>(*m)) : "<none>";
}

// One member: a server whose "tally" bidi stream echoes every message and counts them by the
// stream tag before the ':' ("s3:17"), whose "hit" call counts calls, and whose "watch" stream
// only watches (tests/stream_handlers.hpp).
struct member {
  std::mutex mu;
  std::map<std::string, int> messages;  // by stream tag
  std::atomic<int> hits{0};
  test::watch watched;
  std::unique_ptr<server> srv;  // last: stopped and joined before the handlers' counts go

  int count(const std::string& tag) {
    const std::lock_guard lock(mu);
    const auto it = messages.find(tag);
    return it == messages.end() ? 0 : it->second;
  }
  std::size_t streams_seen() {
    const std::lock_guard lock(mu);
    return messages.size();
  }
};

class tally_handler final : public stream_handler {
 public:
  explicit tally_handler(member& m) : _m(m) {}
  void on_message(server_stream& s, std::span<const std::byte> message) override {
    const std::string text = text_of(message);
    {
      const std::lock_guard lock(_m.mu);
      ++_m.messages[text.substr(0, text.find(':'))];
    }
    // The client reads each echo before it writes again: the credit never runs out.
    EXPECT_EQ(s.write(message), write_result::ok);
  }
  void on_half_close(server_stream& s) override { s.finish(); }

 private:
  member& _m;
};

std::unique_ptr<member> start_member() {
  auto m = std::make_unique<member>();
  m->srv = std::make_unique<server>(test::threads(1, 2));
  member* raw = m.get();
  m->srv->add_stream_method("tally", stream_kind::bidi, [raw](server_stream&, std::span<const std::byte>) {
    return std::make_unique<tally_handler>(*raw);
  });
  m->srv->add_stream_method("watch", stream_kind::bidi, [raw](server_stream&, std::span<const std::byte>) {
    return std::make_unique<test::watch_handler>(raw->watched);
  });
  m->srv->add_method("hit", [raw](call_context& ctx) {
    raw->hits.fetch_add(1);
    ctx.reply(ctx.payload());
  });
  m->srv->start();
  return m;
}

std::string target_of(const std::vector<std::uint16_t>& ports) {
  std::string t;
  for (const std::uint16_t p : ports) t.append(t.empty() ? "" : ",").append("127.0.0.1:").append(std::to_string(p));
  return t;
}

// Health checks off: the tests count calls and pending slots, and a scripted member answers no ping.
channel_options quiet(balancing_policy policy) {
  channel_options o;
  o.policy = policy;
  o.health_interval = 0ms;
  return o;
}

// "s<stream>r<round>": a tag per stream and round of messages.
std::string tag_of(int stream, int round) {
  std::string t("s");
  t.append(std::to_string(stream)).append("r").append(std::to_string(round));
  return t;
}

// Writes "TAG:i" and reads its echo, `n` times; false at the first that fails.
::testing::AssertionResult exchange(client_stream& s, const std::string& tag, int n) {
  for (int i = 0; i < n; ++i) {
    std::string m = tag;
    m.append(":").append(std::to_string(i));
    if (s.write_wait(m, 10s) != write_result::ok) return ::testing::AssertionFailure() << tag << " write " << i;
    const auto back = s.read(10s);
    if (text_of(back) != m) {
      return ::testing::AssertionFailure() << tag << " read " << i << ": " << text_of(back) << " ("
                                           << (s.ended() ? s.finish().message : "not ended") << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// The member a stream went to: the one whose outstanding count is `n` (a channel counts open
// streams there); -1 when none or several are.
int member_with_outstanding(const channel& ch, const std::vector<std::uint16_t>& ports, std::uint64_t n) {
  int found = -1;
  for (const channel_member_state& s : ch.members()) {
    if (s.outstanding != n) continue;
    if (found != -1) return -1;
    for (std::size_t i = 0; i < ports.size(); ++i) {
      if (ports[i] == s.address.port) found = static_cast<int>(i);
    }
  }
  return found;
}

// No member has a call or stream in flight.
bool idle(const channel& ch) {
  for (const channel_member_state& s : ch.members()) {
    if (s.outstanding != 0) return false;
  }
  return true;
}

TEST(channel_streams, round_robin_spreads_streams_and_each_streams_messages_reach_one_member) {
  std::vector<std::unique_ptr<member>> members;
  std::vector<std::uint16_t> ports;
  for (int i = 0; i < 3; ++i) {
    members.push_back(start_member());
    ports.push_back(members.back()->srv->port());
  }
  channel ch = channel::create(target_of(ports), quiet(balancing_policy::round_robin));
  ASSERT_TRUE(ch.wait_for_members(3, 10s));
  constexpr int streams = 6;
  constexpr int messages = 40;
  std::vector<client_stream> open;
  for (int i = 0; i < streams; ++i) {
    open.push_back(ch.open_stream("tally", stream_kind::bidi));
    ASSERT_FALSE(open.back().ended()) << open.back().finish().message;
  }
  // Interleaved, so a stream that moved between members would show up on two of them.
  for (int round = 0; round < messages / 10; ++round) {
    for (int i = 0; i < streams; ++i) {
      ASSERT_TRUE(exchange(open[static_cast<std::size_t>(i)], tag_of(i, round), 10));
    }
  }
  for (auto& s : open) {
    EXPECT_TRUE(s.half_close());
    const call_result r = s.finish(10s);
    EXPECT_TRUE(r.ok()) << r.message;
  }
  // Each stream's rounds all on one member; each member has two of the six streams.
  std::map<int, int> streams_per_member;
  for (int i = 0; i < streams; ++i) {
    int home = -1;
    for (int round = 0; round < messages / 10; ++round) {
      const std::string tag = tag_of(i, round);
      int where = -1;
      for (std::size_t k = 0; k < members.size(); ++k) {
        const int n = members[k]->count(tag);
        if (n == 0) continue;
        EXPECT_EQ(n, 10) << tag;
        EXPECT_EQ(where, -1) << tag << " reached two members";
        where = static_cast<int>(k);
      }
      ASSERT_NE(where, -1) << tag << " reached no member";
      if (home == -1) home = where;
      EXPECT_EQ(where, home) << "stream " << i << " moved in round " << round;
    }
    ++streams_per_member[home];
  }
  ASSERT_EQ(streams_per_member.size(), 3u);
  for (const auto& [k, n] : streams_per_member) EXPECT_EQ(n, 2) << "member " << k;
  EXPECT_EQ(ch.stats().streams, static_cast<std::uint64_t>(streams));
  EXPECT_EQ(ch.stats().calls, 0u);  // streams are not calls
  EXPECT_TRUE(idle(ch));  // every stream has ended (as finish() saw)
}

// For least_outstanding and p2c (which, of two members, always weighs both).
void an_open_stream_counts_as_outstanding(balancing_policy policy) {
  SCOPED_TRACE(to_string(policy));
  std::vector<std::unique_ptr<member>> members;
  std::vector<std::uint16_t> ports;
  for (int i = 0; i < 2; ++i) {
    members.push_back(start_member());
    ports.push_back(members.back()->srv->port());
  }
  channel ch = channel::create(target_of(ports), quiet(policy));
  ASSERT_TRUE(ch.wait_for_members(2, 10s));
  client_stream s = ch.open_stream("tally", stream_kind::bidi);
  ASSERT_TRUE(exchange(s, "held", 1));
  const int busy = member_with_outstanding(ch, ports, 1);
  ASSERT_NE(busy, -1);
  // Calls one after the other all go to the member without the stream: it has less in flight.
  for (int i = 0; i < 20; ++i) {
    const call_result r = ch.call("hit", std::string_view("x"));
    ASSERT_TRUE(r.ok()) << r.message;
  }
  EXPECT_EQ(members[static_cast<std::size_t>(busy)]->hits.load(), 0);
  EXPECT_EQ(members[static_cast<std::size_t>(1 - busy)]->hits.load(), 20);
  // A second stream goes there too, and the two members are even again.
  client_stream t = ch.open_stream("tally", stream_kind::bidi);
  ASSERT_TRUE(exchange(t, "second", 1));
  EXPECT_EQ(members[static_cast<std::size_t>(1 - busy)]->count("second"), 1);
  // Ended streams count no more.
  s.cancel();
  t.cancel();
  EXPECT_TRUE(test::eventually([&] { return idle(ch); }));
}

TEST(channel_streams, an_open_stream_counts_as_outstanding_for_least_outstanding) {
  an_open_stream_counts_as_outstanding(balancing_policy::least_outstanding);
}

TEST(channel_streams, an_open_stream_counts_as_outstanding_for_p2c) {
  an_open_stream_counts_as_outstanding(balancing_policy::power_of_two_choices);
}

TEST(channel_streams, a_lost_member_ends_its_stream_connection_lost_and_the_others_go_on) {
  auto real = start_member();
  auto fake = std::make_unique<test::scripted_server>();
  const std::vector<std::uint16_t> ports{real->srv->port(), fake->port()};
  channel ch = channel::create(target_of(ports), quiet(balancing_policy::round_robin));
  fake->accept();  // the channel dials every member at start
  ASSERT_TRUE(ch.wait_for_members(2, 10s));
  client_stream a = ch.open_stream("tally", stream_kind::bidi);
  const int first = member_with_outstanding(ch, ports, 1);
  client_stream b = ch.open_stream("tally", stream_kind::bidi);
  ASSERT_NE(first, -1);
  client_stream& on_real = first == 0 ? a : b;
  client_stream& on_fake = first == 0 ? b : a;
  ASSERT_TRUE(exchange(on_real, "before", 3));
  ASSERT_NE(fake->read_request(), 0u);  // the open reached the scripted member
  fake.reset();                         // it vanishes
  const call_result r = on_fake.finish(10s);
  EXPECT_EQ(r.error, call_error::connection_closed);
  EXPECT_EQ(r.code, status::unavailable);
  EXPECT_EQ(r.message.rfind("connection lost", 0), 0u) << r.message;
  // The other stream goes on, on its member, to its end.
  ASSERT_TRUE(exchange(on_real, "after", 3));
  EXPECT_TRUE(on_real.half_close());
  EXPECT_TRUE(on_real.finish(10s).ok());
  EXPECT_EQ(real->count("before"), 3);
  EXPECT_EQ(real->count("after"), 3);
  EXPECT_EQ(ch.stats().retries, 0u);  // nothing moved
}

TEST(channel_streams, a_stopped_member_ends_its_stream_and_the_others_go_on) {
  auto stopping = start_member();
  auto staying = start_member();
  const std::vector<std::uint16_t> ports{stopping->srv->port(), staying->srv->port()};
  channel ch = channel::create(target_of(ports), quiet(balancing_policy::round_robin));
  ASSERT_TRUE(ch.wait_for_members(2, 10s));
  client_stream a = ch.open_stream("tally", stream_kind::bidi);
  const int first = member_with_outstanding(ch, ports, 1);
  client_stream b = ch.open_stream("tally", stream_kind::bidi);
  ASSERT_NE(first, -1);
  client_stream& on_stopping = first == 0 ? a : b;
  client_stream& on_staying = first == 0 ? b : a;
  ASSERT_TRUE(exchange(on_stopping, "x", 2));
  ASSERT_TRUE(exchange(on_staying, "y", 2));
  stopping->srv->stop();
  const call_result r = on_stopping.finish(10s);
  EXPECT_FALSE(r.ok());
  // The server's end (shutting_down) usually comes before its connection's (unavailable).
  EXPECT_TRUE(r.code == status::shutting_down || r.code == status::unavailable) << to_string(r.code) << r.message;
  ASSERT_TRUE(exchange(on_staying, "z", 3));
  EXPECT_TRUE(on_staying.half_close());
  EXPECT_TRUE(on_staying.finish(10s).ok());
  EXPECT_EQ(staying->count("z"), 3);
  EXPECT_EQ(stopping->count("z"), 0);
}

TEST(channel_streams, no_live_member_fails_the_open_at_once_as_it_fails_a_call) {
  // A port with nothing listening: bound, then closed.
  std::uint16_t port = 0;
  {
    auto placeholder = start_member();
    port = placeholder->srv->port();
  }
  const std::string target = target_of({port});
  channel ch = channel::create(target, quiet(balancing_policy::round_robin));
  client_stream s = ch.open_stream("tally", stream_kind::bidi);
  EXPECT_TRUE(s.ended());
  const call_result r = s.finish(1s);
  const call_result call = ch.call("hit", std::string_view("x"));
  EXPECT_EQ(r.error, call_error::connection_closed);
  EXPECT_EQ(r.error, call.error);
  EXPECT_EQ(r.message, call.message);
  EXPECT_EQ(r.message, std::string("no live member of ").append(target));
  EXPECT_EQ(r.code, status::unavailable);
  EXPECT_EQ(ch.stats().no_member, 2u);
  EXPECT_EQ(ch.stats().streams, 1u);
  EXPECT_EQ(ch.stats().calls, 1u);
  EXPECT_EQ(s.write("x"), write_result::closed);
}

TEST(channel_streams, closing_the_channel_ends_its_open_streams_as_a_closed_client_does) {
  std::vector<std::unique_ptr<member>> members;
  std::vector<std::uint16_t> ports;
  for (int i = 0; i < 2; ++i) {
    members.push_back(start_member());
    ports.push_back(members.back()->srv->port());
  }
  channel ch = channel::create(target_of(ports), quiet(balancing_policy::round_robin));
  ASSERT_TRUE(ch.wait_for_members(2, 10s));
  std::vector<client_stream> open;
  for (int i = 0; i < 4; ++i) open.push_back(ch.open_stream("watch", stream_kind::bidi));
  ASSERT_TRUE(test::eventually([&] { return members[0]->watched.opens.load() + members[1]->watched.opens.load() == 4; }));
  ch.close();
  for (auto& s : open) {
    EXPECT_TRUE(s.ended());  // close() returns once they have
    const call_result r = s.finish(1s);
    EXPECT_EQ(r.error, call_error::client_closed);
    EXPECT_EQ(r.code, status::cancelled);
    EXPECT_EQ(r.message, "client closed");
    EXPECT_EQ(s.write("x"), write_result::closed);
  }
  // The servers learn of it as of a closed connection.
  EXPECT_TRUE(test::eventually([&] { return members[0]->watched.dones.load() + members[1]->watched.dones.load() == 4; }));
  const call_result after = ch.open_stream("watch", stream_kind::bidi).finish(1s);
  EXPECT_EQ(after.error, call_error::client_closed);
}

TEST(channel_streams, an_open_refused_at_once_by_a_busy_member_moves_to_another_once) {
  std::vector<std::unique_ptr<member>> members;
  std::vector<std::uint16_t> ports;
  for (int i = 0; i < 2; ++i) {
    members.push_back(start_member());
    ports.push_back(members.back()->srv->port());
  }
  channel_options o = quiet(balancing_policy::round_robin);
  o.client.max_pending_calls = 1;  // a member with one stream open takes no other
  channel ch = channel::create(target_of(ports), o);
  ASSERT_TRUE(ch.wait_for_members(2, 10s));
  client_stream first = ch.open_stream("tally", stream_kind::bidi);   // member i
  client_stream second = ch.open_stream("tally", stream_kind::bidi);  // member 1 - i
  ASSERT_TRUE(exchange(first, "first", 1));
  ASSERT_TRUE(exchange(second, "second", 1));
  const int busy = members[0]->count("first") == 1 ? 0 : 1;
  // Free the second member; round robin's next pick is the first, still busy.
  EXPECT_TRUE(second.half_close());
  EXPECT_TRUE(second.finish(10s).ok());
  ASSERT_TRUE(test::eventually([&] { return member_with_outstanding(ch, ports, 1) == busy; }));
  client_stream third = ch.open_stream("tally", stream_kind::bidi);
  ASSERT_FALSE(third.ended()) << third.finish().message;
  ASSERT_TRUE(exchange(third, "third", 2));
  EXPECT_EQ(members[static_cast<std::size_t>(1 - busy)]->count("third"), 2);
  EXPECT_EQ(ch.stats().retries, 1u);
  // Both busy now: one more member is tried, then the open fails with the client's refusal.
  client_stream fourth = ch.open_stream("tally", stream_kind::bidi);
  const call_result r = fourth.finish(1s);
  EXPECT_EQ(r.error, call_error::client_busy);
  EXPECT_EQ(ch.stats().retries, 2u);
}

}  // namespace
}  // namespace ringrpc
