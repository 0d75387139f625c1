// The etcd gateway's messages as etcd 3.4 writes them, and the registration record.

#include "discovery/etcd_json.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "discovery/base64.hpp"
#include "ringrpc/discovery.hpp"

namespace {

namespace d = ringrpc::discovery::detail;

TEST(base64, round_trips_and_refuses_non_canonical_text) {
  for (const std::string& s : std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\xff\x10", 3)}) {
    auto back = d::base64_decode(d::base64_encode(s));
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, s);
  }
  EXPECT_EQ(d::base64_encode("/ringrpc"), "L3JpbmdycGM=");
  for (const char* bad : {"a", "abc", "ab=c", "a===", "ab$=", "=abc", "qHHHHHHHHHHHHHH=", "YR=="}) EXPECT_FALSE(d::base64_decode(bad)) << bad;
}

TEST(etcd_json, prefix_range_end_is_the_next_key) {
  EXPECT_EQ(d::prefix_range_end("/a/"), "/a0");
  EXPECT_EQ(d::prefix_range_end(std::string("a\xff", 2)), "b");
}

TEST(etcd_json, parses_a_range_reply) {
  const auto r = d::parse_range(
      R"({"header":{"cluster_id":"1","member_id":"2","revision":"7","raft_term":"2"},)"
      R"("kvs":[{"key":"YQ==","create_revision":"2","mod_revision":"5","version":"1","value":"Yg=="}],"count":"1"})");
  ASSERT_TRUE(r) << r.error;
  EXPECT_EQ(r.value->revision, 7);
  ASSERT_EQ(r.value->kvs.size(), 1u);
  EXPECT_EQ(r.value->kvs[0].key, "a");
  EXPECT_EQ(r.value->kvs[0].value, "b");
  EXPECT_EQ(r.value->kvs[0].mod_revision, 5);
  const auto empty = d::parse_range(R"({"header":{"revision":"3"}})");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty.value->kvs.empty());
}

TEST(etcd_json, reports_gateway_errors_and_garbage) {
  const auto e = d::parse_range(R"({"error":"etcdserver: mvcc: required revision has been compacted","code":11})");
  EXPECT_FALSE(e);
  EXPECT_NE(e.error.find("compacted"), std::string::npos);
  EXPECT_FALSE(d::parse_range("not json"));
  EXPECT_FALSE(d::parse_range(R"({"kvs":[{"key":"!!"}]})"));
  EXPECT_FALSE(d::parse_range(R"({"header":{"revision":"x"}})"));
  EXPECT_FALSE(d::parse_range(R"([1,2])"));
}

TEST(etcd_json, parses_watch_messages) {
  auto created = d::parse_watch_message(R"({"result":{"header":{"revision":"3"},"created":true}})");
  ASSERT_TRUE(created);
  EXPECT_TRUE(created.value->created);
  auto ev = d::parse_watch_message(
      R"({"result":{"header":{"revision":"5"},"events":[{"kv":{"key":"YWI=","mod_revision":"4","value":"Yg=="}},)"
      R"({"type":"DELETE","kv":{"key":"YWI=","mod_revision":"5"}}]}})");
  ASSERT_TRUE(ev) << ev.error;
  ASSERT_EQ(ev.value->events.size(), 2u);
  EXPECT_FALSE(ev.value->events[0].is_delete);
  EXPECT_EQ(ev.value->events[0].kv.key, "ab");
  EXPECT_TRUE(ev.value->events[1].is_delete);
  EXPECT_EQ(ev.value->revision, 5);
  auto compacted = d::parse_watch_message(R"({"result":{"header":{},"canceled":true,"compact_revision":"3"}})");
  ASSERT_TRUE(compacted);
  EXPECT_TRUE(compacted.value->canceled);
  EXPECT_EQ(compacted.value->compact_revision, 3);
  EXPECT_FALSE(d::parse_watch_message(R"({"result":{"events":[{"type":"PUT"}]}})"));
}

TEST(etcd_json, parses_lease_replies) {
  auto g = d::parse_lease_grant(R"({"header":{"revision":"1"},"ID":"4111120374282184453","TTL":"5"})");
  ASSERT_TRUE(g);
  EXPECT_EQ(g.value->id, 4111120374282184453);
  EXPECT_EQ(g.value->ttl, 5);
  EXPECT_FALSE(d::parse_lease_grant(R"({"header":{}})"));
  auto k = d::parse_keepalive(R"({"result":{"header":{"revision":"5"},"ID":"1","TTL":"5"}})");
  ASSERT_TRUE(k);
  EXPECT_EQ(*k.value, 5);
  auto gone = d::parse_keepalive(R"({"result":{"header":{"revision":"5"},"ID":"1"}})");
  ASSERT_TRUE(gone);
  EXPECT_EQ(*gone.value, 0);
}

TEST(member_record, round_trips_and_refuses_wrong_types) {
  ringrpc::discovery::member_record r;
  r.address = "10.0.0.5:7000";
  r.weight = 3;
  r.zone = "z";
  r.version = "0.1.0";
  r.tls = true;
  r.pid = 42;
  r.started_at = "2026-12-01T18:00:00Z";
  auto back = ringrpc::discovery::decode_member_record(ringrpc::discovery::encode_member_record(r));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->address, r.address);
  EXPECT_EQ(back->weight, 3u);
  EXPECT_TRUE(back->tls);
  EXPECT_EQ(back->pid, 42);
  EXPECT_TRUE(ringrpc::discovery::decode_member_record(R"({"address":"h:1"})"));
  for (const char* bad : {"", "{}", R"({"address":1})", R"({"address":"h:1","weight":-1})",
                          R"({"address":"h:1","tls":"yes"})", R"({"address":""})"}) {
    EXPECT_FALSE(ringrpc::discovery::decode_member_record(bad)) << bad;
  }
}

TEST(etcd_target, refuses_malformed_targets) {
  EXPECT_NO_THROW(ringrpc::discovery::make_etcd_resolver("etcd://127.0.0.1:2379/echo"));
  EXPECT_NO_THROW(ringrpc::discovery::make_etcd_resolver("etcd://127.0.0.1:2379/echo?prefix=/x/y"));
  for (const char* bad : {"etcd://127.0.0.1:2379", "etcd://127.0.0.1:2379/", "etcd://host/echo",
                          "http://127.0.0.1:2379/echo", "etcd://h:1/a/b", "etcd://h:1/a?p=1"}) {
    EXPECT_THROW(ringrpc::discovery::make_etcd_resolver(bad), std::invalid_argument) << bad;
  }
}

}  // namespace
