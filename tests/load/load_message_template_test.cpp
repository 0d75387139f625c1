// Placeholders in --data for typed requests (message_template.hpp): the protobuf and FlatBuffers
// plans render messages that decode, with the libraries' own parsers, to the request with each
// call's values; bad placements are refused at start-up; a call allocates nothing.

#include "message_template.hpp"

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <new>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>

#include "grpc_request.hpp"
#include "grpc_request_loader.hpp"
#include "typed_json.hpp"
#include "typed_template.hpp"

// GCC sees the replaced operators inlined into std::allocator and warns of a mismatch there is not.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

// Every allocation of the process, counted: a rendering must add none once its buffer has grown.
namespace {
std::atomic<unsigned long> allocations{0};
}  // namespace
void* operator new(std::size_t n) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n == 0 ? 1 : n);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace ringrpc::load {
namespace {

// A .proto of nested messages and number types, written once into a temporary directory.
const std::string& test_proto() {
  static const std::string path = [] {
    const std::string dir = ::testing::TempDir() + "msgtpl" + std::to_string(::getpid());
    std::system(("mkdir -p " + dir).c_str());
    std::ofstream(dir + "/t.proto") << R"(syntax = "proto3";
package t;
message Inner { int32 a = 1; string s = 2; double d = 3; }
message Req {
  int32 id = 1; sint64 z = 2; fixed32 f = 3; uint64 u = 4; string name = 5; Inner inner = 6;
  bool flag = 7; repeated int32 list = 8; float x = 9; int64 keep = 10;
}
service S { rpc M(Req) returns (Req); }
)";
    return dir + "/t.proto";
  }();
  return path;
}

nlohmann::json decode_proto(const std::vector<std::byte>& bytes) {
  const loaded_request empty(test_proto(), {}, "t.S/M", "{}");
  EXPECT_TRUE(empty.request->ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
  std::string json;
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(*empty.request, &json, o).ok());
  return nlohmann::json::parse(json);
}

TEST(message_template, protobuf_fields_take_each_calls_values) {
  const auto t = grpc_template_from_json(
      test_proto(), {}, "t.S/M",
      R"({"id": {seq}, "z": {seq}, "f": {random:7}, "u": {seq}, "name": "n{seq}-{random:3}{x}", "keep": 42,
          "inner": {"a": {random:100}, "s": "in {seq}", "d": {seq}}, "x": {seq}, "list": [1, 2]})");
  template_renderer r(std::make_shared<template_data>(3));
  std::set<std::int64_t> ids;
  std::vector<std::byte> out;
  for (std::uint64_t seq = 0; seq < 300; ++seq) {
    out.clear();
    t->render(r, {seq}, out);
    const nlohmann::json j = decode_proto(out);
    const std::string n = std::to_string(seq);
    ids.insert(j.value("id", std::int64_t{0}));  // proto3 JSON leaves out zeros
    EXPECT_EQ(j.value("z", std::string("0")), n);  // 64-bit integers are strings in proto3 JSON
    EXPECT_EQ(j.value("u", std::string("0")), n);
    EXPECT_LT(j.value("f", 0), 7);
    const std::string name = j["name"];
    ASSERT_TRUE(name.starts_with("n" + n + "-")) << name;
    EXPECT_EQ(name.size(), n.size() + 6) << name;  // "n" N "-" R "{x}"
    EXPECT_LT(name[n.size() + 2], '3');
    EXPECT_TRUE(name.ends_with("{x}"));
    ASSERT_TRUE(j.contains("inner"));
    EXPECT_LT(j["inner"].value("a", 0), 100);
    EXPECT_EQ(j["inner"]["s"], "in " + n);
    EXPECT_EQ(j["inner"].value("d", 0.0), static_cast<double>(seq));
    EXPECT_EQ(j.value("x", 0.0), static_cast<double>(seq));
    EXPECT_EQ(j["keep"], "42");
    EXPECT_EQ(j["list"], nlohmann::json::parse("[1, 2]"));
  }
  EXPECT_EQ(ids.size(), 300u);
  EXPECT_EQ(*ids.begin(), 0);
}

