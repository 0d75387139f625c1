#pragma once
// The doc comment of a schema element (reflection.fbs `documentation`) as one line: the `///`
// lines trimmed and joined by single spaces, blank lines dropped. The server's reflection list
// and the tools' schema reader both show it, so they must agree on it. Likewise a method's
// stream kind, from its `streaming` attribute.

#include <flatbuffers/flatbuffers.h>
#include <flatbuffers/reflection_generated.h>

#include <string>
#include <string_view>

namespace ringrpc::detail {

inline std::string joined_doc(const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* lines) {
  std::string out;
  for (flatbuffers::uoffset_t i = 0; lines != nullptr && i < lines->size(); ++i) {
    std::string_view l = lines->Get(i) != nullptr ? lines->Get(i)->string_view() : std::string_view();
    while (!l.empty() && (l.front() == ' ' || l.front() == '\t')) l.remove_prefix(1);
    while (!l.empty() && (l.back() == ' ' || l.back() == '\t')) l.remove_suffix(1);
    if (l.empty()) continue;
    if (!out.empty()) out += ' ';
    out.append(l);
  }
  return out;
}

/// "server", "client" or "bidi" for a method declared `(streaming: "...")`; empty for a unary
/// one (no attribute, "none", or a value ringrpc-gen would have refused).
inline std::string streaming_kind(const reflection::RPCCall& call) {
  const auto* attrs = call.attributes();
  for (flatbuffers::uoffset_t i = 0; attrs != nullptr && i < attrs->size(); ++i) {
    const auto* kv = attrs->Get(i);
    if (kv == nullptr || kv->key() == nullptr || kv->value() == nullptr || kv->key()->string_view() != "streaming") {
      continue;
    }
    const std::string_view v = kv->value()->string_view();
    if (v == "server" || v == "client" || v == "bidi") return std::string(v);
  }
  return {};
}

}  // namespace ringrpc::detail
