// Request templates end to end: ringrpc-load's engine against servers on 127.0.0.1 that record
// what they RECEIVE — the ringrpc payload, the HTTP path and body, the redis key and value — so
// that a template is checked by what went over the wire. Exits 77 (skipped) without io_uring.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "engine.hpp"
#include "load/fake_servers.hpp"
#include "protocol.hpp"
#include "report.hpp"
#include "ringrpc/server.hpp"
#include "template_options.hpp"
#include "typed_json.hpp"
#include "typed_template.hpp"

#include <nlohmann/json.hpp>

namespace ringrpc::load {
namespace {

using namespace fakes;

// What a recording server saw, from its connection threads.
struct received {
  std::mutex mutex;
  std::vector<std::string> items;
  void add(std::string s) {
    std::lock_guard lock(mutex);
    items.push_back(std::move(s));
  }
  std::vector<std::string> all() {
    std::lock_guard lock(mutex);
    return items;
  }
};

std::string url_of(std::string_view scheme, std::uint16_t port, std::string_view path = {}) {
  return std::string(scheme) + "://127.0.0.1:" + std::to_string(port) + std::string(path);
}

// A run of exactly `n` calls over 3 connections on 2 threads, with `templates` and `kinds`.
run_result run_counted(const std::string& url, std::shared_ptr<request_templates> templates, std::uint64_t n,
                       std::vector<request_kind> kinds = {}) {
  engine_config cfg;
  cfg.where = parse_target(url);
  cfg.threads = 2;
  cfg.connections = 3;
  cfg.depth = 4;
  cfg.duration = std::chrono::nanoseconds(0);
  cfg.max_calls = n;
  cfg.warmup = std::chrono::nanoseconds(0);
  cfg.connect_timeout = std::chrono::seconds(1);
  codec_options co;
  co.templates = std::move(templates);
  const auto proto = make_protocol(cfg.where, co);
  cfg.kinds = kinds.empty() ? proto->default_kinds() : std::move(kinds);
  check_path_templates({}, cfg.kinds, *co.templates, cfg.where.scheme);
  return run_engine(cfg, *proto, [](double, const std::vector<live_counters*>&) {});
}

// The numbers 0 .. n-1, each once, as text: what {seq} must have sent over a run of n calls.
std::multiset<std::string> each_once(std::uint64_t n, const std::string& prefix = "") {
  std::multiset<std::string> out;
  for (std::uint64_t i = 0; i < n; ++i) out.insert(prefix + std::to_string(i));
  return out;
}

TEST(load_template, ringrpc_payload_is_rendered_per_call) {
  received got;
  auto srv = start_ringrpc(2);
  srv->add_method("record", [&got](call_context& ctx) {
    const auto p = ctx.payload();
    got.add(std::string(reinterpret_cast<const char*>(p.data()), p.size()));
    ctx.reply(p);
  });
  const auto r = run_counted(url_of("ringrpc", srv->port(), "/record"),
                             make_request_templates({"n={seq}", "", ""}, "ringrpc"), 500);
  EXPECT_EQ(r.calls_ok, 500u);
  const auto all = got.all();
  EXPECT_EQ(std::multiset<std::string>(all.begin(), all.end()), each_once(500, "n="))
      << "each call's payload is its own number, sizes differing (n=9, n=10, n=100)";
}

// --method --data with placeholders: a ringrpc server records each payload it receives, and
// the schema decodes it (verifying it first): every {seq} once, every {random:N} below N.
TEST(load_template, typed_request_is_rendered_per_call) {
  const char* src = std::getenv("RINGRPC_TEST_SOURCE");
  const std::string dir = std::string(src != nullptr ? src : "tests") + "/services";
  auto schema = tools::typed_schema::from_file(dir + "/gen_test.fbs", {dir});
  const std::string type = "ringrpc.test.EchoRequest";
  received got;
  auto srv = start_ringrpc(2);
  srv->add_method("TestService.Echo", [&got](call_context& ctx) {
    const auto p = ctx.payload();
    got.add(std::string(reinterpret_cast<const char*>(p.data()), p.size()));
    ctx.reply(std::span<const std::byte>{});
  });
  auto templates = make_request_templates({}, "ringrpc");
  templates->message = typed_template_from_json(schema, type, R"({"text": "u{random:50}", "number": {seq}})");
  const auto r = run_counted(url_of("ringrpc", srv->port(), "/TestService.Echo"), templates, 400);
  EXPECT_EQ(r.calls_ok, 400u);
  std::multiset<std::string> numbers;
  std::set<std::string> texts;
  for (const std::string& p : got.all()) {
    const std::span<const std::uint8_t> bytes(reinterpret_cast<const std::uint8_t*>(p.data()), p.size());
    const auto j = nlohmann::json::parse(schema.to_json(type, bytes, {true, true}));
    numbers.insert(std::to_string(j["number"].get<std::int64_t>()));
    texts.insert(j["text"].get<std::string>());
  }
  EXPECT_EQ(numbers, each_once(400));
  for (const std::string& t : texts) EXPECT_LT(std::stoi(t.substr(1)), 50) << t;
  EXPECT_GT(texts.size(), 40u) << "400 draws below 50 leave few values out";
}

// Records each request's line and body; answers 200.
tcp_server::handler recording_http_server(received& lines, received& bodies) {
  return [&lines, &bodies](peer& p) {
    std::string buf;
    while (p.read_some(buf)) {
      std::string out;
      for (;;) {
        const auto end = buf.find("\r\n\r\n");
        if (end == std::string::npos) break;
        std::size_t body = 0;
        const std::string head = buf.substr(0, end);
        if (const auto cl = head.find("\r\nContent-Length: "); cl != std::string::npos) {
          body = std::stoul(head.substr(cl + 18));
        }
        if (buf.size() < end + 4 + body) break;
        lines.add(head.substr(0, head.find("\r\n")));
        bodies.add(buf.substr(end + 4, body));
        buf.erase(0, end + 4 + body);
        out += http_ok;
      }
      if (!out.empty() && !p.write_all(out)) return;
    }
  };
}

TEST(load_template, http_path_and_body_are_rendered_per_call) {
  received lines, bodies;
  tcp_server srv(recording_http_server(lines, bodies));
  request_kind post;
  post.name = post.path = "/items/{seq}";
  post.method = "POST";
  const auto r = run_counted(url_of("http", srv.port(), "/"),
                             make_request_templates({"{{\"id\": {seq}, \"r\": {random:10}}}", "", ""}, "http"), 300,
                             {post});
  EXPECT_EQ(r.calls_ok, 300u) << r.error_total();
  std::multiset<std::string> seen_lines, seen_ids;
  for (const auto& l : lines.all()) seen_lines.insert(l);
  std::multiset<std::string> want_lines;
  for (int i = 0; i < 300; ++i) want_lines.insert("POST /items/" + std::to_string(i) + " HTTP/1.1");
  EXPECT_EQ(seen_lines, want_lines);
  const auto all = bodies.all();
  ASSERT_EQ(all.size(), 300u);
  for (const auto& b : all) {
    // The body's number is its path's (one call, one {seq}); its random digit is below 10.
    ASSERT_TRUE(b.starts_with("{\"id\": ")) << b;
    const auto comma = b.find(", \"r\": ");
    ASSERT_NE(comma, std::string::npos) << b;
    seen_ids.insert(b.substr(7, comma - 7));
    const std::string r10 = b.substr(comma + 7, b.size() - comma - 8);
    EXPECT_EQ(r10.size(), 1u) << b;
    EXPECT_EQ(b.back(), '}');
  }
  EXPECT_EQ(seen_ids, each_once(300));
}

TEST(load_template, http_path_cycles_through_the_data_file_lines) {
  received lines, bodies;
  tcp_server srv(recording_http_server(lines, bodies));
  auto t = make_request_templates({"", "", ""}, "http");
  t->data->set_text("alpha\nbeta\ngamma\n");
  const auto r = run_counted(url_of("http", srv.port(), "/u/{line}"), t, 30);
  EXPECT_EQ(r.calls_ok, 30u);
  std::map<std::string, int> count;
  for (const auto& l : lines.all()) ++count[l];
  EXPECT_EQ(count, (std::map<std::string, int>{
                       {"GET /u/alpha HTTP/1.1", 10}, {"GET /u/beta HTTP/1.1", 10}, {"GET /u/gamma HTTP/1.1", 10}}));
}

TEST(load_template, redis_keys_and_values_are_rendered_per_call) {
  received commands;
  tcp_server srv([&commands](peer& p) {
    std::string buf;
    while (p.read_some(buf)) {
      std::string out;
      for (;;) {
        const auto n = resp_command_length(buf);
        if (n == std::string_view::npos) return;
        if (n == 0) break;
        commands.add(buf.substr(0, n));
        buf.erase(0, n);
        out += "+OK\r\n";
      }
      if (!out.empty() && !p.write_all(out)) return;
    }
  });
  request_kind set;
  set.name = set.method = "SET";
  const auto r = run_counted(url_of("redis", srv.port()), make_request_templates({"v{seq}", "user:{seq}", ""}, "redis"),
                             200, {set});
  EXPECT_EQ(r.calls_ok, 200u);
  std::multiset<std::string> got;
  for (const auto& c : commands.all()) got.insert(c);
  std::multiset<std::string> want;
  for (int i = 0; i < 200; ++i) {
    // Appended, not "v" + ...: GCC 12 warns (-Wrestrict) on that operator+ wrongly.
    const std::string key = std::string("user:").append(std::to_string(i)),
                      value = std::string("v").append(std::to_string(i));
    want.insert("*3\r\n$3\r\nSET\r\n$" + std::to_string(key.size()) + "\r\n" + key + "\r\n$" +
                std::to_string(value.size()) + "\r\n" + value + "\r\n");
  }
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace ringrpc::load