void expect_refused(const std::string& json, const std::string& why) {
  try {
    (void)grpc_template_from_json(test_proto(), {}, "t.S/M", json);
    ADD_FAILURE() << json << " was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

TEST(message_template, protobuf_refuses_what_a_field_cannot_hold) {
  expect_refused(R"({"flag": {random:2}})", "were converted as the numbers from");
  expect_refused(R"({"id": {random:2147483649}})", "'t.Req.id' holds up to 2147483647");
  expect_refused(R"({"id": {line}})", "{line} is text");
  expect_refused(R"({"list": [{seq}]})", "outside an array");
  expect_refused(R"({"name": {seq}})", "were converted as the numbers from");
  expect_refused(R"({"id": "{seq}"})", "were converted as the numbers from");
  EXPECT_NO_THROW(grpc_template_from_json(test_proto(), {}, "t.S/M", R"({"id": {random:2147483648}})"));
}

std::string source_dir() {
  const char* d = std::getenv("RINGRPC_TEST_SOURCE");
  return d != nullptr ? d : "tests";
}

TEST(message_template, flatbuffers_fields_take_each_calls_values) {
  auto schema = tools::typed_schema::from_file(source_dir() + "/services/gen_test.fbs", {source_dir() + "/services"});
  const std::string type = "ringrpc.test.EchoRequest";
  const auto t = typed_template_from_json(
      schema, type, R"({"text": "u{random:1000}:{seq}{", "number": {seq}, "point": {"x": {random:5}, "y": 2.5},
                       "color": "Blue", "values": [1.5]})");
  template_renderer r(std::make_shared<template_data>(3));
  std::vector<std::byte> out;
  std::set<std::int64_t> numbers;
  for (std::uint64_t seq = 0; seq < 300; ++seq) {
    out.clear();
    t->render(r, {seq}, out);
    const std::span<const std::uint8_t> bytes(reinterpret_cast<const std::uint8_t*>(out.data()), out.size());
    // to_json verifies the buffer against the schema first.
    const nlohmann::json j = nlohmann::json::parse(schema.to_json(type, bytes, {true, true}));
    numbers.insert(j["number"].get<std::int64_t>());
    const std::string text = j["text"];
    const auto colon = text.find(':');
    ASSERT_TRUE(text.starts_with("u") && colon != std::string::npos) << text;
    EXPECT_LT(std::stoi(text.substr(1, colon - 1)), 1000);
    EXPECT_EQ(text.substr(colon + 1), std::to_string(seq) + "{");
    EXPECT_LT(j["point"]["x"].get<double>(), 5);
    EXPECT_EQ(j["point"]["y"].get<double>(), 2.5);
    EXPECT_EQ(j["color"], "Blue");
    EXPECT_EQ(j["values"], nlohmann::json::parse("[1.5]"));
  }
  EXPECT_EQ(numbers.size(), 300u);
  EXPECT_THROW((void)typed_template_from_json(schema, type, R"({"color": {seq}})"), std::invalid_argument);
  EXPECT_THROW((void)typed_template_from_json(schema, type, R"({"values": [{seq}]})"), std::invalid_argument);
}

// FlatBuffers' JSON takes single quotes and comments, which the placeholder scan does not know.
TEST(message_template, flatbuffers_refuses_single_quotes_and_comments_with_placeholders) {
  auto schema = tools::typed_schema::from_file(source_dir() + "/services/gen_test.fbs", {source_dir() + "/services"});
  const std::string type = "ringrpc.test.EchoRequest";
  for (const char* json : {R"({"number": {seq}, "text": 'a'})", R"({"number": {seq} // n
                           })", R"({/* n */ "number": {seq}})"}) {
    try {
      (void)typed_template_from_json(schema, type, json);
      ADD_FAILURE() << json << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("use double-quoted strings and no comments"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_NO_THROW((void)typed_template_from_json(schema, type, R"({"number": {seq}, "text": "it's // fine"})"));
}

// A proto2 group is framed by tags, not a length: a placeholder there is refused (by
// grpc_template, or before it by a protobuf whose JSON transcoder cannot write groups, as the
// one of this build); a required field cleared for a placeholder does not stop the fixed part
// from being serialized.
TEST(message_template, protobuf_proto2_groups_and_required_fields) {
  const std::string dir = ::testing::TempDir() + "msgtpl2_" + std::to_string(::getpid());
  std::system(("mkdir -p " + dir).c_str());
  std::ofstream(dir + "/p2.proto") << R"(syntax = "proto2";
package p2;
message Req { required int32 id = 1; optional group G = 2 { optional int32 a = 3; } }
service S { rpc M(Req) returns (Req); }
)";
  const std::string proto = dir + "/p2.proto";
  EXPECT_THROW((void)grpc_template_from_json(proto, {}, "p2.S/M", R"({"id": 1, "g": {"a": {seq}}})"),
               std::invalid_argument);
  EXPECT_NO_THROW((void)grpc_template_from_json(proto, {}, "p2.S/M", R"({"id": {seq}})"));
}

TEST(message_template, a_call_allocates_nothing_once_its_buffer_has_grown) {
  auto schema = tools::typed_schema::from_file(source_dir() + "/services/gen_test.fbs", {source_dir() + "/services"});
  const auto fb = typed_template_from_json(schema, "ringrpc.test.EchoRequest",
                                           R"({"text": "u{random:1000}", "number": {seq}})");
  const auto pb = grpc_template_from_json(test_proto(), {}, "t.S/M",
                                          R"({"name": "n{seq}", "inner": {"a": {random:9}, "s": "{seq}"}})");
  template_renderer r(std::make_shared<template_data>(3));
  std::vector<std::byte> out;
  out.reserve(std::max(fb->max_size(0), pb->max_size(0)));
  const unsigned long before = allocations.load();
  for (std::uint64_t seq = 0; seq < 1000; ++seq) {
    out.clear();
    fb->render(r, {seq}, out);
    out.clear();
    pb->render(r, {seq}, out);
  }
  EXPECT_EQ(allocations.load(), before);
}

}  // namespace
}  // namespace ringrpc::load
