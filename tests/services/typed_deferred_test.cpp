// Typed methods that answer after returning (ringrpc::defer_reply, ringrpc::deferred): from
// another thread, with a message or an error, dropped unanswered, and `deferred` returned
// without a deferred reply. Over loopback with the code ringrpc-gen writes for gen_test.fbs.

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "gen_test_ringrpc.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/server.hpp"
#include "ringrpc/service.hpp"

namespace ringrpc::test {
namespace {

using namespace std::chrono_literals;

/// One worker thread that runs what the methods leave for later.
class later_queue {
 public:
  later_queue() : _thread([this] { run(); }) {}
  ~later_queue() {
    {
      std::lock_guard lock(_mu);
      _done = true;
    }
    _cv.notify_one();
    _thread.join();
  }
  void push(std::function<void()> f) {
    {
      std::lock_guard lock(_mu);
      _work.push_back(std::move(f));
    }
    _cv.notify_one();
  }

 private:
  void run() {
    std::unique_lock lock(_mu);
    for (;;) {
      _cv.wait(lock, [this] { return _done || !_work.empty(); });
      if (_work.empty()) return;
      auto f = std::move(_work.front());
      _work.pop_front();
      lock.unlock();
      f();
      lock.lock();
    }
  }
  std::mutex _mu;
  std::condition_variable _cv;
  std::deque<std::function<void()>> _work;
  bool _done = false;
  std::thread _thread;
};

class deferring_service final : public TestService::service {
 public:
  explicit deferring_service(later_queue& q) : _later(q) {}

  // Echo: answers later, on the queue's thread, with the text it was sent.
  result<EchoReply> Echo(call_context& call, const EchoRequest& req) override {
    // Shared: std::function wants a copyable callable, and a deferred_result only moves.
    auto later = std::make_shared<deferred_result<EchoReply>>(defer_reply<EchoReply>(call));
    std::string text = req.text() ? req.text()->str() : std::string();  // req dies on return
    _later.push([later, text] {
      std::this_thread::sleep_for(20ms);
      flatbuffers::FlatBufferBuilder fbb;
      EXPECT_TRUE(later->reply(fbb, CreateEchoReplyDirect(fbb, ("later: " + text).c_str())));
      EXPECT_FALSE(later->fail(status::internal, "second answer")) << "only the first answer counts";
    });
    return deferred;
  }

  // Fail: how 0 answers an error later, 1 drops the deferred reply unanswered, 2 returns
  // `deferred` without deferring.
  result<EchoReply> Fail(call_context& call, const FailRequest& req) override {
    if (req.how() == 2) return deferred;
    auto later = std::make_shared<deferred_result<EchoReply>>(defer_reply<EchoReply>(call));
    const auto code = static_cast<status>(req.code());
    if (req.how() == 1) {
      _later.push([later] { *later = deferred_result<EchoReply>(); });
      return deferred;
    }
    _later.push([later, code] { EXPECT_TRUE(later->reply(result<EchoReply>(rpc_error(code, "later error")))); });
    return deferred;
  }

 private:
  later_queue& _later;
};

class typed_deferred : public ::testing::Test {
 protected:
  void SetUp() override {
    server_options o;
    o.port = 0;
    _server.emplace(o);
    register_service(*_server, std::make_shared<deferring_service>(_queue));
    _server->start();
    _client.emplace(client::connect("127.0.0.1", _server->port()));
    _options.timeout = 5s;
  }
  void TearDown() override {
    _client.reset();
    _server->stop();
  }
  result<EchoReply> fail(std::uint16_t code, std::uint8_t how) {
    TestService::stub stub(*_client);
    flatbuffers::FlatBufferBuilder fbb;
    return stub.Fail(fbb, CreateFailRequestDirect(fbb, code, "", how), _options);
  }

  later_queue _queue;
  std::optional<server> _server;
  std::optional<client> _client;
  call_options _options;
};

TEST_F(typed_deferred, answers_from_another_thread) {
  TestService::stub stub(*_client);
  flatbuffers::FlatBufferBuilder fbb;
  const auto r = stub.Echo(fbb, CreateEchoRequestDirect(fbb, "hi"), _options);
  ASSERT_TRUE(r.ok()) << r.error().describe();
  EXPECT_STREQ(r->text()->c_str(), "later: hi");
}

TEST_F(typed_deferred, answers_an_error_later) {
  const auto r = fail(static_cast<std::uint16_t>(status::bad_request), 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, status::bad_request);
  EXPECT_EQ(r.error().message, "later error");
}

TEST_F(typed_deferred, dropped_unanswered_is_internal) {
  const auto r = fail(0, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, status::internal);
  EXPECT_NE(r.error().message.find("dropped"), std::string::npos) << r.error().message;
}

TEST_F(typed_deferred, deferred_without_defer_reply_is_internal) {
  const auto r = fail(0, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, status::internal);
  EXPECT_NE(r.error().message.find("without defer_reply"), std::string::npos) << r.error().message;
}

TEST(typed_result, deferred_is_neither_message_nor_error_to_send) {
  const result<EchoReply> r = deferred;
  EXPECT_TRUE(r.is_deferred());
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace ringrpc::test
