// libFuzzer target: gRPC's message framing of a response body and the grpc-status of its
// trailers (tools/load/grpc_framing.cpp), as ringrpc-load's grpc:// codec reads them.
//
// Input: byte 0 is the HTTP status's last digit choice (200 or another), byte 1 the length of
// the grpc-status text taken from the end; the rest is the body, fed in chunks whose sizes come
// from the body bytes themselves. Checks: a call counts as a success only with HTTP 200,
// grpc-status exactly "0" and a body that ended between messages; a status the parser accepts
// prints back as itself.
// Seeds: tests/fuzz/corpus/grpc_framing, written by tests/fuzz/make_h2_corpus.py.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "grpc_framing.hpp"

using ringrpc::fuzz::bug;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ringrpc::load;
  if (size < 2) return 0;
  const unsigned http_status = data[0] % 4 == 0 ? 503u : 200u;
  std::size_t status_len = std::min<std::size_t>(data[1] % 8, size - 2);
  const std::string_view status(reinterpret_cast<const char*>(data + size - status_len), status_len);
  std::span<const std::byte> body(reinterpret_cast<const std::byte*>(data + 2), size - 2 - status_len);

  grpc_message_reader reader(1 << 20);
  bool fed_ok = true;
  while (!body.empty()) {
    const std::size_t chunk = std::min<std::size_t>(body.size(), 1 + std::to_integer<unsigned>(body.front()) % 7);
    fed_ok = reader.feed(body.first(chunk)) && fed_ok;
    body = body.subspan(chunk);
  }
  if (!fed_ok && reader.error() == nullptr) bug("a refused chunk without a reason");
  const std::string outcome = grpc_call_outcome(http_status, status, reader);
  if (outcome.empty() && (http_status != 200 || status != "0" || !fed_ok || !reader.at_boundary())) {
    bug("a call counted as a success that is not one");
  }
  if (const auto code = parse_grpc_status(status)) {
    if (std::to_string(*code) != status) bug("a status parsed as something else");
    if (*code != 0 && http_status == 200 && outcome != grpc_status_kind(*code)) bug("a status not counted as its kind");
  }
  return 0;
}
