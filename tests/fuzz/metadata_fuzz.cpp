// libFuzzer target: per-call metadata as the server's reader meets it, and its value parsers.
//
// Input with an even first byte (or empty): one whole frame (prefix included). It is verified and
// decoded; its metadata, if any, is checked against caps drawn from the input's hash, the message
// for a fault is built, and a frame that passes is read every way a handler or an authorizer can
// (iteration, find, traceparent, bearer token, the token table). Input with an odd first byte:
// key/value pairs separated by 0xff bytes, encoded by the client's encoder and decoded again.
//
// Invariants checked (abort on violation):
//  - a frame whose metadata passes has at most max_entries pairs, at most max_bytes of keys and
//    values, only valid and distinct keys, and find() returns each key's own value;
//  - a fault names an entry that exists; describe() never throws for it;
//  - encode then decode gives back exactly the pairs, in order; the check passes iff every key
//    is valid and distinct and the caps hold;
//  - parse_traceparent and parse_bearer accept only what their formats allow.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "ringrpc/metadata.hpp"
#include "server/call_guard.hpp"
#include "wire/frame_codec.hpp"
#include "wire/metadata_check.hpp"

namespace {

using namespace ringrpc;
using namespace ringrpc::detail;

std::uint64_t fnv1a(const std::uint8_t* p, std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

bool hex_lower(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

void check_value_parsers(std::string_view v) {
  trace_context t;
  if (parse_traceparent(v, t)) {
    FUZZ_CHECK(v.size() >= 55 && v[2] == '-' && v[35] == '-' && v[52] == '-');
    for (std::size_t i : {0, 1, 53, 54}) FUZZ_CHECK(hex_lower(v[i]));
    FUZZ_CHECK(t.version != 0xff);
    FUZZ_CHECK(t.trace_id_hex() == v.substr(3, 32));
    FUZZ_CHECK(t.parent_id_hex() == v.substr(36, 16));
    FUZZ_CHECK(t.trace_id_hex() != std::string(32, '0') && t.parent_id_hex() != std::string(16, '0'));
  }
  if (const auto token = parse_bearer(v)) {
    FUZZ_CHECK(!token->empty() && token->size() + 7 == v.size());
    FUZZ_CHECK(token->find(' ') == std::string_view::npos && token->front() != '=');
    static const token_table tokens({{"tok-a", "a", {}}, {"tok-bb", "b", {}}});
    const bearer_token* m = tokens.match(*token);
    FUZZ_CHECK(m == nullptr || m->token == *token);
  }
}

void check_frame(const std::vector<std::byte>& frame, metadata_limits limits) {
  frame_view v;
  if (decode_frame(frame, v) != decode_outcome::ok || v.metadata == nullptr) return;
  const metadata_check c = check_metadata(*v.metadata, limits);
  if (!c.ok()) {
    FUZZ_CHECK(c.fault == metadata_fault::too_many_entries || c.index < v.metadata->size());
    FUZZ_CHECK(!describe(c, *v.metadata, limits).empty());
    return;
  }
  const metadata_view md(v.metadata);
  FUZZ_CHECK(md.size() <= limits.max_entries);
  std::size_t bytes = 0;
  std::set<std::string_view> keys;
  for (const metadata_item m : md) {
    FUZZ_CHECK(valid_metadata_key(m.key));
    FUZZ_CHECK(keys.insert(m.key).second);
    bytes += m.key.size() + m.value.size();
    const auto found = md.find(m.key);
    FUZZ_CHECK(found && found->data() == m.value.data() && found->size() == m.value.size());
    check_value_parsers(m.value);
  }
  FUZZ_CHECK(bytes <= limits.max_bytes);
}

void check_round_trip(const std::uint8_t* p, std::size_t n, metadata_limits limits) {
  std::vector<metadata_entry> pairs;
  std::string cur[2];
  int side = 0;
  for (std::size_t i = 0; i < n && pairs.size() < 64; ++i) {
    if (p[i] == 0xff) {
      if (side == 1) {
        pairs.push_back({cur[0], cur[1]});
        cur[0].clear();
        cur[1].clear();
      }
      side ^= 1;
      continue;
    }
    cur[side].push_back(static_cast<char>(p[i]));
  }
  if (side == 1) pairs.push_back({cur[0], cur[1]});
  frame_encoder enc;
  std::vector<std::byte> buf;
  frame_view f;
  f.call_id = 1;
  f.method = "m";
  const metadata_to_send to_send{{}, pairs};
  f.metadata_out = &to_send;
  enc.encode_into(f, buf);
  frame_view v;
  FUZZ_CHECK(decode_frame(buf, v) == decode_outcome::ok);
  const metadata_view md(v.metadata);
  FUZZ_CHECK(md.size() == pairs.size());
  bool valid = pairs.size() <= limits.max_entries;
  std::size_t bytes = 0;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    FUZZ_CHECK(md[i].key == pairs[i].key && md[i].value == pairs[i].value);
    bytes += pairs[i].key.size() + pairs[i].value.size();
    valid = valid && valid_metadata_key(pairs[i].key) && seen.insert(pairs[i].key).second;
    check_value_parsers(pairs[i].value);
  }
  valid = valid && bytes <= limits.max_bytes;
  if (v.metadata != nullptr) FUZZ_CHECK(check_metadata(*v.metadata, limits).ok() == valid);
  check_frame(buf, limits);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* raw, std::size_t size) {
  const std::uint64_t h = fnv1a(raw, size);
  // Small caps often, so that the fuzzer reaches them; the defaults otherwise.
  const metadata_limits limits = (h & 3) == 0 ? metadata_limits{} : metadata_limits{static_cast<std::uint32_t>(h >> 8) % 8,
                                                                                   static_cast<std::uint32_t>(h >> 16) % 256};
  check_value_parsers({reinterpret_cast<const char*>(raw), size});
  if (size > 0 && (raw[0] & 1) != 0) {
    check_round_trip(raw + 1, size - 1, limits);
    return 0;
  }
  // An 8-byte aligned copy, as the server's reader makes.
  const std::vector<std::byte> frame(reinterpret_cast<const std::byte*>(raw), reinterpret_cast<const std::byte*>(raw) + size);
  check_frame(frame, limits);
  return 0;
}
