// libFuzzer target: the bytes ringrpc-call and ringrpc-load --method take from outside, through
// typed_schema (tools/common/typed_json.cpp). The first byte picks which:
//   0: JSON text from the user, to_binary against json_fuzz.fbs (root fuzz.Root);
//   1: a reply payload from a server, to_json as fuzz.Root (verified first);
//   2: a binary schema from a server's reflection endpoint, from_bfbs, then its methods and
//      describe(), as `ringrpc-call describe` shows them.
//
// Seeds (corpus/json/): each file is the mode byte, then the input. root.bin and schema.bfbs
// come from flatc (--binary json_fuzz.fbs root.json; --binary --schema --bfbs-comments
// json_fuzz.fbs); regress_* are the inputs that crashed typed_json before verify_buffer.cpp.
//
// Invariants checked (abort on violation):
//  - the only exception is tool_error;
//  - a buffer to_binary built is a valid fuzz.Root: to_json accepts it, and the JSON it gives
//    converts again to a buffer that shows as the same JSON.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "typed_json.hpp"

#ifndef RINGRPC_FUZZ_SCHEMA
#error "RINGRPC_FUZZ_SCHEMA: path of json_fuzz.fbs (tests/fuzz/meson.build sets it)"
#endif

namespace {

using ringrpc::tools::tool_error;
using ringrpc::tools::typed_schema;

typed_schema& schema() {
  static typed_schema s = typed_schema::from_file(RINGRPC_FUZZ_SCHEMA, {});
  return s;
}

const std::string root_type = "fuzz.Root";

void json_to_binary(std::string_view json) {
  typed_schema& s = schema();
  std::vector<std::uint8_t> bin;
  try {
    bin = s.to_binary(root_type, json);
  } catch (const tool_error&) {
    return;
  }
  std::string shown;
  try {
    shown = s.to_json(root_type, bin, {.compact = true});
  } catch (const tool_error& e) {
    std::fprintf(stderr, "json_fuzz: to_json refuses what to_binary built: %s\n", e.what());
    std::abort();
  }
  std::vector<std::uint8_t> again;
  try {
    again = s.to_binary(root_type, shown);
  } catch (const tool_error& e) {
    std::fprintf(stderr, "json_fuzz: to_binary refuses what to_json showed: %s\n%s\n", e.what(), shown.c_str());
    std::abort();
  }
  FUZZ_CHECK(s.to_json(root_type, again, {.compact = true}) == shown);
}

void binary_to_json(std::span<const std::uint8_t> bytes) {
  try {
    (void)schema().to_json(root_type, bytes, {});
    (void)schema().to_json(root_type, bytes, {.compact = true, .emit_defaults = true});
  } catch (const tool_error&) {
  }
}

void load_schema(std::span<const std::uint8_t> bytes) {
  try {
    typed_schema s = typed_schema::from_bfbs(bytes, "fuzz");
    for (const auto& m : s.methods()) {
      (void)s.describe(m.full_name);
      (void)s.describe(m.request);
      (void)s.describe(m.reply);
      (void)s.find_method(m.full_name);
    }
    (void)s.describe("fuzz.Root");
  } catch (const tool_error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::span<const std::uint8_t> rest(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0: json_to_binary({reinterpret_cast<const char*>(rest.data()), rest.size()}); break;
    case 1: binary_to_json(rest); break;
    default: load_schema(rest); break;
  }
  return 0;
}
