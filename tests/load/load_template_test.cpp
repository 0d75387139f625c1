// Request templates (tools/load/request_template.hpp, template_options.hpp): compiling,
// escapes and errors, rendering {seq} {random:N} {line}, and what each codec writes with them.
// Pure logic: what a server receives is checked in load_template_loopback_test.cpp.

#include "request_template.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "protocol.hpp"
#include "template_options.hpp"

namespace ringrpc::load {
namespace {

using seg = template_segment::kind;

std::string render(template_renderer& r, const request_template& t, std::uint64_t seq) {
  std::string out;
  r.render(t, {seq}, out);
  return out;
}

std::string error_of(std::string_view text) {
  try {
    (void)request_template::compile(text, "--template");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// A file in the test's temporary directory, removed at the end.
struct temp_file {
  std::string path;
  explicit temp_file(const std::string& text) {
    char name[] = "/tmp/load_template_XXXXXX";
    const int fd = ::mkstemp(name);
    if (fd < 0) throw std::runtime_error("mkstemp");
    path = name;
    if (!text.empty() && ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      throw std::runtime_error("write");
    }
    ::close(fd);
  }
  ~temp_file() { std::remove(path.c_str()); }
};

TEST(request_template, compiles_into_segments) {
  const auto t = request_template::compile("user:{seq}/{random:100}-{line}!", "--template");
  ASSERT_EQ(t.segments().size(), 7u);
  EXPECT_EQ(t.segments()[0].what, seg::literal);
  EXPECT_EQ(t.segments()[1].what, seg::seq);
  EXPECT_EQ(t.segments()[3].what, seg::random);
  EXPECT_EQ(t.segments()[3].bound, 100u);
  EXPECT_EQ(t.segments()[5].what, seg::line);
  EXPECT_EQ(t.literal_text(), "user:/-!");
  EXPECT_TRUE(t.uses_seq() && t.uses_random() && t.uses_line());
  EXPECT_FALSE(t.is_literal());
}

TEST(request_template, escapes_are_one_literal) {
  const auto t = request_template::compile("{{\"a\": {{}}}}", "--template");
  ASSERT_EQ(t.segments().size(), 1u);
  EXPECT_TRUE(t.is_literal());
  EXPECT_EQ(t.literal_text(), "{\"a\": {}}");
  EXPECT_EQ(request_template::compile("", "x").segments().size(), 0u);
}

TEST(request_template, bad_placeholders_are_named) {
  EXPECT_NE(error_of("{nope}").find("unknown placeholder {nope}"), std::string::npos) << error_of("{nope}");
  EXPECT_NE(error_of("a{").find("without its '}'"), std::string::npos);
  EXPECT_NE(error_of("a}b").find("lone '}'"), std::string::npos);
  EXPECT_NE(error_of("{a{seq}").find("without its '}'"), std::string::npos);
  EXPECT_NE(error_of("{}").find("unknown placeholder {}"), std::string::npos);
  EXPECT_NE(error_of("{random:0}").find("needs N"), std::string::npos);
  EXPECT_NE(error_of("{random:x}").find("needs N"), std::string::npos);
  EXPECT_NE(error_of("{random:}").find("needs N"), std::string::npos);
  EXPECT_NE(error_of("{random:18446744073709551616}").find("needs N"), std::string::npos);
  EXPECT_NE(error_of("{seq}{Seq}").find("--template"), std::string::npos);
  EXPECT_EQ(error_of("{random:18446744073709551615}"), "");
}

TEST(request_template, seq_counts_calls_over_the_run) {
  auto data = std::make_shared<template_data>(1);
  template_renderer a(data), b(data);
  const auto t = request_template::compile("k{seq}", "x");
  std::vector<std::uint64_t> seen;
  for (int i = 0; i < 10; ++i) {
    template_renderer& r = i % 3 == 0 ? a : b;  // two connections share the run's counter
    seen.push_back(r.begin_call(true).seq);
    EXPECT_EQ(render(r, t, seen.back()), std::string("k").append(std::to_string(seen.back())));
  }
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i);
  EXPECT_EQ(a.begin_call(false).seq, 0u) << "a call without {seq} or {line} takes no number";
  EXPECT_EQ(a.begin_call(true).seq, 10u);
}

TEST(request_template, random_is_bounded_and_repeats_with_the_seed) {
  const auto t = request_template::compile("{random:7}", "x");
  const auto draws = [&](std::uint64_t seed) {
    template_renderer r(std::make_shared<template_data>(seed));
    std::vector<std::string> out;
    for (int i = 0; i < 2000; ++i) out.push_back(render(r, t, 0));
    return out;
  };
  const auto first = draws(42);
  EXPECT_EQ(first, draws(42)) << "the same seed, the same numbers";
  EXPECT_NE(first, draws(43));
  std::set<std::string> values(first.begin(), first.end());
  EXPECT_EQ(values, (std::set<std::string>{"0", "1", "2", "3", "4", "5", "6"})) << "all of 0..6, nothing else";
  // Two connections of one run draw different streams.
  auto data = std::make_shared<template_data>(42);
  template_renderer c0(data), c1(data);
  std::string s0, s1;
  for (int i = 0; i < 64; ++i) s0 += render(c0, t, 0), s1 += render(c1, t, 0);
  EXPECT_NE(s0, s1);
  template_renderer big(data);
  const auto huge = request_template::compile("{random:18446744073709551615}", "x");
  EXPECT_FALSE(render(big, huge, 0).empty());
}

TEST(request_template, lines_cycle_and_share_the_calls_number) {
  template_data d(0);
  d.set_text("alpha\r\nbeta\n\ngamma\n");
  ASSERT_EQ(d.line_count(), 4u) << "a last LF ends the last line; an empty line is a line";
  auto data = std::make_shared<template_data>(0);
  data->set_text("alpha\r\nbeta\n\ngamma\n");
  template_renderer r(data);
  const auto t = request_template::compile("{line}|{line}|{seq}", "x");
  EXPECT_EQ(render(r, t, 0), "alpha|alpha|0");
  EXPECT_EQ(render(r, t, 1), "beta|beta|1");
  EXPECT_EQ(render(r, t, 2), "||2");
  EXPECT_EQ(render(r, t, 5), "beta|beta|5");
}

TEST(request_template, data_file_limits) {
  const temp_file empty("");
  try {
    (void)template_data::from_file(empty.path, 0);
    FAIL() << "an empty file";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("is empty"), std::string::npos) << e.what();
  }
  const temp_file big("x");
  ASSERT_EQ(::truncate(big.path.c_str(), template_data::max_file_bytes + 1), 0);  // sparse: no disk used
  try {
    (void)template_data::from_file(big.path, 0);
    FAIL() << "a file over the limit";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("64 MiB"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)template_data::from_file("/nonexistent/lines", 0), std::invalid_argument);
  const temp_file ok("a b\nc\n");
  const auto d = template_data::from_file(ok.path, 0);
  EXPECT_EQ(d->line_count(), 2u);
  const auto path = request_template::compile("/u/{line}", "path");
  EXPECT_THROW(d->check(path, "path", true), std::invalid_argument) << "a space cannot go in a path";
  EXPECT_NO_THROW(d->check(path, "--template", false));
  EXPECT_THROW(template_data(0).check(path, "path", false), std::invalid_argument) << "{line} without --data-file";
}

TEST(template_options, checks_what_goes_with_what) {
  EXPECT_THROW(make_request_templates({"{seq}", "", ""}, "echo"), std::invalid_argument);
  EXPECT_THROW(make_request_templates({"{seq}", "", ""}, "grpc"), std::invalid_argument);
  EXPECT_THROW(make_request_templates({"", "k{seq}", ""}, "http"), std::invalid_argument);
  EXPECT_THROW(make_request_templates({"{bad}", "", ""}, "ringrpc"), std::invalid_argument);
  EXPECT_THROW(make_request_templates({"{line}", "", ""}, "ringrpc"), std::invalid_argument);
  const temp_file lines("one\n");
  const template_args unused{"{seq}", "", lines.path};
  EXPECT_THROW(check_path_templates(unused, {}, *make_request_templates(unused, "ringrpc"), "ringrpc"),
               std::invalid_argument)
      << "--data-file without {line}";
  const template_args used{"v{line}", "k:{seq}", lines.path};
  const auto t = make_request_templates(used, "redis");
  EXPECT_TRUE(t->has_payload && t->has_key);
  std::vector<request_kind> set(1);
  set[0].method = "SET";
  EXPECT_NO_THROW(check_path_templates(used, set, *t, "redis"));
  std::vector<request_kind> ping(1);
  ping[0].method = "PING";
  EXPECT_THROW(check_path_templates(used, ping, *t, "redis"), std::invalid_argument) << "nothing sends them";
  const auto body = make_request_templates({"{seq}", "", ""}, "http");
  std::vector<request_kind> get(1);
  get[0].method = "GET";
  EXPECT_THROW(check_path_templates({}, get, *body, "http"), std::invalid_argument) << "a GET has no body";
  get[0].method = "POST";
  EXPECT_NO_THROW(check_path_templates({}, get, *body, "http"));
  const temp_file file_template("{{\"n\": {seq}}}");
  EXPECT_EQ(make_request_templates({"@" + file_template.path, "", ""}, "http")->payload.literal_text(), "{\"n\": }");
  std::vector<request_kind> kinds(1);
  kinds[0].path = "/a/{random:5}";
  EXPECT_TRUE(uses_random(kinds, *t));
  kinds[0].path = "/a/{nope}";
  kinds[0].method = "POST";
  EXPECT_THROW(check_path_templates({}, kinds, *t, "http"), std::invalid_argument);
}

// ---- what codecs write ----

std::string written(const target& where, const codec_options& co, const request_kind* kind, int calls) {
  const auto proto = make_protocol(where, co);
  const auto kinds = proto->default_kinds();
  const auto codec = proto->new_connection();
  std::vector<std::byte> out;
  for (int i = 0; i < calls; ++i) codec->write_request(out, static_cast<std::uint64_t>(i), kind ? *kind : kinds[0]);
  return {reinterpret_cast<const char*>(out.data()), out.size()};
}

TEST(template_codecs, http_path_and_body_with_their_length) {
  codec_options co;
  co.templates = make_request_templates({"id={seq}", "", ""}, "http");
  request_kind post;
  post.method = "POST";
  post.path = "/u/{seq}";
  const std::string out = written(parse_target("http://127.0.0.1:8080/"), co, &post, 11);
  EXPECT_NE(out.find("POST /u/0 HTTP/1.1\r\n"), std::string::npos);
  EXPECT_NE(out.find("Content-Length: 4\r\n\r\nid=0POST /u/1 "), std::string::npos) << out.substr(0, 300);
  EXPECT_NE(out.find("POST /u/10 HTTP/1.1\r\n"), std::string::npos);
  EXPECT_NE(out.find("Content-Length: 5\r\n\r\nid=10"), std::string::npos) << "the length is the call's own";
  // A GET with a path template only; escapes give braces.
  codec_options plain;
  const std::string get = written(parse_target("http://127.0.0.1:8080/a{{b}}/{seq}"), plain, nullptr, 2);
  EXPECT_NE(get.find("GET /a{b}/0 HTTP/1.1\r\n"), std::string::npos) << get;
  EXPECT_NE(get.find("GET /a{b}/1 HTTP/1.1\r\n"), std::string::npos) << get;
  EXPECT_EQ(get.find("Content-Length"), std::string::npos);
}

TEST(template_codecs, redis_key_and_value) {
  codec_options co;
  co.templates = make_request_templates({"v{seq}", "user:{seq}", ""}, "redis");
  request_kind set;
  set.method = "SET";
  const std::string out = written(parse_target("redis://127.0.0.1:6379"), co, &set, 2);
  EXPECT_EQ(out, "*3\r\n$3\r\nSET\r\n$6\r\nuser:0\r\n$2\r\nv0\r\n*3\r\n$3\r\nSET\r\n$6\r\nuser:1\r\n$2\r\nv1\r\n");
  request_kind get;
  get.method = "GET";
  codec_options none;  // the default keys stay key:<seq mod --key-space>
  none.key_space = 3;
  EXPECT_EQ(written(parse_target("redis://127.0.0.1:6379"), none, &get, 4).substr(0, 24), "*2\r\n$3\r\nGET\r\n$5\r\nkey:0\r\n");
  EXPECT_NE(written(parse_target("redis://127.0.0.1:6379"), none, &get, 4).find("$5\r\nkey:0\r\n*2"), std::string::npos);
}

TEST(template_codecs, ringrpc_payload_per_call) {
  codec_options co;
  co.templates = make_request_templates({"payload-{seq}-end", "", ""}, "ringrpc");
  const std::string out = written(parse_target("ringrpc://127.0.0.1:1/echo"), co, nullptr, 12);
  EXPECT_NE(out.find("payload-0-end"), std::string::npos);
  EXPECT_NE(out.find("payload-11-end"), std::string::npos);
  co.verify_echo = true;
  EXPECT_THROW(make_protocol(parse_target("ringrpc://127.0.0.1:1/echo"), co), std::invalid_argument);
}

}  // namespace
}  // namespace ringrpc::load
