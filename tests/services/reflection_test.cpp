// The reflection endpoint: what reflection.list and reflection.schema answer, over loopback
// and as a function, and which schemas add_reflection refuses.

#include <flatbuffers/idl.h>
#include <flatbuffers/reflection_generated.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gen_test_ringrpc.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/reflection.hpp"
#include "ringrpc/server.hpp"
#include "test_support.hpp"

namespace ringrpc::test {
namespace {

// A binary schema made here, 8-byte aligned, as flatc --binary --schema makes them.
class bfbs_of {
 public:
  explicit bfbs_of(const std::string& schema) {
    flatbuffers::Parser p;
    if (!p.Parse(schema.c_str(), nullptr, "x.fbs")) throw std::runtime_error(p.error_);
    p.Serialize();
    _size = p.builder_.GetSize();
    _storage.resize((_size + 7) / 8);
    std::memcpy(_storage.data(), p.builder_.GetBufferPointer(), _size);
  }
  std::span<const std::uint8_t> bytes() const { return {reinterpret_cast<const std::uint8_t*>(_storage.data()), _size}; }

 private:
  std::vector<std::uint64_t> _storage;
  std::size_t _size = 0;
};

TEST(reflection_list_json, lists_services_methods_ids_and_types) {
  const auto doc = nlohmann::json::parse(reflection_list_json({TestService::schema(), Counter::schema()}));
  ASSERT_EQ(doc["services"].size(), 2u);
  // Sorted by name.
  const auto& counter = doc["services"][0];
  EXPECT_EQ(counter["name"], "Counter");
  EXPECT_EQ(counter["full_name"], "ringrpc.test.Counter");
  const auto& ts = doc["services"][1];
  EXPECT_EQ(ts["name"], "TestService");
  ASSERT_EQ(ts["methods"].size(), 4u);
  const auto& echo = ts["methods"][0];
  EXPECT_EQ(echo["name"], "Echo");
  EXPECT_EQ(echo["method"], "TestService.Echo");
  EXPECT_EQ(echo["id"].get<std::uint32_t>(), TestService::Echo_id);
  EXPECT_EQ(echo["request"], "ringrpc.test.EchoRequest");
  EXPECT_EQ(echo["reply"], "ringrpc.test.EchoReply");
  std::vector<std::string> names;
  for (const auto& m : ts["methods"]) names.push_back(m["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"Echo", "Fail", "Sleep", "Unimplemented"}));
}

TEST(reflection_list_json, only_the_services_named) {
  const auto doc = nlohmann::json::parse(reflection_list_json({TestService::schema()}));
  ASSERT_EQ(doc["services"].size(), 1u);
  EXPECT_EQ(doc["services"][0]["name"], "TestService");
  // An empty name: every service of the schema (TestService, Counter, Streamer).
  const auto all = nlohmann::json::parse(reflection_list_json({{"", TestService::schema().bfbs}}));
  EXPECT_EQ(all["services"].size(), 3u);
}

TEST(reflection_list_json, refuses_bad_schemas) {
  const std::vector<std::uint64_t> junk(8, 0x1234);
  const std::span<const std::uint8_t> junk_bytes(reinterpret_cast<const std::uint8_t*>(junk.data()), 64);
  EXPECT_THROW(reflection_list_json({{"TestService", junk_bytes}}), std::invalid_argument);
  EXPECT_THROW(reflection_list_json({{"Nope", TestService::schema().bfbs}}), std::invalid_argument);
  // Misaligned: the verifier and the readers of its scalars need the alignment.
  const auto b = TestService::schema().bfbs;
  std::vector<std::uint64_t> copy(b.size() / 8 + 2);
  auto* odd = reinterpret_cast<std::uint8_t*>(copy.data()) + 4;
  std::memcpy(odd, b.data(), b.size());
  EXPECT_THROW(reflection_list_json({{"TestService", {odd, b.size()}}}), std::invalid_argument);

  // Two services served under one endpoint name.
  const bfbs_of a("namespace a; table T {} rpc_service S { M(T): T; }");
  const bfbs_of other("namespace b; table T {} rpc_service S { M(T): T; }");
  try {
    reflection_list_json({{"S", a.bytes()}, {"S", other.bytes()}});
    FAIL() << "accepted a.S and b.S";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("a.S and b.S"), std::string::npos) << e.what();
  }
  // One service from two different schemas.
  const bfbs_of a2("namespace a; table T { x: int; } rpc_service S { M(T): T; }");
  EXPECT_THROW(reflection_list_json({{"S", a.bytes()}, {"S", a2.bytes()}}), std::invalid_argument);
  // The same service twice from the same schema is fine.
  EXPECT_NO_THROW(reflection_list_json({{"S", a.bytes()}, {"", a.bytes()}}));
}

class reflection_endpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    _server = std::make_unique<server>(test::threads(1, 1));
    add_reflection(*_server, {TestService::schema(), Counter::schema()});
    _server->start();
    _client.emplace(client::connect("127.0.0.1", _server->port()));
  }
  void TearDown() override {
    _client.reset();
    _server->stop();
  }
  client& connection() { return *_client; }

 private:
  std::unique_ptr<server> _server;
  std::optional<client> _client;
};

TEST_F(reflection_endpoint, list_answers_the_json) {
  const auto r = connection().call(reflection_list_method, std::string_view());
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.payload_string(), reflection_list_json({TestService::schema(), Counter::schema()}));
}

TEST_F(reflection_endpoint, schema_answers_the_bfbs_by_either_name) {
  const auto expected = TestService::schema().bfbs;
  for (const std::string_view name : {"TestService", "ringrpc.test.TestService"}) {
    const auto r = connection().call(reflection_schema_method, name);
    ASSERT_TRUE(r.ok()) << r.message;
    ASSERT_EQ(r.payload.size(), expected.size());
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), reinterpret_cast<const std::uint8_t*>(r.payload.data())));
    // It is a binary schema with the service and the types of the included file.
    flatbuffers::Verifier v(reinterpret_cast<const std::uint8_t*>(r.payload.data()), r.payload.size());
    ASSERT_TRUE(reflection::VerifySchemaBuffer(v));
    const auto* schema = reflection::GetSchema(r.payload.data());
    EXPECT_NE(schema->services()->LookupByKey("ringrpc.test.TestService"), nullptr);
    EXPECT_NE(schema->objects()->LookupByKey("ringrpc.test.Point"), nullptr);
  }
}

TEST_F(reflection_endpoint, unknown_service_and_method) {
  const auto r = connection().call(reflection_schema_method, std::string_view("Nope"));
  EXPECT_EQ(r.code, status::bad_request);
  EXPECT_EQ(r.message, "reflection.schema: no served service named 'Nope'");
  const auto m = connection().call("reflection.nope", std::string_view());
  EXPECT_EQ(m.code, status::unknown_method);
}

}  // namespace
}  // namespace ringrpc::test
