#include "template_options.hpp"

#include "message_template.hpp"

#include <fstream>
#include <initializer_list>
#include <stdexcept>
#include <string_view>

namespace ringrpc::load {

namespace {

std::string read_template_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("cannot read --template " + path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() > template_data::max_file_bytes) throw std::invalid_argument("--template " + path + " is over 64 MiB");
  return text;
}

}  // namespace

std::shared_ptr<request_templates> make_request_templates(const template_args& a, const std::string& scheme) {
  auto t = std::make_shared<request_templates>();
  if (!a.data_file.empty()) t->data = template_data::from_file(a.data_file, 0);
  if (!a.payload.empty()) {
    if (scheme == "echo") {
      throw std::invalid_argument("echo:// compares every reply with one fixed payload; --template goes with "
                                  "ringrpc, http, h2c and redis targets");
    }
    if (scheme == "grpc") {
      throw std::invalid_argument("--template does not make gRPC messages: give the request as --proto FILE "
                                  "--data JSON, with the placeholders in the JSON");
    }
    const std::string text = a.payload[0] == '@' ? read_template_file(a.payload.substr(1)) : a.payload;
    t->payload = request_template::compile(text, "--template");
    t->has_payload = true;
    // HTTP bodies may hold any byte; only a path must stay one token.
    t->data->check(t->payload, "--template", false);
  }
  if (!a.redis_key.empty()) {
    if (scheme != "redis") throw std::invalid_argument("--redis-key goes with redis:// targets");
    t->key = request_template::compile(a.redis_key, "--redis-key");
    t->has_key = true;
    t->data->check(t->key, "--redis-key", false);
  }
  return t;
}

namespace {

bool any_kind_is(const std::vector<request_kind>& kinds, std::initializer_list<std::string_view> methods) {
  for (const request_kind& k : kinds) {
    for (const std::string_view m : methods) {
      if (k.method == m) return true;
    }
  }
  return false;
}

// A template no request of the run sends would be silently ignored: a GET has no body, a
// PING no key.
void check_templates_are_sent(const std::vector<request_kind>& kinds, const request_templates& templates,
                              const std::string& scheme) {
  const bool http = scheme == "http" || scheme == "h2c";
  if (templates.has_payload && http && !any_kind_is(kinds, {"POST", "PUT", "PATCH"})) {
    throw std::invalid_argument("--template is the body of POST, PUT and PATCH requests, and this run sends none "
                                "(e.g. --mix 'POST /path')");
  }
  if (templates.has_payload && scheme == "redis" && !any_kind_is(kinds, {"SET"})) {
    throw std::invalid_argument("--template is the value of redis SET, and this run sends none (e.g. --mix SET)");
  }
  if (templates.has_key && scheme == "redis" && !any_kind_is(kinds, {"GET", "SET"})) {
    throw std::invalid_argument("--redis-key is the key of GET and SET, and this run sends neither (e.g. --mix GET:1,SET:1)");
  }
}

}  // namespace

void check_path_templates(const template_args& a, const std::vector<request_kind>& kinds,
                          const request_templates& templates, const std::string& scheme) {
  check_templates_are_sent(kinds, templates, scheme);
  bool uses_line = (templates.has_payload && templates.payload.uses_line()) ||
                   (templates.has_key && templates.key.uses_line()) ||
                   (templates.message && templates.message->uses_line());
  for (const request_kind& k : kinds) {
    if (!request_template::has_braces(k.path)) continue;
    const request_template t = request_template::compile(k.path, "path");
    templates.data->check(t, "path '" + k.path + "'", true);
    uses_line = uses_line || t.uses_line();
  }
  if (!a.data_file.empty() && !uses_line) {
    throw std::invalid_argument("--data-file gives the lines of {line}, and no template uses {line}");
  }
}

bool uses_random(const std::vector<request_kind>& kinds, const request_templates& templates) {
  if (templates.has_payload && templates.payload.uses_random()) return true;
  if (templates.has_key && templates.key.uses_random()) return true;
  if (templates.message && templates.message->uses_random()) return true;
  for (const request_kind& k : kinds) {
    if (request_template::has_braces(k.path) && request_template::compile(k.path, "path").uses_random()) return true;
  }
  return false;
}

}  // namespace ringrpc::load
