// The metadata rules piece by piece: caps, key syntax, traceparent, the bearer scheme, the
// token table's matching and the tokens file.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ringrpc/config.hpp"
#include "ringrpc/metadata.hpp"
#include "server/call_guard.hpp"
#include "wire/frame_codec.hpp"
#include "wire/metadata_check.hpp"

namespace ringrpc {
namespace {

// Encodes a request with `md` and decodes it again (the decoded views live in `storage`).
detail::frame_view round_trip(const std::vector<metadata_entry>& md, std::vector<std::byte>& storage) {
  detail::frame_encoder enc;
  detail::frame_view f;
  f.call_id = 1;
  f.method = "m";
  const detail::metadata_to_send to_send{{}, md};
  f.metadata_out = &to_send;
  enc.encode_into(f, storage);
  detail::frame_view v;
  EXPECT_EQ(detail::decode_frame(storage, v), detail::decode_outcome::ok);
  return v;
}

TEST(metadata_check, counts_bytes_of_keys_and_values_and_stops_at_the_caps) {
  std::vector<std::byte> buf;
  const detail::metadata_limits limits{3, 10};
  auto v = round_trip({{"ab", "cd"}, {"e", "fghij"}}, buf);  // 4 + 6 = 10 bytes: at the cap
  ASSERT_NE(v.metadata, nullptr);
  EXPECT_TRUE(detail::check_metadata(*v.metadata, limits).ok());
  v = round_trip({{"ab", "cd"}, {"e", "fghijk"}}, buf);  // 11
  auto c = detail::check_metadata(*v.metadata, limits);
  EXPECT_EQ(c.fault, detail::metadata_fault::too_many_bytes);
  EXPECT_EQ(c.index, 1u);
  v = round_trip({{"a", ""}, {"b", ""}, {"c", ""}, {"d", ""}}, buf);
  c = detail::check_metadata(*v.metadata, limits);
  EXPECT_EQ(c.fault, detail::metadata_fault::too_many_entries);
  EXPECT_EQ(detail::describe(c, *v.metadata, limits),
            "metadata: 4 entries exceed the server's max_metadata_entries (3)");
  v = round_trip({{"a", ""}, {"a\x01", ""}}, buf);
  c = detail::check_metadata(*v.metadata, limits);
  EXPECT_EQ(c.fault, detail::metadata_fault::bad_key);
  EXPECT_EQ(detail::describe(c, *v.metadata, limits),
            "metadata: entry 1: key 'a?' is not a lowercase token (1 or more of a-z 0-9 - _ .)");
  // A frame without metadata has none at all (a null vector, as every frame of before).
  v = round_trip({}, buf);
  EXPECT_EQ(v.metadata, nullptr);
  EXPECT_TRUE(metadata_view(v.metadata).empty());
}

TEST(metadata_view, finds_and_iterates) {
  std::vector<std::byte> buf;
  auto v = round_trip({{"x-one", "1"}, {"two", std::string("\0\1", 2)}}, buf);
  metadata_view md(v.metadata);
  ASSERT_EQ(md.size(), 2u);
  EXPECT_EQ(md.find("x-one"), std::optional<std::string_view>("1"));
  EXPECT_EQ(md.find("two")->size(), 2u);
  EXPECT_FALSE(md.find("three"));
  std::vector<std::string> keys;
  for (const metadata_item m : md) keys.emplace_back(m.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"x-one", "two"}));
}

TEST(metadata_key, lowercase_tokens_only) {
  EXPECT_TRUE(valid_metadata_key("traceparent"));
  EXPECT_TRUE(valid_metadata_key("x-b3_id.2"));
  EXPECT_FALSE(valid_metadata_key(""));
  EXPECT_FALSE(valid_metadata_key("Authorization"));
  EXPECT_FALSE(valid_metadata_key("a b"));
  EXPECT_FALSE(valid_metadata_key("a:b"));
  EXPECT_FALSE(valid_metadata_key(std::string_view("a\0", 2)));
}

