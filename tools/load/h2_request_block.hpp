#pragma once
// The header block of a request of ringrpc-load's HTTP/2 client (proto_h2.cpp), encoded once
// per request kind: the fields of h2_detail::request_headers as HPACK (RFC 7541) that leaves the
// server's dynamic table alone, so the same request sends the same bytes every time, as a
// steady-state gRPC client does, and no encoder state has to follow the server's.

#include <cstddef>
#include <string_view>
#include <vector>

#include "h2_session.hpp"

namespace ringrpc::load::h2_detail {

/// One field: indexed when HPACK's static table has it whole, else a literal without indexing
/// (its name indexed when the table has the name); `authorization` never indexed (§7.1.3).
void put_request_field(std::vector<std::byte>& out, std::string_view name, std::string_view value);

/// A request kind's header block whole, and in two parts around :path for a path with
/// placeholders, which each call renders and puts between them.
struct request_block {
  std::vector<std::byte> before_path;
  std::vector<std::byte> after_path;
  std::vector<std::byte> whole;
};

request_block encode_request_block(const h2_settings& s, const request_kind& kind);

}  // namespace ringrpc::load::h2_detail
