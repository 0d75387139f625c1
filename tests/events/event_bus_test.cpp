// Tests for ringrpc::event_bus: drops, lifecycle, pre-start buffering, order, isolation, stop.
#include "ringrpc/event_bus.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ringrpc::event;
using ringrpc::event_bus;
using ringrpc::event_bus_options;
using ringrpc::event_kind;
using ringrpc::event_kind_set;
using ringrpc::event_listener;

constexpr auto wait_limit = 20s;  // generous: TSan builds are slow

event make(event_kind k, std::uint64_t value = 0) {
  event e;
  e.kind = k;
  e.value = value;
  return e;
}

std::uint64_t dropped_of(const ringrpc::event_queue_stats& s, event_kind k) {
  return s.dropped_by_kind[static_cast<std::size_t>(k)];
}

// Keeps what it is given, for a test to wait for and read; any thread may add.
template <class T>
class kept {
 public:
  void add(T x) {
    std::lock_guard lock(_mutex);
    _items.push_back(std::move(x));
    _cv.notify_all();
  }
  bool wait_for_count(std::size_t n) {
    std::unique_lock lock(_mutex);
    return _cv.wait_for(lock, wait_limit, [&] { return _items.size() >= n; });
  }
  std::vector<T> items() const {
    std::lock_guard lock(_mutex);
    return _items;
  }
  std::size_t count() const {
    std::lock_guard lock(_mutex);
    return _items.size();
  }

 private:
  mutable std::mutex _mutex;
  std::condition_variable _cv;
  std::vector<T> _items;
};

// Keeps every event it receives.
class recorder final : public event_listener {
 public:
  void on_event(const event& e) override { _events.add(e); }
  bool wait_for_count(std::size_t n) { return _events.wait_for_count(n); }
  std::vector<event> events() const { return _events.items(); }
  std::size_t count() const { return _events.count(); }

 private:
  kept<event> _events;
};

// Blocks its queue inside on_event() until opened.
class gated_listener final : public event_listener {
 public:
  void on_event(const event&) override { _gate.wait(); }
  bool wait_entered(int n = 1) { return _gate.wait_for_waiters(n, wait_limit); }
  void open() { _gate.open(); }

 private:
  ringrpc::test::gate _gate;
};

// Collects logger lines.
class log_capture {
 public:
  std::function<void(std::string_view)> logger() {
    return [this](std::string_view line) { _lines.add(std::string(line)); };
  }
  bool wait_for_lines(std::size_t n) { return _lines.wait_for_count(n); }
  std::vector<std::string> lines() const { return _lines.items(); }

 private:
  kept<std::string> _lines;
};

event_bus_options quiet(log_capture& log) {
  event_bus_options o;
  o.logger = log.logger();
  return o;
}

std::vector<std::uint64_t> values_of(const std::vector<event>& events) {
  std::vector<std::uint64_t> out;
  for (const event& e : events) out.push_back(e.value);
  return out;
}

// A quiet bus, its warnings in `log`: the setting of most tests here.
class QuietBus : public ::testing::Test {
 protected:
  // Adds the queue "q" of `capacity` and subscribes the listeners to it, in this order.
  template <class... Listeners>
  void queue_q(std::size_t capacity, const Listeners&... listeners) {
    bus.add_queue("q", capacity);
    (bus.subscribe("q", listeners), ...);
  }
  // The same, then starts the bus.
  template <class... Listeners>
  void start_q(std::size_t capacity, const Listeners&... listeners) {
    queue_q(capacity, listeners...);
    bus.start();
  }
  // `posters` threads that each post `per_poster` events of the kinds kind_of(i), valued
  // poster << 32 | i.
  std::vector<std::thread> start_posters(std::uint64_t per_poster,
                                         event_kind (*kind_of)(std::uint64_t)) {
    std::vector<std::thread> threads;
    for (std::uint64_t t = 0; t < posters; ++t) {
      threads.emplace_back([this, t, per_poster, kind_of] {
        for (std::uint64_t i = 0; i < per_poster; ++i) bus.post(make(kind_of(i), t << 32 | i));
      });
    }
    return threads;
  }