TEST(traceparent, the_w3c_example_and_its_broken_variants) {
  trace_context t;
  ASSERT_TRUE(parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", t));
  EXPECT_EQ(t.version, 0);
  EXPECT_EQ(t.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(t.parent_id_hex(), "00f067aa0ba902b7");
  EXPECT_EQ(t.trace_id[0], 0x4b);
  EXPECT_TRUE(t.sampled());
  ASSERT_TRUE(parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", t));
  EXPECT_FALSE(t.sampled());
  EXPECT_FALSE(parse_traceparent("", t));
  EXPECT_FALSE(parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0", t));
  EXPECT_FALSE(parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", t));
  EXPECT_FALSE(parse_traceparent("00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", t));
  EXPECT_FALSE(parse_traceparent("0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", t));
  EXPECT_FALSE(parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", t));
  EXPECT_TRUE(parse_traceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future", t));
  EXPECT_EQ(t.version, 0xcc);
}

TEST(bearer, scheme_and_token_syntax) {
  EXPECT_EQ(parse_bearer("Bearer abc.DEF-_~+/=="), std::optional<std::string_view>("abc.DEF-_~+/=="));
  EXPECT_EQ(parse_bearer("bEaReR x"), std::optional<std::string_view>("x"));
  EXPECT_FALSE(parse_bearer("Bearer "));
  EXPECT_FALSE(parse_bearer("Bearer  x"));
  EXPECT_FALSE(parse_bearer("Bearer x y"));
  EXPECT_FALSE(parse_bearer("Bearer =x"));
  EXPECT_FALSE(parse_bearer("Bearer x=y"));
  EXPECT_FALSE(parse_bearer("Basic x"));
  EXPECT_FALSE(parse_bearer("Bearerx"));
}

TEST(token_table, matches_whole_tokens_only) {
  const detail::token_table t({{"alpha-token", "a"}, {"beta", "b"}, {"alpha-token", "dup"}});
  ASSERT_NE(t.match("alpha-token"), nullptr);
  EXPECT_EQ(t.match("alpha-token")->subject, "a");  // the first of equal tokens wins
  EXPECT_EQ(t.match("beta")->subject, "b");
  EXPECT_EQ(t.match("alpha-toke"), nullptr);
  EXPECT_EQ(t.match("alpha-tokens"), nullptr);
  EXPECT_EQ(t.match("bet"), nullptr);
  EXPECT_EQ(t.match(""), nullptr);
  EXPECT_EQ(t.match(std::string_view("beta\0", 5)), nullptr);
  EXPECT_TRUE(detail::token_table({}).empty());
  const bearer_token limited{"x", "s", {"echo", "Greeter.SayHello", "kv"}};
  EXPECT_TRUE(detail::token_table::allows(limited, "echo"));
  EXPECT_TRUE(detail::token_table::allows(limited, "kv.get"));
  EXPECT_TRUE(detail::token_table::allows(limited, "Greeter.SayHello"));
  EXPECT_FALSE(detail::token_table::allows(limited, "Greeter.SayBye"));
  EXPECT_FALSE(detail::token_table::allows(limited, "echo2"));
  EXPECT_FALSE(detail::token_table::allows(limited, "kv"  "x.get"));
  EXPECT_FALSE(detail::token_table::allows(limited, "ech"));
  EXPECT_TRUE(detail::token_table::allows({"x", "s", {}}, "anything"));
}

TEST(tokens_file, lines_comments_and_errors_that_never_show_the_token) {
  const auto tokens = parse_bearer_tokens("# who may call\n\nalice  tok-a1\r\n\tbob\ttok-b2  echo,kv.get\n", "t");
  ASSERT_EQ(tokens.size(), 2u);
  EXPECT_TRUE(tokens[0].methods.empty());
  EXPECT_EQ(tokens[1].methods, (std::vector<std::string>{"echo", "kv.get"}));
  EXPECT_THROW(parse_bearer_tokens("a tok echo,\n", "t"), config_error);
  EXPECT_THROW(parse_bearer_tokens("a tok echo,,kv\n", "t"), config_error);
  EXPECT_EQ(tokens[0].subject, "alice");
  EXPECT_EQ(tokens[0].token, "tok-a1");
  EXPECT_EQ(tokens[1].subject, "bob");
  EXPECT_EQ(tokens[1].token, "tok-b2");
  try {
    parse_bearer_tokens("alice ok\ncarol sec ret x\n", "tokens.txt");
    FAIL();
  } catch (const config_error& e) {
    EXPECT_EQ(e.source(), "tokens.txt");
    EXPECT_EQ(e.line(), 2u);
    EXPECT_EQ(std::string(e.what()).find("sec"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_bearer_tokens("only-one-word\n", "t"), config_error);
  EXPECT_THROW(parse_bearer_tokens("bad{subject} tok\n", "t"), config_error);
  EXPECT_THROW(parse_bearer_tokens("s t\"k\n", "t"), config_error);
  EXPECT_THROW(load_bearer_tokens("/nonexistent/tokens"), config_error);
  EXPECT_THROW(load_bearer_tokens("/dev/null"), config_error);  // not a regular file
}

TEST(tokens_file, named_in_the_configuration) {
  const server_config cfg = parse_config("[auth]\ntokens_file = \"/etc/ringrpc/tokens\"\n[server]\nmax_metadata_entries = 8\nmax_metadata_bytes = 1024\n", "t.toml");
  EXPECT_EQ(cfg.auth.tokens_file, "/etc/ringrpc/tokens");
  EXPECT_EQ(cfg.server.max_metadata_entries, 8u);
  EXPECT_EQ(cfg.server.max_metadata_bytes, 1024u);
  EXPECT_THROW(parse_config("[auth]\ntokens = 1\n", "t.toml"), config_error);
}

}  // namespace
}  // namespace ringrpc
