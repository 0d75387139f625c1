// libFuzzer target: arbitrary bytes as what an etcd gateway (or anything listening where it
// should be) answers: range replies, watch stream lines, lease replies, and registration values
// found under a service's prefix. The first byte picks the parser; the rest is its input.
//
// Invariants checked (abort on violation): no parser throws or crashes; a parse either gives a
// value or a non-empty error, never both; a decoded base64 string encodes back to its input
// (canonical text only); a decoded member record encodes and decodes to the same record.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "discovery/base64.hpp"
#include "discovery/etcd_json.hpp"
#include "fuzz_check.hpp"
#include "ringrpc/discovery.hpp"

namespace {

namespace d = ringrpc::discovery::detail;

template <class T>
void check(const d::parsed<T>& p) {
  FUZZ_CHECK(p.value.has_value() != !p.error.empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 7) {
    case 0: check(d::parse_range(in)); break;
    case 1: check(d::parse_watch_message(in)); break;
    case 2: check(d::parse_lease_grant(in)); break;
    case 3: check(d::parse_keepalive(in)); break;
    case 4: check(d::parse_header_revision(in)); break;
    case 5: {
      if (auto dec = d::base64_decode(in)) FUZZ_CHECK(d::base64_encode(*dec) == in);
      break;
    }
    default: {
      if (auto rec = ringrpc::discovery::decode_member_record(in)) {
        auto again = ringrpc::discovery::decode_member_record(ringrpc::discovery::encode_member_record(*rec));
        FUZZ_CHECK(again.has_value());
        FUZZ_CHECK(again->address == rec->address && again->weight == rec->weight && again->zone == rec->zone &&
                   again->version == rec->version && again->tls == rec->tls && again->pid == rec->pid &&
                   again->started_at == rec->started_at);
      }
      break;
    }
  }
  return 0;
}
