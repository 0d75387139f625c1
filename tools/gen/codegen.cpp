#include "codegen.hpp"

#include <flatbuffers/idl.h>
#include <flatbuffers/reflection_generated.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <tuple>

#include "ringrpc/service.hpp"
#include "wire/schema_doc.hpp"

namespace ringrpc::gen {
namespace {

// Names the generated classes declare themselves or inherit from ringrpc::endpoint; a method
// of the same name would not compile, or would silently hide one of them.
const std::set<std::string, std::less<>> reserved_member_names = {
    "stub", "service", "service_name", "schema", "payload_alignment", "ringrpc_dispatch", "_client", "_target",
    "receive_and_reply", "receive", "on_start", "on_stop", "on_connected", "on_disconnected",
    "on_network_error", "on_error", "endpoint",
};

const std::set<std::string, std::less<>> cpp_keywords = {
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case",
    "catch", "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval",
    "constexpr", "constinit", "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype",
    "default", "delete", "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern",
    "false", "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new",
    "noexcept", "not", "not_eq", "nullptr", "operator", "or", "or_eq", "private", "protected", "public",
    "register", "reinterpret_cast", "requires", "return", "short", "signed", "sizeof", "static",
    "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local", "throw", "true",
    "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void", "volatile",
    "wchar_t", "while", "xor", "xor_eq",
};

std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

std::string qualified(const flatbuffers::Definition& d) {
  return d.defined_namespace ? d.defined_namespace->GetFullyQualifiedName(d.name) : d.name;
}

// Identifiers flatc's C++ generator declares for a type, in the type's namespace: a service of
// one of these names would be a redefinition.
std::vector<std::string> flatc_names_for(const std::string& type) {
  return {type,
          type + "Builder",
          type + "T",
          "Create" + type,
          "Create" + type + "Direct",
          "Get" + type,
          "GetMutable" + type,
          "GetSizePrefixed" + type,
          "Verify" + type + "Buffer",
          "VerifySizePrefixed" + type + "Buffer",
          "Finish" + type + "Buffer",
          "FinishSizePrefixed" + type + "Buffer",
          "EnumName" + type,
          "EnumNames" + type,
          "EnumValues" + type};
}

std::string ns_key(const flatbuffers::Namespace* ns) {
  std::string s;
  if (ns) {
    for (const auto& c : ns->components) s += c + ".";
  }
  return s;
}

void check_identifier(const std::string& what, const std::string& name, std::vector<std::string>& problems) {
  if (cpp_keywords.count(name)) problems.push_back(what + " is a C++ keyword; rename it");
  if (name.rfind("ringrpc_", 0) == 0 || name.rfind('_', 0) == 0) {
    problems.push_back(what + " starts with 'ringrpc_' or '_', which generated code reserves");
  }
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

void doc_lines(std::ostream& out, const std::vector<std::string>& doc, const std::string& indent) {
  for (const auto& line : doc) out << indent << "///" << line << "\n";
}

std::string sanitize(std::string_view s) {
  std::string out;
  for (const char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out += ok ? c : '_';
  }
  return out;
}

}  // namespace

std::vector<id_collision> find_id_collisions(const std::vector<std::string>& full_names) {
  std::vector<id_collision> out;
  std::map<std::uint32_t, std::string> seen;
  for (const auto& name : full_names) {
    const std::uint32_t id = method_id(name);
    const auto [it, inserted] = seen.emplace(id, name);
    if (!inserted && it->second != name) out.push_back({it->second, name, id});
  }
  return out;
}

std::vector<service_desc> collect_services(const flatbuffers::Parser& parser, const std::string& schema_file) {
  std::vector<std::string> problems;
  std::vector<std::string> all_methods;
  std::map<std::string, std::string> service_by_name;  // unqualified -> qualified

  // Types per namespace, for clashes between a service and flatc's own declarations.
  std::map<std::string, std::set<std::string>> flatc_names;
  for (const auto* s : parser.structs_.vec) {
    for (auto& n : flatc_names_for(s->name)) flatc_names[ns_key(s->defined_namespace)].insert(n);
  }
  for (const auto* e : parser.enums_.vec) {
    for (auto& n : flatc_names_for(e->name)) flatc_names[ns_key(e->defined_namespace)].insert(n);
  }

  std::vector<service_desc> out;
  for (const auto* svc : parser.services_.vec) {
    const std::string full = qualified(*svc);
    const auto [prev, fresh] = service_by_name.emplace(svc->name, full);
    if (!fresh) {
      problems.push_back("services " + prev->second + " and " + full + " would both be served as '" + svc->name +
                         "' (the endpoint name is the unqualified service name); rename one");
    }
    for (const auto* call : svc->calls.vec) all_methods.push_back(svc->name + "." + call->name);
    const bool ours = svc->file == schema_file;
    if (!ours) continue;

    service_desc d;
    d.name = svc->name;
    if (svc->defined_namespace) d.name_space = svc->defined_namespace->components;
    d.doc = svc->doc_comment;
    check_identifier("service " + full, svc->name, problems);
    if (svc->name == "ringrpc" || svc->name == "flatbuffers" || svc->name == "std") {
      problems.push_back("service " + full + " has the name of a namespace the generated code uses; rename it");
    }
    if (flatc_names[ns_key(svc->defined_namespace)].count(svc->name)) {
      problems.push_back("service " + full + " has the name of a declaration flatc generates for a type of the " +
                         "same namespace; rename the service or the type");
    }

    std::set<std::string> stub_members;
    for (const auto* call : svc->calls.vec) {
      method_desc m;
      m.name = call->name;
      m.full_name = svc->name + "." + call->name;
      m.id = method_id(m.full_name);
      m.request_type = qualified(*call->request);
      m.reply_type = qualified(*call->response);
      m.doc = call->doc_comment;
      if (const auto* streaming = call->attributes.Lookup("streaming");
          streaming != nullptr && streaming->constant != "none") {
        m.streaming = streaming->constant;
        if (m.streaming != "server" && m.streaming != "client" && m.streaming != "bidi") {
          problems.push_back("method " + m.full_name + " has an unknown streaming kind (streaming: \"" + m.streaming +
                             "\"); it is one of \"server\", \"client\", \"bidi\" or \"none\"");
        }
      }
      check_identifier("method " + m.full_name, m.name, problems);
      if (reserved_member_names.count(m.name)) {
        problems.push_back("method " + m.full_name + " has a name the generated classes use themselves ('" + m.name +
                           "'); rename it");
      }
      // A stream method has one stub member; a unary one has five.
      std::vector<std::string> members = {m.name};
      if (m.streaming.empty()) {
        members.insert(members.end(), {m.name + "_async", m.name + "_future", m.name + "_co", m.name + "_one_way"});
      }
      for (const std::string& member : members) {
        if (!stub_members.insert(member).second) {
          problems.push_back("method " + m.full_name + " would generate stub member '" + member +
                             "' twice (another method is named " + member + "); rename one");
        }
      }
      d.methods.push_back(std::move(m));
    }
    out.push_back(std::move(d));
  }

  for (const auto& c : find_id_collisions(all_methods)) {
    problems.push_back("method id collision: " + c.first + " and " + c.second + " both have id " + hex32(c.id) +
                       " (FNV-1a of the name, docs/protocol.md); rename one of them");
  }
  if (!problems.empty()) throw schema_error(join(problems));
  return out;
}

std::size_t max_alignment(const flatbuffers::Parser& parser) {
  std::size_t a = 8;
  for (const auto* s : parser.structs_.vec) a = std::max(a, s->minalign);
  return a;
}

void check_bfbs_matches(std::span<const std::uint8_t> bfbs, const flatbuffers::Parser& parser) {
  flatbuffers::Verifier v(bfbs.data(), bfbs.size());
  if (!reflection::VerifySchemaBuffer(v)) {
    throw schema_error("the binary schema is not valid (expected the output of flatc --binary --schema)\n");
  }
  // The last member is the method's stream kind, which reflection shows from the binary schema.
  using entry = std::tuple<std::string, std::string, std::string, std::string, std::string>;
  std::set<entry> from_bfbs, from_parser;
  const auto* schema = reflection::GetSchema(bfbs.data());
  if (const auto* services = schema->services()) {
    for (const auto* s : *services) {
      from_bfbs.insert({s->name()->str(), "", "", "", ""});
      if (!s->calls()) continue;
      for (const auto* c : *s->calls()) {
        from_bfbs.insert({s->name()->str(), c->name()->str(), c->request()->name()->str(), c->response()->name()->str(),
                          ringrpc::detail::streaming_kind(*c)});
      }
    }
  }
  for (const auto* s : parser.services_.vec) {
    from_parser.insert({qualified(*s), "", "", "", ""});
    for (const auto* c : s->calls.vec) {
      const auto* streaming = c->attributes.Lookup("streaming");
      const std::string kind = streaming != nullptr && streaming->constant != "none" ? streaming->constant : "";
      from_parser.insert({qualified(*s), c->name, qualified(*c->request), qualified(*c->response), kind});
    }
  }
  if (from_bfbs != from_parser) {
    throw schema_error("flatc's binary schema declares other services or methods than the schema parsed here "
                       "(or lacks their streaming kinds: make it with flatc --bfbs-builtins); are flatc and "
                       "libflatbuffers the same version?\n");
  }
}

namespace {

// The C++ spelling of a fully qualified schema type: "example.HelloRequest" is
// "::example::HelloRequest" (rooted, so a service's namespace cannot shadow it).
std::string cpp_type(std::string schema_name) {
  for (std::size_t p; (p = schema_name.find('.')) != std::string::npos;) schema_name.replace(p, 1, "::");
  return "::" + schema_name;
}

// The name of the embedded binary schema. Unique per schema content, so headers of two schemas
// with one file name can meet in a program without an ODR clash.
std::string schema_data_name(const header_input& in) {
  std::uint32_t content_hash = 0x811c9dc5u;
  for (const auto b : in.bfbs) content_hash = (content_hash ^ b) * 0x01000193u;
  return sanitize(in.schema_name) + "_" + hex32(content_hash).substr(2);
}

// The header's opening: what it is, its includes, and the binary schema as an array the
// reflection service serves.
void write_preamble(std::ostream& o, const header_input& in, const std::string& data_name) {
  o << "// Generated by ringrpc-gen from " << in.schema_name << ". Do not edit.\n"
    << "// Typed client stubs and server bases for its rpc_services; docs/services.md explains them.\n"
    << "// Method ids are 32-bit FNV-1a of \"Service.Method\" (docs/protocol.md, \"Method ids\").\n"
    << "#pragma once\n\n"
    << "#include <cstddef>\n#include <cstdint>\n#include <functional>\n#include <future>\n#include <memory>\n"
    << "#include <string_view>\n\n"
    << "#include <ringrpc/reflection.hpp>\n#include <ringrpc/service.hpp>\n#include <ringrpc/typed_stream.hpp>\n"
    << "#include <ringrpc/typed_task.hpp>\n\n"
    << "#include \"" << in.flatc_header << "\"\n\n"
    << "namespace ringrpc_schema_data {\n"
    << "// " << in.schema_name << " as a binary schema (flatc --binary --schema --bfbs-comments), for reflection.\n"
    << "alignas(8) inline constexpr std::uint8_t " << data_name << "[] = {";
  for (std::size_t i = 0; i < in.bfbs.size(); ++i) {
    if (i % 16 == 0) o << "\n   ";
    char buf[8];
    std::snprintf(buf, sizeof buf, " 0x%02x,", in.bfbs[i]);
    o << buf;
  }
  o << "\n};\n}  // namespace ringrpc_schema_data\n";
}

// The service's own struct: its endpoint name, each method's wire name and id (checked at
// compile time against ringrpc::method_id), its schema, and what the stub and base share.
void write_service_struct(std::ostream& o, const service_desc& s, const std::string& data_name,
                          std::size_t alignment) {
  doc_lines(o, s.doc, "");
  o << "struct " << s.name << " {\n"
    << "  /// The endpoint name: calls to \"" << s.name << ".Method\" reach the service registered under it.\n"
    << "  static constexpr char service_name[] = \"" << s.name << "\";\n";
  for (const auto& m : s.methods) {
    o << "  static constexpr char " << m.name << "_method[] = \"" << m.full_name << "\";\n"
      << "  static constexpr std::uint32_t " << m.name << "_id = " << hex32(m.id) << "u;\n";
  }
  o << "\n  /// The schema declaring this service, for ringrpc::add_reflection.\n"
    << "  static ::ringrpc::schema_blob schema() noexcept {\n"
    << "    return {service_name, ::ringrpc_schema_data::" << data_name << "};\n"
    << "  }\n\n"
    << "  class stub;\n  class service;\n\n"
    << " private:\n"
    << "  static constexpr std::size_t payload_alignment = " << alignment << ";\n";
  for (const auto& m : s.methods) {
    o << "  static constexpr ::ringrpc::detail::typed_method " << m.name << "_info{" << m.name << "_method, \""
      << m.request_type << "\", \"" << m.reply_type << "\"};\n";
  }
  o << "};\n";
  for (const auto& m : s.methods) {
    o << "static_assert(" << s.name << "::" << m.name << "_id == ::ringrpc::method_id(" << s.name << "::" << m.name
      << "_method));\n";
  }
}

// The ::ringrpc::stream_kind of a streaming method, spelled in C++.
std::string kind_expr(const method_desc& m) { return "::ringrpc::stream_kind::" + m.streaming; }

std::string stream_type(const method_desc& m) {
  return "::ringrpc::typed_client_stream<" + cpp_type(m.request_type) + ", " + cpp_type(m.reply_type) + ">";
}

// A streaming method's one stub member: it opens the stream (a server stream with its request).
void write_stub_stream(std::ostream& o, const method_desc& m) {
  const std::string req = cpp_type(m.request_type), rep = cpp_type(m.reply_type);
  o << "\n";
  doc_lines(o, m.doc, "  ");
  o << "  /// Opens the " << m.streaming << " stream " << m.full_name << " (ringrpc/typed_stream.hpp).\n";
  if (m.streaming == "server") {
    o << "  " << stream_type(m) << " " << m.name << "(::flatbuffers::FlatBufferBuilder& request, ::flatbuffers::Offset<"
      << req << "> root,\n      const ::ringrpc::stream_options& options = {}) const {\n"
      << "    return ::ringrpc::detail::open_typed_stream<" << req << ", " << rep << ">(_target, " << m.name
      << "_info, " << kind_expr(m) << ", request, root, options);\n";
  } else {
    o << "  " << stream_type(m) << " " << m.name << "(const ::ringrpc::stream_options& options = {}) const {\n"
      << "    return ::ringrpc::detail::open_typed_stream<" << req << ", " << rep << ">(_target, " << m.name
      << "_info, " << kind_expr(m) << ", {}, options);\n";
  }
  o << "  }\n";
}

// One method's five calls on the stub: blocking, with a callback, as a future, awaited by a
// coroutine, one-way.
void write_stub_method(std::ostream& o, const method_desc& m) {
  if (!m.streaming.empty()) return write_stub_stream(o, m);
  const std::string rep = cpp_type(m.reply_type);
  const std::string args =
      "::flatbuffers::FlatBufferBuilder& request, ::flatbuffers::Offset<" + cpp_type(m.request_type) + "> root";
  o << "\n";
  doc_lines(o, m.doc, "  ");
  o << "  ::ringrpc::result<" << rep << "> " << m.name << "(" << args
    << ", ::ringrpc::call_options options = {}) const {\n"
    << "    return ::ringrpc::detail::typed_call<" << rep << ">(_target, " << m.name << "_info, request, root, options);\n"
    << "  }\n"
    << "  /// Asynchronous " << m.name << ": `done` runs once, on the client runtime's thread.\n"
    << "  void " << m.name << "_async(" << args << ", std::function<void(::ringrpc::result<" << rep
    << ">)> done,\n"
    << "      ::ringrpc::call_options options = {}) const {\n"
    << "    ::ringrpc::detail::typed_call_async<" << rep << ">(_target, " << m.name
    << "_info, request, root, std::move(done), options);\n"
    << "  }\n"
    << "  ::ringrpc::reply_future<::ringrpc::result<" << rep << ">> " << m.name << "_future(" << args
    << ",\n      ::ringrpc::call_options options = {}) const {\n"
    << "    return ::ringrpc::detail::typed_call_future<" << rep << ">(_target, " << m.name
    << "_info, request, root, options);\n"
    << "  }\n"
    << "  /// " << m.name << " for a coroutine: `co_await` yields the result (ringrpc/typed_task.hpp).\n"
    << "  ::ringrpc::typed_call_awaitable<" << rep << "> " << m.name << "_co(" << args
    << ",\n      ::ringrpc::call_options options = {}) const {\n"
    << "    return ::ringrpc::detail::typed_co_call<" << rep << ">(_target, " << m.name
    << "_info, request, root, std::move(options));\n"
    << "  }\n"
    << "  /// " << m.name << " as a one-way message: the server runs the method and drops its answer.\n"
    << "  /// False when nothing was sent (closed, or at the connection's pending limits).\n"
    << "  bool " << m.name << "_one_way(" << args << ") const {\n"
    << "    return ::ringrpc::detail::typed_one_way(_target, " << m.name << "_info, request, root);\n"
    << "  }\n";
}

// The client stub: typed calls over a client or a channel.
void write_stub(std::ostream& o, const service_desc& s) {
  o << "\n/// Typed calls to " << s.name << " over one connection or a channel. Each call finishes `request`\n"
    << "/// with `root`, sends it and clears `request` for the next one; the reply is verified as the\n"
    << "/// reply type before it is handed over. The stub follows its client or channel through moves;\n"
    << "/// once that is destroyed, calls fail with client_closed. Copyable, cheap.\n"
    << "class " << s.name << "::stub {\n"
    << " public:\n"
    << "  explicit stub(::ringrpc::client& connection) noexcept : _target(connection) {}\n"
    << "  /// Over a channel: `idempotent` lets every call of this stub be retried on another member\n"
    << "  /// when its connection fails under it (channel_call_options::idempotent).\n"
    << "  explicit stub(::ringrpc::channel& channel, bool idempotent = false) noexcept\n"
    << "      : _target(channel, idempotent) {}\n";
  for (const auto& m : s.methods) write_stub_method(o, m);
  o << "\n private:\n  ::ringrpc::detail::stub_target _target;\n};\n";
}

// The base's ringrpc_dispatch body: the method id picks a case and the name confirms it (a
// name the schema does not declare may still hash to one of its ids); the rest is unknown_method.
void write_dispatch(std::ostream& o, const service_desc& s) {
  // Stream methods are stream endpoints of their own (ringrpc_add_streams): never a call here.
  const bool any_unary =
      std::any_of(s.methods.begin(), s.methods.end(), [](const method_desc& m) { return m.streaming.empty(); });
  if (!any_unary) {
    o << "    ::ringrpc::detail::unknown_method(call, service_name);\n";
    return;
  }
  o << "    const std::string_view method = call.method();\n"
    << "    switch (::ringrpc::method_id(method)) {\n";
  for (const auto& m : s.methods) {
    if (!m.streaming.empty()) continue;
    const std::string req = cpp_type(m.request_type), rep = cpp_type(m.reply_type);
    o << "      case " << m.name << "_id:\n"
      << "        // The id only narrows the search; the name decides.\n"
      << "        if (method == " << m.name << "_method) {\n"
      << "          ::ringrpc::detail::serve<" << req << ", " << rep << ">(*this, call, " << m.name
      << "_info, payload_alignment,\n"
      << "              [this](::ringrpc::call_context& c, const " << req << "& r) { return this->" << m.name
      << "(c, r); });\n"
      << "          return;\n"
      << "        }\n"
      << "        break;\n";
  }
  o << "      default:\n        break;\n    }\n"
    << "    ::ringrpc::detail::unknown_method(call, service_name);\n";
}

// A streaming method's virtual on the base: it makes the stream's typed handler (a server
// stream's with the verified request); not overridden, it fails the stream with unknown_method.
void write_base_stream(std::ostream& o, const method_desc& m) {
  const std::string req = cpp_type(m.request_type), rep = cpp_type(m.reply_type);
  o << "  /// The " << m.streaming << " stream " << m.full_name << ": returns its handler (null once it ended the\n"
    << "  /// stream itself). `stream` (and a request) are valid until this returns: keep a copy.\n"
    << "  virtual std::unique_ptr<::ringrpc::typed_stream_handler<" << req << ", " << rep << ">> " << m.name
    << "(\n      ::ringrpc::typed_server_stream<" << rep << ">& stream";
  if (m.streaming == "server") o << ", const " << req << "& /*request*/";
  o << ") {\n"
    << "    return ::ringrpc::detail::stream_not_implemented(stream, " << m.name << "_info);\n"
    << "  }\n";
}

// What register_service calls to add each streaming method as a stream method of its own.
void write_add_streams(std::ostream& o, const service_desc& s) {
  const bool any_stream =
      std::any_of(s.methods.begin(), s.methods.end(), [](const method_desc& m) { return !m.streaming.empty(); });
  if (!any_stream) return;
  o << "\n  /// Called by ::ringrpc::register_service: each streaming method as a stream method.\n"
    << "  static void ringrpc_add_streams(::ringrpc::detail::stream_registrar& server, std::shared_ptr<service> self) {\n";
  for (const auto& m : s.methods) {
    if (m.streaming.empty()) continue;
    const std::string req = cpp_type(m.request_type), rep = cpp_type(m.reply_type);
    o << "    ::ringrpc::detail::add_typed_stream<" << req << ", " << rep << ">(server, " << m.name << "_info, "
      << kind_expr(m) << ", payload_alignment,\n"
      << "        [self](::ringrpc::typed_server_stream<" << rep << ">& stream, const " << req
      << "* request) {\n";
    if (m.streaming == "server") {
      o << "          return self->" << m.name << "(stream, *request);\n";
    } else {
      o << "          (void)request;\n          return self->" << m.name << "(stream);\n";
    }
    o << "        });\n";
  }
  o << "  }\n";
}

// The server base: a virtual per method answering unknown_method until overridden, and the
// endpoint hooks that route each call to it.
void write_service_base(std::ostream& o, const service_desc& s) {
  o << "\n/// Derive, override the methods you serve (the others answer unknown_method), and register\n"
    << "/// with ::ringrpc::register_service(server, std::make_shared<Impl>()). Requests are verified\n"
    << "/// before a method runs; an rpc_exception thrown answers its status, any other exception\n"
    << "/// `internal` with what().\n"
    << "class " << s.name << "::service : public ::ringrpc::endpoint {\n"
    << " public:\n"
    << "  static constexpr const char* service_name = " << s.name << "::service_name;\n";
  for (const auto& m : s.methods) {
    const std::string req = cpp_type(m.request_type), rep = cpp_type(m.reply_type);
    o << "\n";
    doc_lines(o, m.doc, "  ");
    if (!m.streaming.empty()) {
      write_base_stream(o, m);
      continue;
    }
    o << "  virtual ::ringrpc::result<" << rep << "> " << m.name << "(::ringrpc::call_context& /*call*/, const "
      << req << "& /*request*/) {\n"
      << "    return ::ringrpc::detail::not_implemented(" << m.name << "_info);\n"
      << "  }\n";
  }
  write_add_streams(o, s);
  o << "\n  void receive_and_reply(::ringrpc::call_context& call) override { ringrpc_dispatch(call); }\n"
    << "  /// One-way messages run the method too; the answer is dropped.\n"
    << "  void receive(::ringrpc::call_context& message) override { ringrpc_dispatch(message); }\n"
    << "\n private:\n"
    << "  void ringrpc_dispatch(::ringrpc::call_context& call) {\n";
  write_dispatch(o, s);
  o << "  }\n};\n";
}

}  // namespace

std::string generate_header(const header_input& in) {
  std::ostringstream o;
  const std::string data_name = schema_data_name(in);
  write_preamble(o, in, data_name);
  for (const auto& s : in.services) {
    std::string ns;
    for (const auto& c : s.name_space) ns += (ns.empty() ? "" : "::") + c;
    o << "\n";
    if (!ns.empty()) o << "namespace " << ns << " {\n\n";
    write_service_struct(o, s, data_name, in.alignment);
    write_stub(o, s);
    write_service_base(o, s);
    if (!ns.empty()) o << "\n}  // namespace " << ns << "\n";
  }
  return o.str();
}

}  // namespace ringrpc::gen