  static constexpr std::uint64_t posters = 4;
  log_capture log;
  event_bus bus{quiet(log)};
};

// Every 500th one a lifecycle event, to mix the two lanes.
event_kind mostly_slow_calls(std::uint64_t i) {
  return i % 500 == 0 ? event_kind::endpoint_started : event_kind::slow_call;
}

event_kind completed_or_opened(std::uint64_t i) {
  return i % 2 == 0 ? event_kind::call_completed : event_kind::connection_opened;
}

TEST(EventBus, KindNamesAreDistinctAndLifecycleIsTheServerAndEndpointKinds) {
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < ringrpc::event_kind_count; ++i) {
    const auto k = static_cast<event_kind>(i);
    names.insert(ringrpc::to_string(k));
    EXPECT_NE(ringrpc::to_string(k), "unknown_event");
  }
  EXPECT_EQ(names.size(), ringrpc::event_kind_count);
  EXPECT_EQ(ringrpc::to_string(event_kind::slow_call), "slow_call");
  EXPECT_EQ(ringrpc::to_string(static_cast<event_kind>(200)), "unknown_event");
  EXPECT_TRUE(ringrpc::is_lifecycle(event_kind::server_started));
  EXPECT_TRUE(ringrpc::is_lifecycle(event_kind::endpoint_stopped));
  EXPECT_FALSE(ringrpc::is_lifecycle(event_kind::connection_opened));
  EXPECT_FALSE(ringrpc::is_lifecycle(event_kind::call_completed));
}

TEST_F(QuietBus, BadArgumentsAreRefused) {
  EXPECT_THROW(bus.add_queue("", 8), std::invalid_argument);
  EXPECT_THROW(bus.add_queue("q", 0), std::invalid_argument);
  bus.add_queue("q", 3);
  EXPECT_EQ(bus.stats("q")->capacity, 4u);
  EXPECT_THROW(bus.add_queue("q", 8), std::invalid_argument);
  EXPECT_THROW(bus.subscribe("nope", std::make_shared<recorder>()), std::invalid_argument);
  EXPECT_THROW(bus.subscribe("q", nullptr), std::invalid_argument);
  EXPECT_FALSE(bus.stats("nope").has_value());
  bus.stop();
  EXPECT_THROW(bus.add_queue("late", 8), std::logic_error);
}

