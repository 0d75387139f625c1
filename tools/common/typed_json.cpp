#include "typed_json.hpp"

#include <flatbuffers/idl.h>
#include <flatbuffers/reflection.h>
#include <flatbuffers/util.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#if defined(__SANITIZE_ADDRESS__)
#define RINGRPC_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RINGRPC_LSAN 1
#endif
#endif
#ifdef RINGRPC_LSAN
#include <sanitizer/lsan_interface.h>
#endif

#include "ringrpc/reflection.hpp"
#include "ringrpc/service.hpp"
#include "verify_buffer.hpp"
#include "wire/schema_doc.hpp"

namespace ringrpc::tools {
namespace {

std::string_view unqualified(std::string_view name) {
  const auto dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

const reflection::Schema& schema_of(std::span<const std::uint8_t> bfbs) { return *reflection::GetSchema(bfbs.data()); }

// --- describe: schema syntax from the binary schema

const char* scalar_name(reflection::BaseType t) {
  switch (t) {
    case reflection::Bool: return "bool";
    case reflection::Byte: return "byte";
    case reflection::UByte: return "ubyte";
    case reflection::Short: return "short";
    case reflection::UShort: return "ushort";
    case reflection::Int: return "int";
    case reflection::UInt: return "uint";
    case reflection::Long: return "long";
    case reflection::ULong: return "ulong";
    case reflection::Float: return "float";
    case reflection::Double: return "double";
    case reflection::String: return "string";
    default: return "?";
  }
}

class describer {
 public:
  explicit describer(const reflection::Schema& s) : _s(s) {}

  std::string type_name(reflection::BaseType base, int index) {
    if (base == reflection::Obj) return use_object(index);
    if (base == reflection::Union || base == reflection::UType || (index >= 0 && base <= reflection::ULong)) {
      return use_enum(index);
    }
    return scalar_name(base);
  }

  std::string field_type(const reflection::Type& t) {
    if (t.base_type() == reflection::Vector) return "[" + type_name(t.element(), t.index()) + "]";
    if (t.base_type() == reflection::Array) {
      return "[" + type_name(t.element(), t.index()) + ":" + std::to_string(t.fixed_length()) + "]";
    }
    return type_name(t.base_type(), t.index());
  }

  void doc(std::ostream& o, const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* lines,
           const char* indent) {
    if (!lines) return;
    for (const auto* l : *lines) o << indent << "///" << l->str() << "\n";
  }

  std::string default_of(const reflection::Field& f) {
    const auto base = f.type()->base_type();
    if (f.optional() && base >= reflection::Bool && base <= reflection::Double) return " = null";
    if (base == reflection::Float || base == reflection::Double) {
      if (f.default_real() == 0) return "";
      std::ostringstream o;
      o << " = " << f.default_real();
      return o.str();
    }
    if (base < reflection::Bool || base > reflection::ULong || f.default_integer() == 0) return "";
    if (base == reflection::Bool) return " = true";
    if (f.type()->index() >= 0) {
      const auto* e = _s.enums()->Get(static_cast<flatbuffers::uoffset_t>(f.type()->index()));
      for (const auto* v : *e->values()) {
        if (v->value() == f.default_integer()) return " = " + v->name()->str();
      }
    }
    return " = " + std::to_string(f.default_integer());
  }

  void object(std::ostream& o, const reflection::Object& obj) {
    o << "\n";
    doc(o, obj.documentation(), "");
    o << (obj.is_struct() ? "struct " : "table ") << obj.name()->str() << " {\n";
    std::vector<const reflection::Field*> fields(obj.fields()->begin(), obj.fields()->end());
    std::sort(fields.begin(), fields.end(), [](auto* a, auto* b) { return a->id() < b->id(); });
    for (const auto* f : fields) {
      // A union's hidden `NAME_type` field is implied by the union field itself.
      if (f->type()->base_type() == reflection::UType) continue;
      doc(o, f->documentation(), "  ");
      o << "  " << f->name()->str() << ": " << field_type(*f->type()) << default_of(*f);
      std::vector<std::string> attrs;
      if (f->required()) attrs.push_back("required");
      if (f->deprecated()) attrs.push_back("deprecated");
      if (!attrs.empty()) {
        o << " (";
        for (std::size_t i = 0; i < attrs.size(); ++i) o << (i ? ", " : "") << attrs[i];
        o << ")";
      }
      o << ";\n";
    }
    o << "}\n";
  }

  void enumeration(std::ostream& o, const reflection::Enum& e) {
    o << "\n";
    doc(o, e.documentation(), "");
    if (e.is_union()) {
      o << "union " << e.name()->str() << " {";
      bool first = true;
      for (const auto* v : *e.values()) {
        if (v->value() == 0) continue;  // NONE
        o << (first ? " " : ", ")
          << (v->union_type() && v->union_type()->index() >= 0 ? use_object(v->union_type()->index())
                                                               : v->name()->str());
        first = false;
      }
      o << " }\n";
      return;
    }
    o << "enum " << e.name()->str() << " : " << scalar_name(e.underlying_type()->base_type()) << " {";
    bool first = true;
    for (const auto* v : *e.values()) {
      o << (first ? " " : ", ") << v->name()->str() << " = " << v->value();
      first = false;
    }
    o << " }\n";
  }

  /// Prints every type used so far, and those they use, each once.
  void types(std::ostream& o) {
    while (!_pending_objects.empty() || !_pending_enums.empty()) {
      if (!_pending_objects.empty()) {
        const int i = _pending_objects.front();
        _pending_objects.erase(_pending_objects.begin());
        object(o, *_s.objects()->Get(static_cast<flatbuffers::uoffset_t>(i)));
      } else {
        const int i = _pending_enums.front();
        _pending_enums.erase(_pending_enums.begin());
        enumeration(o, *_s.enums()->Get(static_cast<flatbuffers::uoffset_t>(i)));
      }
    }
  }

  std::string use_object(int index) {
    if (_seen_objects.insert(index).second) _pending_objects.push_back(index);
    return _s.objects()->Get(static_cast<flatbuffers::uoffset_t>(index))->name()->str();
  }
  std::string use_enum(int index) {
    if (_seen_enums.insert(index).second) _pending_enums.push_back(index);
    return _s.enums()->Get(static_cast<flatbuffers::uoffset_t>(index))->name()->str();
  }

  int object_index(const reflection::Object* obj) const {
    for (flatbuffers::uoffset_t i = 0; i < _s.objects()->size(); ++i) {
      if (_s.objects()->Get(i) == obj) return static_cast<int>(i);
    }
    return -1;
  }

 private:
  const reflection::Schema& _s;
  std::set<int> _seen_objects, _seen_enums;
  std::vector<int> _pending_objects, _pending_enums;
};

std::string hex_id(std::uint32_t id) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", id);
  return buf;
}

bool matches_type_name(std::string_view full, std::string_view wanted) {
  return full == wanted || unqualified(full) == wanted;
}

}  // namespace

typed_schema::typed_schema() = default;
typed_schema::typed_schema(typed_schema&&) noexcept = default;
typed_schema& typed_schema::operator=(typed_schema&&) noexcept = default;
typed_schema::~typed_schema() = default;

std::span<const std::uint8_t> typed_schema::bfbs() const noexcept {
  return {reinterpret_cast<const std::uint8_t*>(_storage.data()), _size};
}

typed_schema typed_schema::from_bfbs(std::span<const std::uint8_t> bfbs, const std::string& origin) {
  typed_schema s;
  s._storage.resize((bfbs.size() + 7) / 8);
  if (!bfbs.empty()) std::memcpy(s._storage.data(), bfbs.data(), bfbs.size());
  s._size = bfbs.size();
  s.load(origin);
  return s;
}

typed_schema typed_schema::from_file(const std::string& path, const std::vector<std::string>& include_dirs) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw tool_error(exit_usage, "cannot read schema " + path);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() >= 8 && flatbuffers::BufferHasIdentifier(bytes.data(), reflection::SchemaIdentifier())) {
    return from_bfbs({reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()}, path);
  }
  // A .fbs: parsed and serialized exactly as flatc --binary --schema --bfbs-comments
  // --bfbs-builtins would (ringrpc-gen's flags).
  flatbuffers::IDLOptions opts;
  opts.binary_schema_comments = true;
  opts.binary_schema_builtins = true;  // the methods' `streaming` kinds
  flatbuffers::Parser parser(opts);
  const auto dir = std::filesystem::path(path).parent_path();
  std::vector<std::string> search = {dir.empty() ? std::string(".") : dir.string()};
  search.insert(search.end(), include_dirs.begin(), include_dirs.end());
  std::vector<const char*> search_c;
  for (const auto& s : search) search_c.push_back(s.c_str());
  search_c.push_back(nullptr);
  if (!parser.Parse(bytes.c_str(), search_c.data(), path.c_str())) {
    throw tool_error(exit_usage, "schema " + path + " does not parse: " + parser.error_);
  }
  parser.Serialize();
  return from_bfbs({parser.builder_.GetBufferPointer(), parser.builder_.GetSize()}, path);
}

