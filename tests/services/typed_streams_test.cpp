// Typed streams (ringrpc/typed_stream.hpp) over loopback: gen_test.fbs's Streamer, one method
// of each kind, through the generated stub and service base; messages that do not verify on
// either side; reflection's kinds.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gen_test_ringrpc.hpp"
#include "ringrpc/channel.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/reflection.hpp"
#include "ringrpc/server.hpp"
#include "ringrpc/task.hpp"
#include "ringrpc/typed_stream.hpp"
#include "streamer_service.hpp"
#include "test_support.hpp"

namespace ringrpc::test {
namespace {

using ::testing::HasSubstr;

// Bytes no FlatBuffers verifier takes: the root offset points far beyond the buffer.
const std::string garbage(16, '\xff');

class typed_streams : public ::testing::Test {
 protected:
  void SetUp() override {
    _server = std::make_unique<server>(test::threads(1, 2));
    register_service(*_server, std::make_shared<streamer_service>());
    _server->start();
    _client.emplace(client::connect("127.0.0.1", _server->port()));
  }
  void TearDown() override {
    _client.reset();
    _server->stop();
  }
  client& connection() { return *_client; }
  Streamer::stub stub() { return Streamer::stub(*_client); }

 private:
  std::unique_ptr<server> _server;
  std::optional<client> _client;
};

TEST_F(typed_streams, server_stream_sends_typed_replies) {
  flatbuffers::FlatBufferBuilder fbb;
  auto s = stub().Generate(fbb, CreateStreamRequestDirect(fbb, 5, "hi"));
  EXPECT_EQ(fbb.GetSize(), 0u);  // cleared for the next request
  for (std::uint32_t i = 0; i < 5; ++i) {
    auto m = s.read();
    ASSERT_TRUE(m.has_value());
    ASSERT_TRUE(m->ok()) << m->error().describe();
    EXPECT_EQ((*m)->index(), i);
    EXPECT_EQ((*m)->text()->str(), "hi");
  }
  EXPECT_FALSE(s.read().has_value());
  const call_result end = s.finish();
  EXPECT_TRUE(end.ok()) << end.message;
}

TEST_F(typed_streams, server_stream_keeps_order_across_100000_messages) {
  flatbuffers::FlatBufferBuilder fbb;
  auto s = stub().Generate(fbb, CreateStreamRequestDirect(fbb, 100000, "x"));
  std::uint32_t next = 0;
  while (auto m = s.read()) {
    ASSERT_TRUE(m->ok()) << m->error().describe();
    ASSERT_EQ((*m)->index(), next);
    ++next;
  }
  EXPECT_EQ(next, 100000u);
  EXPECT_TRUE(s.finish().ok());
}

TEST_F(typed_streams, client_stream_answers_once) {
  auto s = stub().Collect();
  flatbuffers::FlatBufferBuilder fbb;
  for (const char* text : {"a", "b", "c"}) {
    ASSERT_EQ(s.write_wait(fbb, CreateStreamRequestDirect(fbb, 0, text)), write_result::ok);
  }
  ASSERT_TRUE(s.half_close());
  const result<StreamReply> answer = s.finish_reply();
  ASSERT_TRUE(answer.ok()) << answer.error().describe();
  EXPECT_EQ(answer->index(), 3u);
  EXPECT_EQ(answer->text()->str(), "c");
}

// The coroutine forms (ringrpc/stream_coro.hpp): a server stream read with co_read, a client
// stream written with co_write and answered through co_finish_reply, with no thread waiting.
TEST_F(typed_streams, coroutines_read_and_write_typed_streams) {
  auto body = [this]() -> task<std::uint32_t> {
    flatbuffers::FlatBufferBuilder fbb;
    auto generated = stub().Generate(fbb, CreateStreamRequestDirect(fbb, 300, "co"));
    std::uint32_t next = 0;
    while (auto m = co_await generated.co_read()) {
      EXPECT_TRUE(m->ok()) << m->error().describe();
      if (!m->ok()) break;
      EXPECT_EQ((*m)->index(), next);
      EXPECT_EQ((*m)->text()->str(), "co");
      ++next;
    }
    EXPECT_TRUE((co_await generated.co_finish()).ok());
    auto collected = stub().Collect();
    for (std::uint32_t i = 0; i < 200; ++i) {
      EXPECT_EQ(co_await collected.co_write(fbb, CreateStreamRequestDirect(fbb, 0, std::to_string(i).c_str())),
                write_result::ok);
    }
    EXPECT_TRUE(collected.half_close());
    const result<StreamReply> answer = co_await collected.co_finish_reply();
    EXPECT_TRUE(answer.ok()) << answer.error().describe();
    if (answer.ok()) {
      EXPECT_EQ(answer->index(), 200u);
      EXPECT_EQ(answer->text()->str(), "199");
    }
    co_return next;
  };
  std::promise<std::uint32_t> done;
  start_detached(body(), [&done](task_outcome<std::uint32_t>& o) {
    try {
      done.set_value(o.value());
    } catch (...) {
      done.set_exception(std::current_exception());
    }
  });
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(f.get(), 300u);
}

TEST_F(typed_streams, bidi_stream_echoes_100000_messages_in_order) {
  auto s = stub().Echo();
  constexpr std::uint32_t count = 100000;
  std::thread writer([&] {
    flatbuffers::FlatBufferBuilder fbb;
    for (std::uint32_t i = 0; i < count; ++i) {
      if (s.write_wait(fbb, CreateStreamRequestDirect(fbb, 0, std::to_string(i).c_str())) != write_result::ok) return;
    }
    s.half_close();
  });
  std::uint32_t next = 0;
  while (auto m = s.read()) {
    ASSERT_TRUE(m->ok()) << m->error().describe();
    if ((*m)->index() != next || (*m)->text()->str() != std::to_string(next)) {
      s.cancel();
      break;
    }
    ++next;
  }
  writer.join();
  EXPECT_EQ(next, count);
  EXPECT_TRUE(s.finish().ok());
}

TEST_F(typed_streams, a_client_message_that_does_not_verify_ends_the_stream_with_bad_request) {
  client_stream s = connection().open_stream(Streamer::Echo_method, stream_kind::bidi);
  ASSERT_EQ(s.write_wait(garbage), write_result::ok);
  const call_result end = s.finish(std::chrono::seconds(10));
  EXPECT_EQ(end.error, call_error::server_status);
  EXPECT_EQ(end.code, status::bad_request);
  EXPECT_EQ(end.message,
            "Streamer.Echo: message is not a valid ringrpc.test.StreamRequest (FlatBuffers verification failed)");
}

TEST_F(typed_streams, a_server_stream_request_that_does_not_verify_is_a_bad_request) {
  const std::span<const std::byte> request(reinterpret_cast<const std::byte*>(garbage.data()), garbage.size());
  client_stream s = connection().open_stream(Streamer::Generate_method, stream_kind::server, request);
  const call_result end = s.finish(std::chrono::seconds(10));
  EXPECT_EQ(end.code, status::bad_request);
  EXPECT_THAT(end.message, HasSubstr("Streamer.Generate: request is not a valid ringrpc.test.StreamRequest"));
}

TEST(typed_streams_client, a_server_message_that_does_not_verify_ends_the_stream_with_protocol_error) {
  server srv(test::threads(1, 1));
  // A raw method in Streamer.Generate's place, answering bytes that are no StreamReply.
  srv.add_stream_method(Streamer::Generate_method, stream_kind::server, [](server_stream& s, auto) {
    s.write(garbage);
    s.write(garbage);
    return std::make_unique<stream_handler>();
  });
  srv.start();
  client c = client::connect("127.0.0.1", srv.port());
  flatbuffers::FlatBufferBuilder fbb;
  auto s = Streamer::stub(c).Generate(fbb, CreateStreamRequestDirect(fbb, 1, "x"));
  auto m = s.read(std::chrono::seconds(10));
  ASSERT_TRUE(m.has_value());
  ASSERT_FALSE(m->ok());
  EXPECT_EQ(m->error().kind, call_error::protocol_error);
  EXPECT_THAT(m->error().message, HasSubstr("Streamer.Generate: reply is not a valid ringrpc.test.StreamReply"));
  EXPECT_FALSE(s.read(std::chrono::seconds(1)).has_value());  // nothing after it
  const call_result end = s.finish();
  EXPECT_EQ(end.error, call_error::protocol_error);
  EXPECT_THAT(end.message, HasSubstr("is not a valid ringrpc.test.StreamReply"));
  srv.stop();
}

TEST(typed_streams_client, a_method_not_overridden_answers_unknown_method) {
  class nothing final : public Streamer::service {};
  server srv(test::threads(1, 1));
  register_service(srv, std::make_shared<nothing>());
  srv.start();
  client c = client::connect("127.0.0.1", srv.port());
  auto s = Streamer::stub(c).Echo();
  const call_result end = s.finish(std::chrono::seconds(10));
  EXPECT_EQ(end.code, status::unknown_method);
  EXPECT_THAT(end.message, HasSubstr("Streamer.Echo is not implemented"));
  srv.stop();
}

TEST(typed_streams_client, a_stub_over_a_channel_returns_an_ended_stream) {
  channel ch = channel::create("127.0.0.1:1");
  auto s = Streamer::stub(ch).Echo();
  EXPECT_TRUE(s.ended());
  const call_result end = s.finish();
  EXPECT_EQ(end.error, call_error::client_closed);
  EXPECT_THAT(end.message, HasSubstr("streams on a channel are not built yet"));
}

// An allocator that throws bad_alloc once armed: a Finish() that must grow the buffer then runs
// out of memory.
class failing_allocator final : public flatbuffers::DefaultAllocator {
 public:
  std::uint8_t* allocate(std::size_t size) override {
    if (armed) throw std::bad_alloc();
    return DefaultAllocator::allocate(size);
  }
  bool armed = false;
};

// A reply followed by `padding` bytes nothing points to (FlatBuffers allows them), aligned to 32:
// Finish() then pads the buffer to 32 too, which the buffer's room may not hold.
flatbuffers::Offset<StreamReply> reply_with_padding(flatbuffers::FlatBufferBuilder& fbb, std::size_t padding) {
  auto root = CreateStreamReplyDirect(fbb, 0, "x");
  fbb.ForceVectorAlignment(padding, 1, 32);
  fbb.CreateVector(std::vector<std::uint8_t>(padding));
  return root;
}

// A padding after which Finish() outgrows the buffer: where that is depends on how FlatBuffers
// grows its buffer, so try each until one does.
std::size_t padding_that_outgrows_the_buffer() {
  for (std::size_t n = 0; n < 1024; ++n) {
    failing_allocator a;
    flatbuffers::FlatBufferBuilder fbb(64, &a);
    auto root = reply_with_padding(fbb, n);
    a.armed = true;
    try {
      fbb.Finish(root);
    } catch (const std::bad_alloc&) {
      return n;
    }
  }
  return 0;
}

// Runs `send` (a typed write or finish) on a stream of `kind` with a builder out of memory at
// Finish(); returns the stream's end as the client sees it.
template <class Send>
call_result run_out_of_memory(stream_kind kind, Send send) {
  const std::size_t n = padding_that_outgrows_the_buffer();
  EXPECT_NE(n, 0u);
  server srv(test::threads(1, 1));
  srv.add_stream_method("Oom.Send", kind, [&](server_stream& raw, auto) -> std::unique_ptr<stream_handler> {
    typed_server_stream<StreamReply> typed(raw);
    failing_allocator a;
    flatbuffers::FlatBufferBuilder fbb(64, &a);
    auto root = reply_with_padding(fbb, n);
    a.armed = true;
    send(typed, fbb, root);
    return nullptr;
  });
  srv.start();
  client c = client::connect("127.0.0.1", srv.port());
  client_stream s = c.open_stream("Oom.Send", kind);
  call_result end = s.finish(std::chrono::seconds(10));
  srv.stop();
  return end;
}

TEST(typed_streams_server, out_of_memory_in_write_ends_the_stream_with_resource_exhausted) {
  std::atomic<int> written{-1};
  const call_result end = run_out_of_memory(stream_kind::server, [&](auto& stream, auto& fbb, auto root) {
    written = static_cast<int>(stream.write(fbb, root));
    EXPECT_EQ(fbb.GetSize(), 0u);  // cleared all the same
  });
  EXPECT_EQ(written.load(), static_cast<int>(write_result::closed));
  EXPECT_EQ(end.code, status::resource_exhausted);
  EXPECT_EQ(end.message, "server is out of memory");
}

TEST(typed_streams_server, out_of_memory_in_finish_ends_the_stream_with_resource_exhausted) {
  std::atomic<int> finished{-1};
  const call_result end = run_out_of_memory(stream_kind::client, [&](auto& stream, auto& fbb, auto root) {
    finished = stream.finish(fbb, root) ? 1 : 0;
  });
  EXPECT_EQ(finished.load(), 0);
  EXPECT_EQ(end.code, status::resource_exhausted);
  EXPECT_EQ(end.message, "server is out of memory");
}

TEST(typed_streams_server, register_service_registers_nothing_when_a_stream_name_is_taken) {
  server srv(test::threads(1, 1));
  // Collect comes after Generate: Generate is added before the taken name refuses.
  srv.add_stream_method(Streamer::Collect_method, stream_kind::client,
                        [](server_stream&, auto) { return std::make_unique<stream_handler>(); });
  EXPECT_THROW(register_service(srv, std::make_shared<streamer_service>()), std::invalid_argument);
  EXPECT_FALSE(srv.unregister_endpoint(Streamer::service_name));
  EXPECT_FALSE(srv.unregister_endpoint(Streamer::Generate_method));
  EXPECT_FALSE(srv.unregister_endpoint(Streamer::Echo_method));
  EXPECT_TRUE(srv.unregister_endpoint(Streamer::Collect_method));  // the first owner's stays
  EXPECT_NO_THROW(register_service(srv, std::make_shared<streamer_service>()));
}

TEST(typed_streams_reflection, list_shows_each_methods_kind) {
  const auto doc = nlohmann::json::parse(reflection_list_json({Streamer::schema(), TestService::schema()}));
  std::map<std::string, std::string> kinds;
  for (const auto& svc : doc.at("services")) {
    for (const auto& m : svc.at("methods")) kinds[m.at("method")] = m.value("streaming", "");
  }
  EXPECT_EQ(kinds.at("Streamer.Generate"), "server");
  EXPECT_EQ(kinds.at("Streamer.Collect"), "client");
  EXPECT_EQ(kinds.at("Streamer.Echo"), "bidi");
  EXPECT_EQ(kinds.at("TestService.Echo"), "");  // unary: no "streaming" at all
}

}  // namespace
}  // namespace ringrpc::test
