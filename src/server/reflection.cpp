// The "reflection" endpoint: lists typed services and hands out their binary schemas.
#include "ringrpc/reflection.hpp"

#include <flatbuffers/reflection_generated.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <utility>

#include "ringrpc/server.hpp"
#include "ringrpc/service.hpp"
#include "wire/schema_doc.hpp"

namespace ringrpc {
namespace {

struct served_method {
  std::string name;  // "SayHello"
  std::string full;  // "Greeter.SayHello"
  std::uint32_t id = 0;
  std::string request;
  std::string reply;
  std::string doc;  // the method's /// comment, its lines joined by spaces
  std::string streaming;  // "server", "client" or "bidi"; empty for a unary method
};

struct served_service {
  std::string name;       // "Greeter": the endpoint name, what calls are addressed to
  std::string full_name;  // "example.Greeter"
  std::span<const std::uint8_t> bfbs;
  std::vector<served_method> methods;
};

std::string_view unqualified(std::string_view name) {
  const auto dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

const reflection::Schema& checked_schema(const schema_blob& blob) {
  const std::string which = blob.service.empty() ? std::string("a schema") : "the schema of '" + std::string(blob.service) + "'";
  if (reinterpret_cast<std::uintptr_t>(blob.bfbs.data()) % 8 != 0) {
    throw std::invalid_argument("add_reflection: " + which + " is not 8-byte aligned");
  }
  flatbuffers::Verifier v(blob.bfbs.data(), blob.bfbs.size());
  if (!reflection::VerifySchemaBuffer(v)) {
    throw std::invalid_argument("add_reflection: " + which +
                                " is not a binary schema (expected the output of flatc --binary --schema)");
  }
  return *reflection::GetSchema(blob.bfbs.data());
}

// Services by endpoint name. A service reached through several blobs (two generated services
// of one schema) is kept once; two different declarations of one name are an error, since
// calls could reach only one of them.
std::map<std::string, served_service, std::less<>> index_schemas(const std::vector<schema_blob>& blobs) {
  std::map<std::string, served_service, std::less<>> out;
  for (const auto& blob : blobs) {
    const auto& schema = checked_schema(blob);
    bool found = false;
    const auto* services = schema.services();
    for (flatbuffers::uoffset_t i = 0; services != nullptr && i < services->size(); ++i) {
      const auto* svc = services->Get(i);
      if (svc->name() == nullptr) continue;
      const std::string_view full = svc->name()->string_view();
      const std::string_view name = unqualified(full);
      if (!blob.service.empty() && blob.service != name && blob.service != full) continue;
      found = true;
      served_service s;
      s.name = std::string(name);
      s.full_name = std::string(full);
      s.bfbs = blob.bfbs;
      if (svc->calls() != nullptr) {
        for (const auto* call : *svc->calls()) {
          served_method m;
          m.name = call->name() ? call->name()->str() : std::string();
          m.full = s.name + "." + m.name;
          m.id = method_id(m.full);
          m.request = call->request() && call->request()->name() ? call->request()->name()->str() : std::string();
          m.reply = call->response() && call->response()->name() ? call->response()->name()->str() : std::string();
          m.doc = detail::joined_doc(call->documentation());
          m.streaming = detail::streaming_kind(*call);
          s.methods.push_back(std::move(m));
        }
      }
      std::sort(s.methods.begin(), s.methods.end(),
                [](const served_method& a, const served_method& b) { return a.name < b.name; });
      const auto it = out.find(s.name);
      if (it == out.end()) {
        out.emplace(s.name, std::move(s));
      } else if (it->second.full_name != s.full_name) {
        throw std::invalid_argument("add_reflection: services " + it->second.full_name + " and " + s.full_name +
                                    " would both be served as '" + s.name + "'");
      } else if (!std::equal(it->second.bfbs.begin(), it->second.bfbs.end(), s.bfbs.begin(), s.bfbs.end())) {
        throw std::invalid_argument("add_reflection: service " + s.full_name + " comes with two different schemas");
      }
    }
    if (!found && !blob.service.empty()) {
      throw std::invalid_argument("add_reflection: the schema given for '" + std::string(blob.service) +
                                  "' declares no such service");
    }
  }
  return out;
}

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  out += '"';
}

std::string list_json(const std::map<std::string, served_service, std::less<>>& services) {
  std::string out = "{\"services\":[";
  bool first_service = true;
  for (const auto& [name, s] : services) {
    if (!first_service) out += ',';
    first_service = false;
    out += "{\"name\":";
    append_json_string(out, s.name);
    out += ",\"full_name\":";
    append_json_string(out, s.full_name);
    out += ",\"methods\":[";
    bool first_method = true;
    for (const auto& m : s.methods) {
      if (!first_method) out += ',';
      first_method = false;
      out += "{\"name\":";
      append_json_string(out, m.name);
      out += ",\"method\":";
      append_json_string(out, m.full);
      out += ",\"id\":" + std::to_string(m.id);
      out += ",\"request\":";
      append_json_string(out, m.request);
      out += ",\"reply\":";
      append_json_string(out, m.reply);
      if (!m.streaming.empty()) {
        out += ",\"streaming\":";
        append_json_string(out, m.streaming);
      }
      if (!m.doc.empty()) {
        out += ",\"doc\":";
        append_json_string(out, m.doc);
      }
      out += '}';
    }
    out += "]}";
  }
  out += "]}";
  return out;
}

class reflection_endpoint final : public endpoint {
 public:
  explicit reflection_endpoint(std::map<std::string, served_service, std::less<>> services)
      : _services(std::move(services)), _list(list_json(_services)) {}

  void receive_and_reply(call_context& call) override {
    const std::string_view method = call.method();
    if (method == reflection_list_method) {
      call.reply(_list);
    } else if (method == reflection_schema_method) {
      const auto p = call.payload();
      const std::string_view wanted(reinterpret_cast<const char*>(p.data()), p.size());
      for (const auto& [name, s] : _services) {
        if (name == wanted || s.full_name == wanted) {
          call.reply(std::as_bytes(s.bfbs));
          return;
        }
      }
      call.fail(status::bad_request, "reflection.schema: no served service named '" + std::string(wanted) + "'");
    } else {
      call.fail(status::unknown_method, "reflection has no method named '" + std::string(method) +
                                            "' (it has reflection.list and reflection.schema)");
    }
  }

 private:
  const std::map<std::string, served_service, std::less<>> _services;
  const std::string _list;  // built once: the answer never changes
};

}  // namespace

std::string reflection_list_json(const std::vector<schema_blob>& schemas) { return list_json(index_schemas(schemas)); }

void add_reflection(server& s, std::vector<schema_blob> schemas, endpoint_options options) {
  s.register_endpoint(reflection_endpoint_name, std::make_shared<reflection_endpoint>(index_schemas(schemas)),
                      std::move(options));
}

}  // namespace ringrpc