void typed_schema::load(const std::string& origin) {
  const auto data = bfbs();
  flatbuffers::Verifier v(data.data(), data.size());
  if (!reflection::VerifySchemaBuffer(v)) {
    throw tool_error(exit_usage, origin + " is not a valid binary schema");
  }
  if (std::string why = schema_problem(schema_of(data)); !why.empty()) {
    throw tool_error(exit_usage, origin + " is not a usable binary schema: " + why);
  }
  _parser = std::make_unique<flatbuffers::Parser>();
  if (!_parser->Deserialize(data.data(), data.size())) {
    const std::string error = "cannot load the binary schema from " + origin + ": " + _parser->error_;
    // A Deserialize that failed part-way has freed a definition its tables still hold (2.0.8),
    // so destroying the parser would free it again. schema_problem() turns away the schemas
    // known to get here; for any other, one parser's memory is the price of not crashing.
    flatbuffers::Parser* broken = _parser.release();
#ifdef RINGRPC_LSAN
    __lsan_ignore_object(broken);
#endif
    (void)broken;
    throw tool_error(exit_usage, error);
  }
  _methods.clear();
  const auto& s = schema_of(data);
  if (!s.services()) return;
  for (const auto* svc : *s.services()) {
    if (!svc->calls()) continue;
    for (const auto* call : *svc->calls()) {
      method_info m;
      m.service_full = svc->name()->str();
      m.service = std::string(unqualified(m.service_full));
      m.name = call->name()->str();
      m.full_name = m.service + "." + m.name;
      m.id = method_id(m.full_name);
      m.request = call->request()->name()->str();
      m.reply = call->response()->name()->str();
      m.doc = detail::joined_doc(call->documentation());
      m.streaming = detail::streaming_kind(*call);
      _methods.push_back(std::move(m));
    }
  }
}

