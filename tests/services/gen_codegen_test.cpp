// ringrpc-gen's checks and output, on schemas parsed by the FlatBuffers library: method ids
// and their collisions, refused schemas, the generated text. No server, no io_uring.

#include <flatbuffers/idl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "codegen.hpp"
#include "ringrpc/service.hpp"

namespace ringrpc::gen {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Parses `schema` as the file "t.fbs".
std::unique_ptr<flatbuffers::Parser> parse(const std::string& schema) {
  auto p = std::make_unique<flatbuffers::Parser>();
  if (!p->Parse(schema.c_str(), nullptr, "t.fbs")) throw std::runtime_error(p->error_);
  return p;
}

std::string problems_of(const std::string& schema) {
  const auto p = parse(schema);
  try {
    collect_services(*p, "t.fbs");
  } catch (const schema_error& e) {
    return e.what();
  }
  return {};
}

const std::string types = "table Req { a: int; } table Rep { b: string; }\n";

TEST(method_ids, fnv1a_of_the_full_name) {
  // Reference values of 32-bit FNV-1a (offset basis 0x811c9dc5, prime 0x01000193).
  EXPECT_EQ(method_id(""), 0x811c9dc5u);
  EXPECT_EQ(method_id("a"), 0xe40c292cu);
  EXPECT_EQ(method_id("foobar"), 0xbf9cf968u);
  EXPECT_EQ(method_id("Greeter.SayHello"), 0x978de4ccu);
  // Bytes, not chars: UTF-8 above 0x7f must not sign-extend.
  EXPECT_EQ(method_id("\xc3\xa9"), (((0x811c9dc5u ^ 0xc3u) * 0x01000193u) ^ 0xa9u) * 0x01000193u);
}

TEST(method_ids, collision_checker_finds_a_real_collision) {
  // Found by search: two distinct names with one FNV-1a value.
  ASSERT_EQ(method_id("Clash.yenqitbu"), method_id("Clash.lnfvmnim"));
  const auto c = find_id_collisions({"Clash.a", "Clash.yenqitbu", "Clash.b", "Clash.lnfvmnim"});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].first, "Clash.yenqitbu");
  EXPECT_EQ(c[0].second, "Clash.lnfvmnim");
  EXPECT_EQ(c[0].id, 0x3c630053u);
  EXPECT_TRUE(find_id_collisions({"A.x", "A.y", "B.x"}).empty());
}

TEST(collect_services, a_colliding_schema_is_refused_naming_both_methods) {
  const auto what = problems_of(types + "rpc_service Clash { yenqitbu(Req): Rep; lnfvmnim(Req): Rep; }");
  EXPECT_THAT(what, HasSubstr("method id collision: Clash.yenqitbu and Clash.lnfvmnim both have id 0x3c630053"));
}

TEST(collect_services, streaming_methods_are_accepted_with_their_kind) {
  const auto p = parse(types + "rpc_service S { A(Req): Rep; B(Req): Rep (streaming: \"server\"); "
                               "C(Req): Rep (streaming: \"client\"); D(Req): Rep (streaming: \"bidi\"); "
                               "E(Req): Rep (streaming: \"none\"); }");
  const auto services = collect_services(*p, "t.fbs");
  ASSERT_EQ(services.size(), 1u);
  std::vector<std::string> kinds;
  for (const auto& m : services[0].methods) kinds.push_back(m.streaming);
  EXPECT_EQ(kinds, (std::vector<std::string>{"", "server", "client", "bidi", ""}));
}

TEST(collect_services, an_unknown_streaming_kind_is_refused) {
  const auto what = problems_of(types + "rpc_service S { A(Req): Rep; B(Req): Rep (streaming: \"sideways\"); }");
  EXPECT_THAT(what, HasSubstr("method S.B has an unknown streaming kind (streaming: \"sideways\")"));
  EXPECT_THAT(what, Not(HasSubstr("S.A")));
}

TEST(collect_services, a_stream_method_has_one_stub_member) {
  // A unary Watch_async would clash with Watch's; a stream method generates Watch only.
  EXPECT_EQ(problems_of(types + "rpc_service S { Watch(Req): Rep (streaming: \"bidi\"); Watch_async(Req): Rep; }"),
            "");
}

TEST(collect_services, names_the_generated_code_cannot_use) {
  EXPECT_THAT(problems_of(types + "rpc_service S { receive_and_reply(Req): Rep; }"),
              HasSubstr("method S.receive_and_reply has a name the generated classes use themselves"));
  EXPECT_THAT(problems_of(types + "rpc_service S { stub(Req): Rep; }"), HasSubstr("S.stub"));
  EXPECT_THAT(problems_of(types + "rpc_service S { delete(Req): Rep; }"), HasSubstr("is a C++ keyword"));
  EXPECT_THAT(problems_of(types + "rpc_service S { ringrpc_x(Req): Rep; }"), HasSubstr("reserves"));
  EXPECT_THAT(problems_of(types + "rpc_service S { Get(Req): Rep; Get_async(Req): Rep; }"),
              HasSubstr("stub member 'Get_async' twice"));
  EXPECT_THAT(problems_of(types + "rpc_service S { Get(Req): Rep; Get_one_way(Req): Rep; }"),
              HasSubstr("stub member 'Get_one_way' twice"));
  EXPECT_THAT(problems_of(types + "rpc_service Req { A(Req): Rep; }"),
              HasSubstr("service Req has the name of a declaration flatc generates"));
  EXPECT_THAT(problems_of(types + "rpc_service ReqBuilder { A(Req): Rep; }"), HasSubstr("ReqBuilder"));
  EXPECT_THAT(problems_of(types + "rpc_service ringrpc { A(Req): Rep; }"), HasSubstr("name of a namespace"));
}

