// ringrpc-call: one typed call from the command line, JSON in and out (in the spirit of
// grpcurl). The schema comes from the server's reflection endpoint or from --schema.
//
//   ringrpc-call HOST:PORT list
//   ringrpc-call HOST:PORT describe NAME
//   ringrpc-call HOST:PORT call Service.Method -d '{"name":"x"}'
//   ringrpc-call HOST:PORT call echo -d hello        an untyped method: raw bytes in and out
//
// Exit status: 0 ok, 1 the server answered with an error status, 2 usage, schema or JSON
// problem, 3 connection problem, timeout or invalid reply (docs/services.md).

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <unistd.h>

#include "byte_text.hpp"
#include "cli_conventions.hpp"
#include "peer_probe.hpp"
#include "peer_sniff.hpp"
#include "ringrpc/client.hpp"
#include "stream_call.hpp"
#include "tls_target.hpp"
#include "typed_json.hpp"
#include "units.hpp"

namespace {

using namespace ringrpc::tools;

struct address {
  std::string host;
  std::uint16_t port = 0;
};

address parse_address(const std::string& text) {
  const auto colon = text.rfind(':');
  address a;
  if (colon == std::string::npos || colon == 0) {
    throw tool_error(exit_usage, "address '" + text + "' is not HOST:PORT");
  }
  a.host = text.substr(0, colon);
  if (a.host.size() >= 2 && a.host.front() == '[' && a.host.back() == ']') a.host = a.host.substr(1, a.host.size() - 2);
  unsigned port = 0;
  const char* first = text.data() + colon + 1;
  const char* last = text.data() + text.size();
  const auto [end, ec] = std::from_chars(first, last, port);
  if (ec != std::errc{} || end != last || port == 0 || port > 65535) {
    throw tool_error(exit_usage, "address '" + text + "': port is not in 1..65535");
  }
  a.port = static_cast<std::uint16_t>(port);
  return a;
}

// -d TEXT, -d @FILE, -d @- (standard input).
std::string read_data(const std::string& data) {
  if (data.empty() || data[0] != '@') return data;
  const std::string path = data.substr(1);
  if (path == "-") return {std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  std::ifstream in(path, std::ios::binary);
  if (!in) throw tool_error(exit_usage, "cannot read -d " + data);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// How long a first call may go unanswered before a second connection asks whether the server
// speaks ringrpc at all (a Redis or HTTP server waits silently for a request it can parse), and
// how long that question may take.
constexpr std::chrono::milliseconds probe_after{1000};
constexpr std::chrono::milliseconds probe_budget{1000};

class session {
 public:
  session(address where, std::string schema_file, std::vector<std::string> includes, ringrpc::call_options call,
          std::chrono::milliseconds connect_timeout)
      : _where(std::move(where)),
        _schema_file(std::move(schema_file)),
        _includes(std::move(includes)),
        _call(call),
        _connect_timeout(connect_timeout) {}

  /// ringrpcs://: the connection speaks TLS through `tls`.
  void use_tls(std::shared_ptr<ringrpc::record_layer> tls) { _tls = std::move(tls); }

  ringrpc::client& connection() {
    if (!_client) {
      ringrpc::client_options o;
      o.connect_timeout = _connect_timeout;
      o.tls = _tls;
      try {
        _client.emplace(ringrpc::client::connect(_where.host, _where.port, o));
      } catch (const std::system_error& e) {
        throw tool_error(exit_transport, e.what());  // "connect HOST:PORT: Connection refused"
      }
    }
    return *_client;
  }

  /// One call. Until the server has answered one, a call that fails as a non-ringrpc peer would
  /// make it fail (or is slow to answer) has the peer probed, and what it looks like reported.
  ringrpc::call_result call(std::string_view method, std::span<const std::byte> payload) {
    ringrpc::client& c = connection();
    if (_speaks_ringrpc) return c.call(method, payload, _call);
    auto pending = c.call_future(method, payload, _call);
    if (pending.wait_for(probe_after) != std::future_status::ready) check_peer(method, nullptr);
    ringrpc::call_result r = pending.get();
    if (r.ok() || r.error == ringrpc::call_error::server_status) {
      _speaks_ringrpc = true;
    } else if (r.error == ringrpc::call_error::protocol_error || r.error == ringrpc::call_error::connection_closed ||
               r.error == ringrpc::call_error::timeout) {
      check_peer(method, &r);
    }
    return r;
  }
  ringrpc::call_result call(std::string_view method, std::string_view payload) {
    return call(method, std::span(reinterpret_cast<const std::byte*>(payload.data()), payload.size()));
  }
  call_fn caller() {
    return [this](std::string_view method, std::string_view payload) { return call(method, payload); };
  }

  /// The schema declaring `service`: the --schema file, or the server's.
  typed_schema schema_for(std::string_view service) {
    if (!_schema_file.empty()) return typed_schema::from_file(_schema_file, _includes);
    return fetch_schema(caller(), service, _call.timeout);
  }
  std::string list() { return fetch_list(caller(), _call.timeout); }

  bool local_schema() const { return !_schema_file.empty(); }
  const ringrpc::call_options& call_options() const { return _call; }

 private:
  std::string authority() const {
    const bool v6 = _where.host.find(':') != std::string::npos;
    return (v6 ? "[" + _where.host + "]" : _where.host) + ":" + std::to_string(_where.port);
  }

  // Asks the peer on a connection of its own. Throws when it is plainly not a ringrpc server
  // (or, for ringrpcs://, a plaintext one); `failed` is the call's failure if it has ended,
  // null while it still waits (then only a clear verdict stops it).
  void check_peer(std::string_view method, const ringrpc::call_result* failed) {
    // Asked once: a slow first call that was probed while it waited is not probed again.
    if (!_probed) _probed = probe_peer(_where.host, _where.port, probe_budget);
    const peer_probe& p = *_probed;
    const std::string where = authority();
    if (p.sniffed == "ringrpc") {
      if (_tls && failed) {
        throw tool_error(exit_transport, failure_text(method, *failed) + "; " + where + " answered a plaintext ringrpc Ping: " +
                                             "it does not speak TLS on this port; try ringrpc://" + where);
      }
      _speaks_ringrpc = true;
      return;
    }
    if (!p.sniffed.empty() && !(_tls && p.sniffed == "tls")) {
      throw tool_error(exit_transport, where + " is not a ringrpc server: this looks like " +
                                           std::string(server_kind(p.sniffed)) + " (it answered " + p.asked + " with \"" +
                                           p.front + "\")");
    }
    if (!failed) return;
    std::string text = failure_text(method, *failed);
    if (p.closed && !_tls) {
      text += "; " + where + " also closed a connection of its own without answering " + p.asked +
              ": it does not seem to speak ringrpc (if it expects TLS, try ringrpcs://" + where + ")";
    } else if (p.connected && p.front.empty() && !p.closed) {
      text += "; nor did " + where + " answer a ringrpc Ping on a second connection: a stalled server, or one " +
              "that does not speak ringrpc";
    } else if (!p.front.empty() && !_tls) {
      text += "; " + where + " answered " + p.asked + " with \"" + p.front + "\": it does not seem to speak ringrpc";
    } else {
      return;
    }
    throw tool_error(exit_transport, text);
  }

  std::string failure_text(std::string_view method, const ringrpc::call_result& r) const {
    return call_failure(method, r, _call.timeout).what();
  }

  address _where;
  std::string _schema_file;
  std::vector<std::string> _includes;
  ringrpc::call_options _call;
  std::chrono::milliseconds _connect_timeout;
  std::shared_ptr<ringrpc::record_layer> _tls;
  std::optional<ringrpc::client> _client;
  bool _speaks_ringrpc = false;  // the server has answered a call (or a Ping)
  std::optional<peer_probe> _probed;
};

// What reflection.list says, or the --schema file's methods: every name list shows is one
// describe knows.
struct served {
  std::vector<method_info> methods;          // typed
  std::vector<method_info> untyped;          // raw bytes in and out (ringrpc-server's echo, ...)
  std::vector<std::string> services;         // endpoint names of the typed services
  std::vector<std::string> services_full;    // their qualified names
  std::vector<std::string> empty_services;   // services without methods
};

method_info method_of(const nlohmann::json& m, const char* default_type) {
  method_info mi;
  mi.full_name = m.at("method").get<std::string>();
  mi.request = m.value("request", default_type);
  mi.reply = m.value("reply", default_type);
  mi.doc = m.value("doc", "");
  mi.streaming = m.value("streaming", "");
  return mi;
}

served what_is_served(session& s) {
  served out;
  if (s.local_schema()) {
    out.methods = s.schema_for({}).methods();
    return out;
  }
  const std::string text = s.list();
  try {
    const auto doc = nlohmann::json::parse(text);
    for (const auto& svc : doc.at("services")) {
      out.services.push_back(svc.at("name").get<std::string>());
      out.services_full.push_back(svc.value("full_name", out.services.back()));
      if (svc.at("methods").empty()) out.empty_services.push_back(out.services.back());
      for (const auto& m : svc.at("methods")) out.methods.push_back(method_of(m, ""));
    }
    if (doc.contains("untyped")) {
      for (const auto& m : doc.at("untyped")) out.untyped.push_back(method_of(m, "bytes"));
    }
  } catch (const nlohmann::json::exception& e) {
    throw tool_error(exit_transport, std::string("reflection.list answered something that is not its JSON: ") + e.what());
  }
  return out;
}

// A stream's side as gRPC's tools show it: "stream T" where many messages go that way.
std::string shown_request(const method_info& m) {
  const bool many = m.streaming == "client" || m.streaming == "bidi";
  return (many ? "stream " : "") + printable(m.request);
}
std::string shown_reply(const method_info& m) {
  const bool many = m.streaming == "server" || m.streaming == "bidi";
  return (many ? "stream " : "") + printable(m.reply);
}

int run_list(session& s) {
  served what = what_is_served(s);
  std::vector<method_info> methods = std::move(what.methods);
  methods.insert(methods.end(), what.untyped.begin(), what.untyped.end());
  std::sort(methods.begin(), methods.end(), [](const auto& a, const auto& b) { return a.full_name < b.full_name; });
  // Every name, type and doc string came from the server: printable() keeps its control bytes
  // off the terminal.
  std::vector<std::string> names;
  std::size_t width = 0;
  for (const auto& m : methods) {
    names.push_back(printable(m.full_name));
    width = std::max(width, names.back().size());
  }
  for (std::size_t i = 0; i < methods.size(); ++i) {
    const auto& m = methods[i];
    std::string line = names[i] + std::string(width - names[i].size(), ' ') + "  " + shown_request(m) + " -> " +
                       shown_reply(m);
    if (!m.doc.empty()) line += "  // " + printable(m.doc);
    std::printf("%s\n", line.c_str());
  }
  for (const auto& name : what.empty_services) std::printf("%s (no methods)\n", printable(name).c_str());
  return 0;
}

// An untyped method in the style of describe's schema syntax: raw bytes in and out.
std::string describe_untyped(const method_info& m) {
  std::string text;
  if (!m.doc.empty()) text += "/// " + m.doc + "\n";
  if (m.streaming.empty()) {
    text += m.full_name + "(" + m.request + "): " + m.reply + ";  // untyped: raw bytes in and out (call " +
            m.full_name + " -d DATA)\n";
  } else {
    const bool lines = m.streaming != "server";
    text += m.full_name + "(" + m.request + "): " + m.reply + " (streaming: \"" + m.streaming +
            "\");  // untyped: raw bytes in and out (call " + m.full_name + (lines ? " --stdin" : " -d DATA") + ")\n";
  }
  return text;
}

int run_describe(session& s, const std::string& name) {
  if (s.local_schema()) {
    const std::string text = s.schema_for({}).describe(name);
    if (text.empty()) throw tool_error(exit_usage, "the schema declares nothing named '" + name + "'");
    std::fputs(printable(text, true).c_str(), stdout);
    return 0;
  }
  const served what = what_is_served(s);
  for (const auto& m : what.untyped) {
    if (m.full_name == name) {
      std::fputs(printable(describe_untyped(m), true).c_str(), stdout);
      return 0;
    }
  }
  // A service or one of its methods names the schema to fetch; a type may be in any of them.
  std::vector<std::string> candidates;
  for (std::size_t i = 0; i < what.services.size(); ++i) {
    const std::string& svc = what.services[i];
    const std::string& full = what.services_full[i];
    const bool names_it = name == svc || name == full || name.starts_with(svc + ".") || name.starts_with(full + ".");
    if (names_it) candidates.insert(candidates.begin(), svc);
    else candidates.push_back(svc);
  }
  for (const auto& service : candidates) {
    const std::string text = s.schema_for(service).describe(name);
    if (!text.empty()) {
      std::fputs(printable(text, true).c_str(), stdout);
      return 0;
    }
  }
  throw tool_error(exit_usage, "the server declares nothing named '" + name + "'");
}

// The kind of stream `name` is, as the server's reflection lists it; bidi when it does not
// (a server without reflection, or a method it does not list).
ringrpc::stream_kind listed_kind(session& s, const std::string& name) {
  try {
    for (const auto& m : what_is_served(s).untyped) {
      if (m.full_name == name) return kind_from_name(m.streaming).value_or(ringrpc::stream_kind::bidi);
    }
  } catch (const tool_error&) {
    // No reflection to ask: the open says whether the method streams.
  }
  return ringrpc::stream_kind::bidi;
}

// An untyped method: the payload is -d's bytes (after --hex/--base64), the reply is written
// as it came (or encoded likewise). A raw reply to a terminal gets a final newline if it
// lacks one, so the prompt does not run into it; a pipe gets the bytes exactly. A method that
// streams is found out by its answer (the server names the kind) and opened as that stream;
// --stdin opens a stream at once.
int run_untyped(session& s, const std::string& name, const std::string& data, byte_encoding encoding, bool lines) {
  stream_input in;
  in.encoding = encoding;
  in.lines = lines;
  if (lines) {
    const ringrpc::stream_kind kind = listed_kind(s, name);
    if (kind == ringrpc::stream_kind::server) {
      throw tool_error(exit_usage, "'" + name + "' is a server stream: its client sends one request (-d), not lines (--stdin)");
    }
    return run_stream(s.connection(), name, kind, in, s.call_options());
  }
  try {
    in.payload = decode(encoding, read_data(data));
  } catch (const std::invalid_argument& e) {
    throw tool_error(exit_usage, e.what());
  }
  const ringrpc::call_result r = s.call(name, std::string_view(in.payload));
  if (const auto kind = kind_from_refusal(r)) return run_stream(s.connection(), name, *kind, in, s.call_options());
  if (!r.ok()) throw call_failure(name, r, s.call_options().timeout);
  std::string_view bytes = r.payload_string();
  if (encoding != byte_encoding::raw) {
    std::printf("%s\n", encode(encoding, bytes).c_str());
    return 0;
  }
  // A terminal gets the reply as printable text (its control bytes escaped); a pipe, exactly.
  const bool terminal = ::isatty(STDOUT_FILENO);
  std::string shown;
  if (terminal) {
    shown = printable(bytes, true);
    bytes = shown;
  }
  // An empty reply may have no buffer at all: fwrite's pointer must not be null even for 0 bytes.
  if (!bytes.empty()) std::fwrite(bytes.data(), 1, bytes.size(), stdout);
  if (terminal && (bytes.empty() || bytes.back() != '\n')) std::fputc('\n', stdout);
  return 0;
}

// The reply's JSON with every control character in its strings as a \u escape: FlatBuffers'
// text generator passes C0 (except the usual \n, \t ...), DEL and C1 through raw. The same
// JSON, nothing a terminal acts on. A raw newline can only be the generator's indentation.
std::string json_printable(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (std::size_t i = 0; i < json.size(); ++i) {
    const auto c = static_cast<unsigned char>(json[i]);
    const auto next = i + 1 < json.size() ? static_cast<unsigned char>(json[i + 1]) : 0;
    if ((c < 0x20 && c != '\n') || c == 0x7f || (c == 0xc2 && next >= 0x80 && next < 0xa0)) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c == 0xc2 ? static_cast<unsigned>(next) : static_cast<unsigned>(c));
      out += esc;
      if (c == 0xc2) ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// A typed stream method: -d's JSON is a server stream's request (or a client or bidi stream's
// one message), --stdin's lines are one JSON message each, and every message the server sends
// is printed as JSON on a line of its own.
int run_typed_stream(session& s, typed_schema& schema, const method_info& m, ringrpc::stream_kind kind,
                     const std::string& data, bool lines, typed_schema::json_style style) {
  if (lines && kind == ringrpc::stream_kind::server) {
    throw tool_error(exit_usage, "'" + m.full_name + "' is a server stream: its client sends one request (-d), not lines (--stdin)");
  }
  // The printing thread converts with a parser of its own: a parser is not thread-safe.
  auto shown = std::make_shared<typed_schema>(typed_schema::from_bfbs(schema.bfbs(), "the schema"));
  stream_input in;
  in.lines = lines;
  const auto as_text = [](const std::vector<std::uint8_t>& b) { return std::string(b.begin(), b.end()); };
  if (!lines) in.payload = as_text(schema.to_binary(m.request, data.empty() ? "{}" : read_data(data)));
  in.to_wire = [&schema, &m, as_text](std::string_view line) { return as_text(schema.to_binary(m.request, line)); };
  style.compact = true;  // one message, one line
  in.to_line = [shown, reply = m.reply, style](std::string_view bytes) {
    return json_printable(
        shown->to_json(reply, {reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()}, style));
  };
  return run_stream(s.connection(), m.full_name, kind, in, s.call_options());
}

int run_call(session& s, const std::string& name, std::string data, bool lines, typed_schema::json_style style) {
  if (lines && !data.empty()) throw tool_error(exit_usage, "--stdin and -d exclude each other");
  const auto dot = name.rfind('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == name.size()) {
    throw tool_error(exit_usage, "'" + name + "' is not Service.Method");
  }
  typed_schema schema = s.schema_for(name.substr(0, dot));
  const method_info& m = schema.method(name);
  if (!m.streaming.empty()) {
    const auto kind = kind_from_name(m.streaming).value_or(ringrpc::stream_kind::bidi);
    return run_typed_stream(s, schema, m, kind, data, lines, style);
  }
  if (lines) throw tool_error(exit_usage, "--stdin is for stream methods; '" + m.full_name + "' is a unary call (-d)");
  if (data.empty()) data = "{}";
  data = read_data(data);  // once: @- cannot be read again for a stream
  const auto request = schema.to_binary(m.request, data);
  const ringrpc::call_result r =
      s.call(m.full_name, std::span(reinterpret_cast<const std::byte*>(request.data()), request.size()));
  // A schema from before the method streamed (or without its kinds) shows a stream as unary:
  // the server's refusal names the kind, as for an untyped method.
  if (const auto kind = kind_from_refusal(r)) return run_typed_stream(s, schema, m, *kind, data, false, style);
  if (!r.ok()) throw call_failure(m.full_name, r, s.call_options().timeout);
  const std::string json =
      schema.to_json(m.reply, {reinterpret_cast<const std::uint8_t*>(r.payload.data()), r.payload.size()}, style);
  std::printf("%s\n", json_printable(json).c_str());
  return 0;
}

/// The command line, as given.
struct call_args {
  std::string target, command, name, data, schema_file, timeout = "10s", connect_timeout = "3s", token;
  std::vector<std::string> includes, metadata;
  bool compact = false, emit_defaults = false, raw = false, hex = false, base64 = false, stdin_lines = false;
  ringrpc::tools::tls_flags tls;
};

void add_options(CLI::App& app, call_args& a) {
  app.add_option("address", a.target,
                 "HOST:PORT or ringrpc://HOST:PORT of the server; ringrpcs://HOST:PORT for TLS")
      ->required()
      ->type_name("HOST:PORT");
  app.add_option("--cacert", a.tls.cacert, "ringrpcs://: PEM CAs to verify the server with (default: the system's)")
      ->type_name("FILE");
  app.add_option("--cert", a.tls.cert, "ringrpcs://: PEM client certificate (mutual TLS)")->type_name("FILE");
  app.add_option("--key", a.tls.key, "ringrpcs://: PEM private key of --cert")->type_name("FILE");
  app.add_flag("--insecure", a.tls.insecure, "ringrpcs://: do not verify the server's certificate");
  app.add_option("command", a.command, "list, describe or call")->required()->type_name("COMMAND");
  app.add_option("name", a.name, "describe: a service, method or type; call: Service.Method or an untyped method")
      ->type_name("NAME");
  app.add_option("-d,--data", a.data,
                 "call: the request: JSON for a typed method (default {}), bytes for an untyped one "
                 "(default none); @FILE reads a file, @- standard input")
      ->type_name("DATA");
  app.add_option("--schema", a.schema_file, "a .fbs or .bfbs schema to use instead of the server's reflection")
      ->type_name("FILE");
  app.add_option("-I,--include", a.includes, "search path for includes of a --schema .fbs (repeatable)")
      ->allow_extra_args(false)
      ->type_name("DIR");
  app.add_option("--timeout", a.timeout, "deadline of each call, or of a whole stream (us ms s m)")->capture_default_str()->type_name("TIME");
  app.add_option("--connect-timeout", a.connect_timeout, "give up connecting after this long")
      ->capture_default_str()
      ->type_name("TIME");
  app.add_flag("--raw", a.raw, "call an untyped method even though its name has a dot");
  auto* hex_flag = app.add_flag("--hex", a.hex, "untyped: -d is hex digits, the reply is printed in hex");
  app.add_flag("--base64", a.base64, "untyped: -d is base64, the reply is printed in base64")->excludes(hex_flag);
  app.add_flag("--stdin", a.stdin_lines,
               "stream: send each line of standard input as one message (typed: a JSON document a line; "
               "untyped: bytes, with --hex/--base64 decoded)");
  app.add_flag("--compact", a.compact, "print the reply on one line");
  app.add_flag("--emit-defaults", a.emit_defaults, "also print fields equal to their default value");
  app.add_option("--token", a.token,
                 "send 'authorization: Bearer TOKEN' with each call (plaintext: trusted networks "
                 "only); prefer the environment variable, which ps does not show")
      ->envname("RINGRPC_TOKEN")
      ->type_name("TOKEN");
  app.add_option("-H,--metadata", a.metadata,
                 "a metadata pair sent with each call, e.g. -H traceparent=00-...-01 (repeatable)")
      ->allow_extra_args(false)
      ->type_name("KEY=VALUE");
}

/// The deadline and metadata every call of this run carries (the token is never echoed, in
/// errors either).
ringrpc::call_options make_call_options(const call_args& a) {
  ringrpc::call_options call;
  try {
    call.timeout = std::chrono::duration_cast<std::chrono::microseconds>(ringrpc::load::parse_duration(a.timeout));
  } catch (const std::invalid_argument& e) {
    throw tool_error(exit_usage, e.what());
  }
  if (call.timeout.count() <= 0) throw tool_error(exit_usage, "--timeout must be positive");
  for (const std::string& kv : a.metadata) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || !ringrpc::valid_metadata_key(kv.substr(0, eq))) {
      throw tool_error(exit_usage, "-H needs KEY=VALUE with a lowercase KEY (a-z 0-9 - _ .), got '" +
                                       kv.substr(0, eq) + "'");
    }
    call.metadata.push_back({kv.substr(0, eq), kv.substr(eq + 1)});
  }
  if (!a.token.empty()) {
    if (!ringrpc::parse_bearer(std::string("Bearer ").append(a.token))) {
      throw tool_error(exit_usage, "--token / RINGRPC_TOKEN holds characters a bearer token cannot have");
    }
    call.metadata.push_back({"authorization", std::string("Bearer ").append(a.token)});
  }
  return call;
}

/// The session with the server (connected lazily), over TLS for a ringrpcs:// address.
session open_session(call_args& a, const ringrpc::call_options& call) {
  std::chrono::milliseconds connect;
  try {
    connect = std::chrono::duration_cast<std::chrono::milliseconds>(ringrpc::load::parse_duration(a.connect_timeout));
  } catch (const std::invalid_argument& e) {
    throw tool_error(exit_usage, e.what());
  }
  bool use_tls = false;
  try {
    use_tls = ringrpc::tools::take_scheme(a.target);
  } catch (const std::invalid_argument& e) {
    throw tool_error(exit_usage, e.what());
  }
  if (a.tls.any() && !use_tls) throw tool_error(exit_usage, "--cacert, --cert, --key and --insecure need a ringrpcs:// address");
  session s(parse_address(a.target), a.schema_file, a.includes, call, connect);
  if (use_tls) {
    try {
      s.use_tls(ringrpc::tools::make_client_tls(a.tls));
    } catch (const std::exception& e) {
      throw tool_error(exit_usage, e.what());
    }
  }
  return s;
}

/// list, describe or call; the exit status.
int run_command(session& s, const call_args& a) {
  if (a.command == "list") {
    if (!a.name.empty()) throw tool_error(exit_usage, "list takes no name");
    return run_list(s);
  }
  if (a.command != "describe" && a.command != "call") {
    throw tool_error(exit_usage, "unknown command '" + a.command + "' (list, describe or call)");
  }
  if (a.name.empty()) throw tool_error(exit_usage, a.command + " needs a name (see --help)");
  if (a.command == "describe") return run_describe(s, a.name);
  const auto encoding = a.hex ? byte_encoding::hex : a.base64 ? byte_encoding::base64 : byte_encoding::raw;
  // With --schema the call is typed: a name without a dot is then a mistake to report.
  if (a.raw || (a.name.find('.') == std::string::npos && a.schema_file.empty())) {
    if (a.stdin_lines && !a.data.empty()) throw tool_error(exit_usage, "--stdin and -d exclude each other");
    return run_untyped(s, a.name, a.data, encoding, a.stdin_lines);
  }
  if (a.hex || a.base64) throw tool_error(exit_usage, "--hex and --base64 are for untyped methods (see --raw)");
  return run_call(s, a.name, a.data, a.stdin_lines, {a.compact, a.emit_defaults});
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ringrpc-call: one ringrpc call from the command line: JSON in and out for typed\n"
               "methods, bytes in and out for untyped ones.\n"
               "  ringrpc-call HOST:PORT list                        methods the server serves\n"
               "  ringrpc-call HOST:PORT describe NAME               a service, method or type in schema syntax\n"
               "  ringrpc-call HOST:PORT call Service.Method -d JSON  a typed call: JSON in, JSON out\n"
               "  ringrpc-call HOST:PORT call echo -d hello          an untyped call (no dot, no --schema; or --raw)\n"
               "  ringrpc-call HOST:PORT call echo_stream --stdin    an untyped stream: a message a line, both ways\n"
               "  ringrpc-call HOST:PORT call S.Chat --stdin         a typed stream: a JSON message a line, both ways\n"
               "The schema comes from the server's reflection, or from --schema (then list and describe\n"
               "need no server)."};
  app.footer(std::string("Exit status:\n"
                         "  0 ok (also --help, --version)\n"
                         "  1 the server answered with an error status\n  ")
                 .append(ringrpc::tools::usage_exit_line)
                 .append("; also a schema or JSON problem\n"
                         "  3 connection problem, timeout or an invalid reply"));
  ringrpc::tools::set_name_and_version(app, "ringrpc-call");
  call_args a;
  add_options(app, a);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return ringrpc::tools::parse_error_exit(app, e);
  }
  try {
    const ringrpc::call_options call = make_call_options(a);
    session s = open_session(a, call);
    return run_command(s, a);
  } catch (const tool_error& e) {
    // Messages quote the server (its error message, its reflection's names): never raw.
    std::fprintf(stderr, "ringrpc-call: %s\n", printable(e.what()).c_str());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringrpc-call: %s\n", printable(e.what()).c_str());
    return exit_transport;
  }
}