const method_info* typed_schema::find_method(std::string_view name) const noexcept {
  for (const auto& m : _methods) {
    if (name == m.full_name || name == m.service_full + "." + m.name) return &m;
  }
  return nullptr;
}

const method_info& typed_schema::method(std::string_view name) const {
  if (const auto* m = find_method(name)) return *m;
  const auto dot = name.rfind('.');
  const std::string_view service = dot == std::string_view::npos ? std::string_view{} : name.substr(0, dot);
  std::string same_service, services;
  std::set<std::string> seen;
  for (const auto& m : _methods) {
    if (m.service == service || m.service_full == service) same_service += (same_service.empty() ? "" : ", ") + m.name;
    if (seen.insert(m.service).second) services += (services.empty() ? "" : ", ") + m.service;
  }
  std::string msg = "unknown method '" + std::string(name) + "'";
  if (!same_service.empty()) {
    msg += "; " + std::string(service) + " has " + same_service;
  } else {
    msg += services.empty() ? "; the schema declares no services" : "; services: " + services;
  }
  throw tool_error(exit_usage, msg);
}

std::vector<std::uint8_t> typed_schema::to_binary(const std::string& type, std::string_view json) {
  _parser->opts.strict_json = false;  // accept unquoted field names too, as flatc does
  if (!_parser->SetRootType(type.c_str())) {
    throw tool_error(exit_usage, "the schema has no table " + type);
  }
  const std::string text(json);
  if (!_parser->ParseJson(text.c_str())) {
    throw tool_error(exit_usage, "the JSON is not a valid " + type + ": " + _parser->error_);
  }
  const auto& b = _parser->builder_;
  return {b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()};
}