TEST(collect_services, one_endpoint_name_for_two_services_is_refused) {
  const auto what = problems_of("namespace a; table Req {} rpc_service S { A(Req): Req; }\n"
                                "namespace b; rpc_service S { B(a.Req): a.Req; }");
  EXPECT_THAT(what, HasSubstr("services a.S and b.S would both be served as 'S'"));
}

TEST(collect_services, describes_services_and_methods) {
  const auto p = parse("namespace x.y;\n" + types +
                       "/// Doc.\nrpc_service S {\n  /// Method doc.\n  A(Req): Rep;\n  B(Rep): Req;\n}");
  const auto services = collect_services(*p, "t.fbs");
  ASSERT_EQ(services.size(), 1u);
  const auto& s = services[0];
  EXPECT_EQ(s.name, "S");
  EXPECT_EQ(s.name_space, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(s.doc, (std::vector<std::string>{" Doc."}));
  ASSERT_EQ(s.methods.size(), 2u);
  EXPECT_EQ(s.methods[0].full_name, "S.A");
  EXPECT_EQ(s.methods[0].id, method_id("S.A"));
  EXPECT_EQ(s.methods[0].request_type, "x.y.Req");
  EXPECT_EQ(s.methods[0].reply_type, "x.y.Rep");
  EXPECT_EQ(s.methods[0].doc, (std::vector<std::string>{" Method doc."}));
  EXPECT_EQ(s.methods[1].request_type, "x.y.Rep");
}

TEST(collect_services, services_of_included_files_are_left_to_their_headers) {
  const auto p = parse(types + "rpc_service S { A(Req): Rep; }");
  EXPECT_TRUE(collect_services(*p, "other.fbs").empty());
}

TEST(max_alignment, follows_force_align) {
  EXPECT_EQ(max_alignment(*parse(types)), 8u);
  EXPECT_EQ(max_alignment(*parse("struct V (force_align: 16) { a: float; } table T { v: V; }")), 16u);
}

TEST(generate_header, contains_the_pieces) {
  const auto p = parse("namespace x.y;\n" + types + "rpc_service S { A(Req): Rep; }");
  p->Serialize();
  header_input in;
  in.schema_name = "t.fbs";
  in.flatc_header = "t_generated.h";
  in.services = collect_services(*p, "t.fbs");
  in.bfbs = {p->builder_.GetBufferPointer(), p->builder_.GetSize()};
  const std::string h = generate_header(in);
  EXPECT_THAT(h, HasSubstr("#include \"t_generated.h\""));
  EXPECT_THAT(h, HasSubstr("namespace x::y {"));
  EXPECT_THAT(h, HasSubstr("static constexpr char A_method[] = \"S.A\";"));
  char id[32];
  std::snprintf(id, sizeof id, "A_id = 0x%08xu;", method_id("S.A"));
  EXPECT_THAT(h, HasSubstr(id));
  EXPECT_THAT(h, HasSubstr("class S::stub {"));
  EXPECT_THAT(h, HasSubstr("class S::service : public ::ringrpc::endpoint {"));
  EXPECT_THAT(h, HasSubstr("::ringrpc::result<::x::y::Rep> A(::flatbuffers::FlatBufferBuilder& request"));
  EXPECT_THAT(h, HasSubstr("alignas(8) inline constexpr std::uint8_t t_fbs_"));
  // Stubs over a client or a channel, through a target that follows moves; a typed one-way.
  EXPECT_THAT(h, HasSubstr("explicit stub(::ringrpc::client& connection) noexcept : _target(connection) {}"));
  EXPECT_THAT(h, HasSubstr("explicit stub(::ringrpc::channel& channel, bool idempotent = false) noexcept"));
  EXPECT_THAT(h, HasSubstr("bool A_one_way(::flatbuffers::FlatBufferBuilder& request"));
  EXPECT_THAT(h, HasSubstr("::ringrpc::detail::stub_target _target;"));
  // Reproducible: the same input, the same text (builds must not churn).
  EXPECT_EQ(h, generate_header(in));
}

TEST(check_bfbs_matches, catches_a_schema_from_elsewhere) {
  const auto p = parse(types + "rpc_service S { A(Req): Rep; }");
  p->Serialize();
  const std::vector<std::uint8_t> bfbs(p->builder_.GetBufferPointer(),
                                       p->builder_.GetBufferPointer() + p->builder_.GetSize());
  EXPECT_NO_THROW(check_bfbs_matches(bfbs, *p));
  const auto other = parse(types + "rpc_service S { A(Req): Rep; B(Req): Rep; }");
  EXPECT_THROW(check_bfbs_matches(bfbs, *other), schema_error);
  const std::vector<std::uint8_t> junk(64, 7);
  EXPECT_THROW(check_bfbs_matches(junk, *p), schema_error);
}

}  // namespace
}  // namespace ringrpc::gen