TEST_F(QuietBus, FullQueueDropsAndCountsPerKind) {
  auto g = std::make_shared<gated_listener>();
  auto r = std::make_shared<recorder>();
  start_q(8, g, r);

  bus.post(make(event_kind::slow_call, 0));
  ASSERT_TRUE(g->wait_entered());  // the dispatch thread now holds event 0
  for (std::uint64_t i = 1; i <= 8; ++i) bus.post(make(event_kind::slow_call, i));
  for (int i = 0; i < 5; ++i) bus.post(make(event_kind::call_completed, 100));
  for (int i = 0; i < 3; ++i) bus.post(make(event_kind::pool_exhausted, 100));

  auto s = *bus.stats("q");
  EXPECT_EQ(s.posted, 17u);
  EXPECT_EQ(s.dropped, 8u);
  EXPECT_EQ(dropped_of(s, event_kind::call_completed), 5u);
  EXPECT_EQ(dropped_of(s, event_kind::pool_exhausted), 3u);
  EXPECT_EQ(dropped_of(s, event_kind::slow_call), 0u);
  EXPECT_EQ(s.depth, 9u);
  EXPECT_EQ(s.delivered, 0u);

  g->open();
  bus.stop();
  s = *bus.stats("q");
  EXPECT_EQ(s.delivered, 9u);
  EXPECT_EQ(s.depth, 0u);
  EXPECT_EQ(s.posted, s.delivered + s.dropped);
  EXPECT_EQ(values_of(r->events()), (std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST_F(QuietBus, LifecycleEventsAreNeverDroppedAndKeepTheirPlace) {
  auto g = std::make_shared<gated_listener>();
  auto r = std::make_shared<recorder>();
  start_q(4, g, r);

  bus.post(make(event_kind::connection_opened, 0));
  ASSERT_TRUE(g->wait_entered());
  bus.post(make(event_kind::connection_opened, 1));
  bus.post(make(event_kind::server_stopping, 2));  // between two ring events
  bus.post(make(event_kind::connection_opened, 3));
  bus.post(make(event_kind::connection_opened, 4));
  bus.post(make(event_kind::connection_opened, 5));  // the ring is now full
  std::uint64_t value = 6;
  for (int i = 0; i < 100; ++i) {
    bus.post(make(event_kind::endpoint_stopped, value++));
    bus.post(make(event_kind::connection_closed, 999));  // dropped
  }
  bus.post(make(event_kind::server_stopped, value++));

  auto s = *bus.stats("q");
  EXPECT_EQ(s.dropped, 100u);
  EXPECT_EQ(dropped_of(s, event_kind::connection_closed), 100u);
  for (std::size_t k = 0; k < ringrpc::event_kind_count; ++k) {
    if (ringrpc::is_lifecycle(static_cast<event_kind>(k))) {
      EXPECT_EQ(s.dropped_by_kind[k], 0u);
    }
  }

  g->open();
  bus.stop();
  s = *bus.stats("q");
  EXPECT_EQ(s.delivered, value);
  EXPECT_EQ(s.posted, s.delivered + s.dropped);
  std::vector<std::uint64_t> expected;
  for (std::uint64_t i = 0; i < value; ++i) expected.push_back(i);
  EXPECT_EQ(values_of(r->events()), expected);
}

TEST_F(QuietBus, EventsPostedBeforeStartAreBufferedAndDeliveredFirstInOrder) {
  auto early = std::make_shared<recorder>();
  queue_q(16, early);
  bus.post(make(event_kind::server_started, 0));
  for (std::uint64_t i = 1; i <= 5; ++i) bus.post(make(event_kind::connection_opened, i));
  // Subscribed after posting, still before start: sees the buffered events too.
  auto late = std::make_shared<recorder>();
  bus.subscribe("q", late);
  bus.post(make(event_kind::endpoint_started, 6));
  bus.post(make(event_kind::limit_hit, 7));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(early->count(), 0u);
  EXPECT_EQ(bus.stats("q")->depth, 8u);

  bus.start();
  bus.post(make(event_kind::slow_call, 8));
  ASSERT_TRUE(early->wait_for_count(9));
  ASSERT_TRUE(late->wait_for_count(9));
  const std::vector<std::uint64_t> expected{0, 1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(values_of(early->events()), expected);
  EXPECT_EQ(values_of(late->events()), expected);
  EXPECT_EQ(early->events()[0].kind, event_kind::server_started);
  bus.stop();
}

TEST_F(QuietBus, PreStartBufferIsBoundedByCapacityPlusLifecycle) {
  auto r = std::make_shared<recorder>();
  queue_q(4, r);
  for (std::uint64_t i = 0; i < 10; ++i) bus.post(make(event_kind::call_completed, i));
  bus.post(make(event_kind::server_started, 10));
  bus.post(make(event_kind::server_stopping, 11));
  auto s = *bus.stats("q");
  EXPECT_EQ(s.posted, 12u);
  EXPECT_EQ(s.dropped, 6u);
  EXPECT_EQ(s.depth, 6u);

  bus.stop();  // never started: stop still delivers what was buffered
  EXPECT_EQ(values_of(r->events()), (std::vector<std::uint64_t>{0, 1, 2, 3, 10, 11}));
  s = *bus.stats("q");
  EXPECT_EQ(s.posted, s.delivered + s.dropped);
}

TEST_F(QuietBus, EachPostersOrderIsKeptPerQueueAcrossBothLanes) {
  bus.add_queue("a", 1 << 17);
  bus.add_queue("b", 1 << 17);
  auto ra = std::make_shared<recorder>();
  auto rb = std::make_shared<recorder>();
  bus.subscribe("a", ra);
  bus.subscribe("b", rb);
  bus.start();

  constexpr std::uint64_t per_poster = 20'000;
  auto threads = start_posters(per_poster, mostly_slow_calls);
  for (auto& th : threads) th.join();
  bus.stop();

  for (const auto* r : {ra.get(), rb.get()}) {
    const auto events = r->events();
    ASSERT_EQ(events.size(), posters * per_poster);  // capacity was ample: nothing dropped
    std::vector<std::uint64_t> next(posters, 0);
    for (const event& e : events) {
      const std::uint64_t t = e.value >> 32;
      const std::uint64_t i = e.value & 0xffffffffu;
      ASSERT_LT(t, posters);
      ASSERT_EQ(i, next[t]) << "poster " << t << " out of order";
      ++next[t];
    }
  }
}

TEST_F(QuietBus, SlowListenerDelaysOnlyItsOwnQueue) {
  bus.add_queue("slow", 16);
  bus.add_queue("fast", 1024);
  auto g = std::make_shared<gated_listener>();
  auto fast = std::make_shared<recorder>();
  bus.subscribe("slow", g);
  bus.subscribe("fast", fast);
  bus.start();

  for (std::uint64_t i = 0; i < 200; ++i) bus.post(make(event_kind::connection_opened, i));
  ASSERT_TRUE(g->wait_entered());
  ASSERT_TRUE(fast->wait_for_count(200));  // while "slow" is still stuck on its first event
  const auto slow = *bus.stats("slow");
  EXPECT_EQ(slow.delivered, 0u);
  EXPECT_GT(slow.dropped, 0u);
  EXPECT_EQ(bus.stats("fast")->dropped, 0u);
  g->open();
  bus.stop();
}

TEST_F(QuietBus, StopDeliversEverythingQueuedThenReturns) {
  struct sleepy final : event_listener {
    std::atomic<std::uint64_t> seen{0};
    void on_event(const event&) override {
      std::this_thread::sleep_for(100us);
      seen.fetch_add(1, std::memory_order_relaxed);
    }
  };
  auto l = std::make_shared<sleepy>();
  start_q(1024, l);
  for (std::uint64_t i = 0; i < 500; ++i) bus.post(make(event_kind::call_completed, i));
  bus.post(make(event_kind::server_stopped));
  bus.stop();
  EXPECT_EQ(l->seen.load(), 501u);
  const auto s = *bus.stats("q");
  EXPECT_EQ(s.delivered, 501u);
  EXPECT_EQ(s.depth, 0u);
  EXPECT_GT(s.processing_ns_total, 0u);
  EXPECT_GE(s.processing_ns_max, 100'000u);
}

TEST_F(QuietBus, StopIsIdempotentAndLaterPostsAreRejected) {
  auto r = std::make_shared<recorder>();
  start_q(64, r);
  for (std::uint64_t i = 0; i < 10; ++i) bus.post(make(event_kind::slow_call, i));

  std::vector<std::thread> stoppers;
  for (int i = 0; i < 3; ++i) stoppers.emplace_back([this] { bus.stop(); });
  for (auto& th : stoppers) th.join();
  EXPECT_EQ(r->count(), 10u);  // any of the three returned only after the drain
  bus.stop();
  bus.start();  // no effect after stop

  bus.post(make(event_kind::slow_call, 10));
  bus.post(make(event_kind::server_stopped, 11));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(r->count(), 10u);
  const auto s = *bus.stats("q");
  EXPECT_EQ(s.rejected_after_stop, 2u);
  EXPECT_EQ(s.posted, 10u);
  EXPECT_EQ(s.posted, s.delivered + s.dropped);
}

TEST_F(QuietBus, ThrowingListenerIsCountedAndTheQueueGoesOn) {
  struct thrower final : event_listener {
    void on_event(const event& e) override {
      if (e.value == 3) throw 42;  // not a std::exception
      if (e.value % 2 == 1) throw std::runtime_error("boom");
    }
  };
  auto r = std::make_shared<recorder>();
  start_q(64, std::make_shared<thrower>(), r);  // r after the thrower: still called for every event
  for (std::uint64_t i = 0; i < 20; ++i) bus.post(make(event_kind::slow_call, i));
  bus.stop();

  EXPECT_EQ(r->count(), 20u);
  const auto s = *bus.stats("q");
  EXPECT_EQ(s.listener_errors, 10u);
  EXPECT_EQ(s.delivered, 20u);
  const auto lines = log.lines();
  ASSERT_EQ(lines.size(), 1u);  // rate-limited: one line per minute per queue
  EXPECT_NE(lines[0].find("'q'"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("boom"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("slow_call"), std::string::npos) << lines[0];
}

TEST(EventBus, DropWarningIsRateLimitedAndNamesQueueAndKind) {
  // The rate limit runs on an injected clock, so the test decides when an interval has passed.
  auto fake_now = std::make_shared<std::atomic<std::int64_t>>(0);
  log_capture log;
  event_bus_options o;
  o.logger = log.logger();
  o.warning_interval = 10s;
  o.clock = [fake_now] {
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(fake_now->load()));
  };
  const auto advance = [&](std::chrono::nanoseconds d) { fake_now->fetch_add(d.count()); };

  event_bus bus(std::move(o));
  bus.add_queue("metrics", 2);
  // Dropped before start, so that the first report (the monitor's first pass) sees all three.
  bus.post(make(event_kind::slow_call));
  bus.post(make(event_kind::slow_call));
  for (int i = 0; i < 3; ++i) bus.post(make(event_kind::slow_call));
  auto g = std::make_shared<gated_listener>();
  bus.subscribe("metrics", g);
  bus.start();
  ASSERT_TRUE(log.wait_for_lines(1));
  auto lines = log.lines();
  EXPECT_NE(lines[0].find("'metrics'"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("slow_call 3"), std::string::npos) << lines[0];
  ASSERT_TRUE(g->wait_entered());
  bus.post(make(event_kind::slow_call));  // takes the slot the gate's event left: full again

  // More drops within the interval: no new line, however long we wait in real time.
  for (int i = 0; i < 4; ++i) bus.post(make(event_kind::call_completed));
  std::this_thread::sleep_for(700ms);  // the monitor polls every 250 ms while drops are pending
  EXPECT_EQ(log.lines().size(), 1u);

  advance(10s);
  ASSERT_TRUE(log.wait_for_lines(2));
  lines = log.lines();
  EXPECT_NE(lines[1].find("'metrics'"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("call_completed 4"), std::string::npos) << lines[1];
  EXPECT_EQ(lines[1].find("slow_call"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("7 in all"), std::string::npos) << lines[1];

  // Nothing new dropped: nothing more to say, even after another interval.
  advance(10s);
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(log.lines().size(), 2u);

  // The next drop after a quiet interval is reported at once.
  bus.post(make(event_kind::limit_hit));
  ASSERT_TRUE(log.wait_for_lines(3));
  EXPECT_NE(log.lines()[2].find("limit_hit 1"), std::string::npos) << log.lines()[2];

  g->open();
  bus.stop();
  EXPECT_EQ(log.lines().size(), 3u);
  EXPECT_EQ(bus.stats("metrics")->dropped, 8u);
}

TEST_F(QuietBus, ConcurrentPostersAccountExactly) {
  bus.add_queue("fast", 1024);
  bus.add_queue("slow", 64);
  struct counting final : event_listener {
    std::atomic<std::uint64_t> seen{0};
    bool slow = false;
    void on_event(const event&) override {
      if (slow) std::this_thread::yield();
      seen.fetch_add(1, std::memory_order_relaxed);
    }
  };
  auto fast = std::make_shared<counting>();
  auto slow = std::make_shared<counting>();
  slow->slow = true;
  bus.subscribe("fast", fast);
  bus.subscribe("slow", slow);
  bus.start();

  constexpr std::uint64_t per_poster = 50'000;
  auto threads = start_posters(per_poster, completed_or_opened);
  // Stats are readable while everything runs.
  for (int i = 0; i < 20; ++i) {
    for (const auto& s : bus.stats()) EXPECT_LE(s.delivered + s.dropped, s.posted);
    std::this_thread::sleep_for(1ms);
  }
  for (auto& th : threads) th.join();
  bus.stop();

  const auto all = bus.stats();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "fast");
  for (const auto& s : all) {
    SCOPED_TRACE(s.name);
    EXPECT_EQ(s.posted, posters * per_poster);
    EXPECT_EQ(s.posted, s.delivered + s.dropped);
    EXPECT_EQ(s.depth, 0u);
    EXPECT_EQ(dropped_of(s, event_kind::call_completed) +
                  dropped_of(s, event_kind::connection_opened),
              s.dropped);
  }
  EXPECT_EQ(fast->seen.load(), all[0].delivered);
  EXPECT_EQ(slow->seen.load(), all[1].delivered);
}

TEST_F(QuietBus, KindFilterLimitsDeliveryAndAfterStartWhatTheQueueTakes) {
  bus.add_queue("q", 16);
  auto r = std::make_shared<recorder>();
  bus.subscribe("q", r, {event_kind::connection_opened});
  bus.post(make(event_kind::slow_call, 0));  // before start: buffered, then filtered out
  bus.start();
  bus.post(make(event_kind::slow_call, 1));  // after start: not even queued
  bus.post(make(event_kind::connection_opened, 2));
  bus.post(make(event_kind::server_started, 3));
  bus.stop();
  EXPECT_EQ(values_of(r->events()), (std::vector<std::uint64_t>{2}));
  const auto s = *bus.stats("q");
  EXPECT_EQ(s.posted, 3u);
  EXPECT_EQ(s.delivered, 3u);
}

TEST_F(QuietBus, UnsubscribedListenerHearsNothingMore) {
  auto a = std::make_shared<recorder>();
  auto b = std::make_shared<recorder>();
  start_q(16, a, b);
  bus.post(make(event_kind::slow_call, 0));
  ASSERT_TRUE(a->wait_for_count(1));
  ASSERT_TRUE(b->wait_for_count(1));
  EXPECT_TRUE(bus.unsubscribe("q", a.get()));
  EXPECT_FALSE(bus.unsubscribe("q", a.get()));
  EXPECT_FALSE(bus.unsubscribe("nope", b.get()));
  bus.post(make(event_kind::slow_call, 1));
  bus.stop();
  EXPECT_EQ(a->count(), 1u);
  EXPECT_EQ(b->count(), 2u);
}

TEST_F(QuietBus, QueueAddedAfterStartRunsAtOnce) {
  bus.add_queue("first", 16);
  bus.start();
  bus.post(make(event_kind::slow_call, 0));  // before "second" exists: not for it
  bus.add_queue("second", 16);
  auto r = std::make_shared<recorder>();
  bus.subscribe("second", r);
  bus.post(make(event_kind::slow_call, 1));
  ASSERT_TRUE(r->wait_for_count(1));
  bus.stop();
  EXPECT_EQ(values_of(r->events()), (std::vector<std::uint64_t>{1}));
}

TEST_F(QuietBus, PostStampsTheTimeUnlessGiven) {
  auto r = std::make_shared<recorder>();
  queue_q(16, r);
  const auto before = std::chrono::system_clock::now();
  bus.post(make(event_kind::connection_opened));
  event given = make(event_kind::connection_closed);
  given.timestamp = std::chrono::system_clock::time_point(std::chrono::seconds(1234));
  given.peer = "127.0.0.1:4242";
  given.detail = "idle timeout, a reason long enough to defeat the small-string buffer";
  bus.post(given);
  bus.stop();
  const auto events = r->events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_GE(events[0].timestamp, before);
  EXPECT_EQ(events[1].timestamp, given.timestamp);
  EXPECT_EQ(events[1].peer, given.peer);
  EXPECT_EQ(events[1].detail, given.detail);
}

}  // namespace