std::string typed_schema::to_json(const std::string& type, std::span<const std::uint8_t> bytes, json_style style) {
  const auto& s = schema_of(bfbs());
  const auto* obj = s.objects()->LookupByKey(type.c_str());
  if (!obj) throw tool_error(exit_usage, "the schema has no table " + type);
  // Verified first: the text generator trusts the buffer completely.
  std::vector<std::uint64_t> aligned((bytes.size() + 7) / 8);
  if (!bytes.empty()) std::memcpy(aligned.data(), bytes.data(), bytes.size());
  const auto* data = reinterpret_cast<const std::uint8_t*>(aligned.data());
  if (bytes.empty() || !verify_buffer(s, *obj, data, bytes.size())) {
    throw tool_error(exit_transport, "the reply is not a valid " + type + " (" + std::to_string(bytes.size()) +
                                         " bytes failed FlatBuffers verification)");
  }
  if (!_parser->SetRootType(type.c_str())) throw tool_error(exit_usage, "the schema has no table " + type);
  _parser->opts.strict_json = true;
  _parser->opts.natural_utf8 = true;
  _parser->opts.indent_step = style.compact ? -1 : 2;
  _parser->opts.output_default_scalars_in_json = style.emit_defaults;
  // verify_buffer checks nested_flatbuffer and flexbuffer fields as bytes only, so they are
  // shown as bytes: decoding them would trust what was not verified.
  _parser->opts.json_nested_flatbuffers = false;
  _parser->opts.json_nested_flexbuffers = false;
  std::string text;
  const bool ok = flatbuffers::GenerateText(*_parser, data, &text);
  _parser->opts.strict_json = false;
  if (!ok) throw tool_error(exit_transport, "the reply cannot be shown as JSON (a string is not valid UTF-8)");
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string typed_schema::describe(std::string_view name) const {
  const auto& s = schema_of(bfbs());
  describer d(s);
  std::ostringstream o;

  auto service_block = [&](const reflection::Service& svc, const reflection::RPCCall* only) {
    d.doc(o, svc.documentation(), "");
    o << "rpc_service " << svc.name()->str() << " {\n";
    for (const auto* c : *svc.calls()) {
      if (only && c != only) continue;
      const std::string full = std::string(unqualified(svc.name()->string_view())) + "." + c->name()->str();
      d.doc(o, c->documentation(), "  ");
      o << "  " << c->name()->str() << "(" << d.use_object(d.object_index(c->request())) << "): "
        << d.use_object(d.object_index(c->response()));
      if (const std::string kind = detail::streaming_kind(*c); !kind.empty()) o << " (streaming: \"" << kind << "\")";
      o << ";  // " << full << ", id " << hex_id(method_id(full))
        << "\n";
    }
    o << "}\n";
  };

  if (s.services()) {
    for (const auto* svc : *s.services()) {
      if (matches_type_name(svc->name()->string_view(), name)) {
        service_block(*svc, nullptr);
        d.types(o);
        return o.str();
      }
      if (!svc->calls()) continue;
      for (const auto* c : *svc->calls()) {
        const std::string full = std::string(unqualified(svc->name()->string_view())) + "." + c->name()->str();
        if (name == full || name == svc->name()->str() + "." + c->name()->str()) {
          service_block(*svc, c);
          d.types(o);
          return o.str();
        }
      }
    }
  }
  for (flatbuffers::uoffset_t i = 0; i < s.objects()->size(); ++i) {
    if (matches_type_name(s.objects()->Get(i)->name()->string_view(), name)) {
      d.use_object(static_cast<int>(i));
      d.types(o);
      return o.str().substr(1);  // no blank line first
    }
  }
  for (flatbuffers::uoffset_t i = 0; i < s.enums()->size(); ++i) {
    if (matches_type_name(s.enums()->Get(i)->name()->string_view(), name)) {
      d.use_enum(static_cast<int>(i));
      d.types(o);
      return o.str().substr(1);
    }
  }
  return {};
}

tool_error call_failure(std::string_view what, const call_result& r, std::chrono::microseconds timeout) {
  switch (r.error) {
    case call_error::server_status:
      return tool_error(exit_server_error, std::string(what) + " failed: " + std::string(to_string(r.code)) +
                                               (r.message.empty() ? "" : ": " + r.message));
    case call_error::timeout:
      return tool_error(exit_transport, std::string(what) + " timed out after " +
                                            std::to_string(timeout.count() / 1000) + " ms");
    default:
      return tool_error(exit_transport, std::string(what) + " failed: " + std::string(to_string(r.error)) +
                                            (r.message.empty() ? "" : ": " + r.message));
  }
}

namespace {

call_result reflection_call(const call_fn& call, std::string_view method, std::string_view payload) {
  call_result r = call(method, payload);
  if (r.error == call_error::server_status && r.code == status::unknown_method) {
    throw tool_error(exit_usage, "the server has no reflection endpoint (" + r.message +
                                     "); give the schema with --schema FILE");
  }
  return r;
}

call_fn caller_of(client& c, const call_options& options) {
  return [&c, &options](std::string_view method, std::string_view payload) { return c.call(method, payload, options); };
}

}  // namespace

typed_schema fetch_schema(const call_fn& call, std::string_view service, std::chrono::microseconds timeout) {
  const call_result r = reflection_call(call, reflection_schema_method, service);
  if (r.error == call_error::server_status && r.code == status::bad_request) {
    throw tool_error(exit_usage, "the server serves no service named '" + std::string(service) + "'");
  }
  if (!r.ok()) throw call_failure(reflection_schema_method, r, timeout);
  return typed_schema::from_bfbs({reinterpret_cast<const std::uint8_t*>(r.payload.data()), r.payload.size()},
                                 "the server's schema of " + std::string(service));
}

typed_schema fetch_schema(client& c, std::string_view service, const call_options& options) {
  return fetch_schema(caller_of(c, options), service, options.timeout);
}

std::string fetch_list(const call_fn& call, std::chrono::microseconds timeout) {
  const call_result r = reflection_call(call, reflection_list_method, {});
  if (!r.ok()) throw call_failure(reflection_list_method, r, timeout);
  return std::string(r.payload_string());
}

std::string fetch_list(client& c, const call_options& options) { return fetch_list(caller_of(c, options), options.timeout); }

}  // namespace ringrpc::tools
