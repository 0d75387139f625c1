// Typed coroutines over loopback (ringrpc/typed_task.hpp): a generated stub's `_co` form
// awaited from a coroutine, and a typed coroutine handler that proxies a typed call to a
// second server; request verification and error answers of typed coroutine handlers.

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>

#include "gen_test_ringrpc.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/server.hpp"
#include "ringrpc/typed_task.hpp"
#include "seam/server_seam.hpp"
#include "test_support.hpp"

namespace ringrpc::test {
namespace {

using namespace std::chrono_literals;

class echo_backend final : public TestService::service {
 public:
  result<EchoReply> Echo(call_context&, const EchoRequest& req) override {
    flatbuffers::FlatBufferBuilder fbb;
    const std::string text = "backend: " + (req.text() ? req.text()->str() : std::string());
    return {fbb, CreateEchoReplyDirect(fbb, text.c_str(), req.number())};
  }
};

struct typed_pair {
  std::unique_ptr<server> backend = std::make_unique<server>(threads(1, 2));
  std::unique_ptr<server> proxy = std::make_unique<server>(threads(1, 1));
  std::optional<client> to_backend;

  typed_pair() {
    register_service(*backend, std::make_shared<echo_backend>());
    backend->start();
    to_backend.emplace(client::connect("127.0.0.1", backend->port()));
  }
  ~typed_pair() {
    proxy->stop();
    backend->stop();
  }
};

TEST(TypedCoroutines, StubCoFormFromAPlainCoroutine) {
  typed_pair p;
  TestService::stub stub(*p.to_backend);
  std::promise<std::string> seen;
  auto body = [&]() -> task<void> {
    flatbuffers::FlatBufferBuilder fbb;
    result<EchoReply> r = co_await stub.Echo_co(fbb, CreateEchoRequestDirect(fbb, "co", 7));
    EXPECT_EQ(fbb.GetSize(), 0u) << "the builder is cleared once the call is sent";
    seen.set_value(r.ok() ? r->text()->str() + " " + std::to_string(r->number()) : r.error().describe());
  };
  start_detached(body(), [](task_outcome<void>& o) { EXPECT_TRUE(o.ok()); });
  EXPECT_EQ(seen.get_future().get(), "backend: co 7");
}

TEST(TypedCoroutines, TypedHandlerProxiesATypedCall) {
  typed_pair p;
  TestService::stub backend(*p.to_backend);
  add_typed_coroutine_method<EchoRequest, EchoReply>(
      *p.proxy, "TestService.Echo",
      [&backend](deferred_reply&, const EchoRequest& req) -> task<result<EchoReply>> {
        const std::string text = req.text() ? req.text()->str() : std::string();
        if (text == "refuse") throw rpc_exception(status::permission_denied, "not this one");
        if (text == "error") co_return rpc_error(status::not_found, "no such thing");
        flatbuffers::FlatBufferBuilder fbb;
        result<EchoReply> down = co_await backend.Echo_co(fbb, CreateEchoRequestDirect(fbb, text.c_str(), req.number()));
        // `req` is still valid after the suspension: the request stays until the answer.
        if (!down.ok()) co_return down.error();
        const std::string proxied = "proxy(" + down->text()->str() + ")";
        co_return result<EchoReply>(fbb, CreateEchoReplyDirect(fbb, proxied.c_str(), req.number() + 1));
      });
  p.proxy->start();
  auto c = client::connect("127.0.0.1", p.proxy->port());
  TestService::stub stub(c);
  flatbuffers::FlatBufferBuilder fbb;
  for (int i = 0; i < 50; ++i) {
    result<EchoReply> r = stub.Echo(fbb, CreateEchoRequestDirect(fbb, "hi", i));
    ASSERT_TRUE(r.ok()) << r.error().describe();
    EXPECT_EQ(r->text()->str(), "proxy(backend: hi)");
    EXPECT_EQ(r->number(), i + 1);
  }
  result<EchoReply> refused = stub.Echo(fbb, CreateEchoRequestDirect(fbb, "refuse"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, status::permission_denied);
  EXPECT_EQ(refused.error().message, "not this one");
  result<EchoReply> missing = stub.Echo(fbb, CreateEchoRequestDirect(fbb, "error"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, status::not_found);
  // Not a FlatBuffer at all: bad_request, and the handler never runs.
  call_result raw = c.call("TestService.Echo", "\x01\x02");
  EXPECT_EQ(raw.code, status::bad_request);
  EXPECT_TRUE(eventually([&] { return ringrpc::detail::server_seam::coroutine_frames(*p.proxy) == 0; }));
}

}  // namespace
}  // namespace ringrpc::test
