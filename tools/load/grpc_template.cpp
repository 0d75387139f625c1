// --proto --data with placeholders: the protobuf plan. The request is converted once with
// sentinels, the fields holding them are cleared, and the rest serialized as the fixed part.
// A call appends, after it, each placeholder's field wrapped in its enclosing message fields:
// protobuf keeps the last value of a singular scalar or string field and merges repeated
// occurrences of a message field (the encoding spec), so the result decodes as the request with
// the call's values. Lengths are written per call, after the bytes they count.

#include <bit>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "grpc_request.hpp"
#include "grpc_request_loader.hpp"
#include "message_template.hpp"

namespace ringrpc::load {

namespace {

enum class wire : std::uint8_t { varint = 0, fixed64 = 1, length = 2, fixed32 = 5 };

// How a placeholder's number becomes the field's value.
enum class encoding : std::uint8_t { plain, zigzag, as_float, as_double, text };

struct pb_leaf {
  std::vector<std::uint32_t> path;  // field numbers of the enclosing message fields, outermost first
  std::uint32_t number = 0;
  wire type = wire::varint;
  encoding how = encoding::plain;
  std::uint64_t mask = ~0ull;  // {seq} wraps within the field's non-negative range
  int placeholder = -1;        // a number; else text
  std::size_t text = 0;        // index into _texts
};

void put_varint(std::vector<std::byte>& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<std::byte>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<std::byte>(v));
}

template <typename T>
void put_fixed(std::vector<std::byte>& out, T v) {
  static_assert(std::endian::native == std::endian::little, "protobuf's fixed fields are little-endian");
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out.insert(out.end(), p, p + sizeof(v));
}

// Inserts the varints `a` and `b` at `at` (a tag and a length before what they frame).
void insert_varints(std::vector<std::byte>& out, std::size_t at, std::uint64_t a, std::uint64_t b) {
  std::byte tmp[20];
  std::size_t n = 0;
  for (std::uint64_t v : {a, b}) {
    while (v >= 0x80) {
      tmp[n++] = static_cast<std::byte>(v | 0x80);
      v >>= 7;
    }
    tmp[n++] = static_cast<std::byte>(v);
  }
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(at), tmp, tmp + n);
}

class grpc_template final : public message_template {
 public:
  grpc_template(const json_placeholders& p, std::string fixed, std::vector<pb_leaf> leaves,
                std::vector<request_template> texts, std::vector<template_segment> numbers)
      : message_template(p), _fixed(std::move(fixed)), _leaves(std::move(leaves)), _numbers(std::move(numbers)) {
    _texts = std::move(texts);
  }

  void render(template_renderer& r, const template_call& call, std::vector<std::byte>& out) const override {
    const auto* f = reinterpret_cast<const std::byte*>(_fixed.data());
    out.insert(out.end(), f, f + _fixed.size());
    for (const pb_leaf& leaf : _leaves) {
      const std::size_t start = out.size();
      put_varint(out, (std::uint64_t{leaf.number} << 3) | static_cast<std::uint8_t>(leaf.type));
      if (leaf.how == encoding::text) {
        const std::size_t at = out.size();
        r.render(_texts[leaf.text], call, out);
        std::byte len[10];
        std::size_t n = 0;
        for (std::uint64_t v = out.size() - at;; v >>= 7) {
          len[n++] = static_cast<std::byte>(v >= 0x80 ? (v | 0x80) : v);
          if (v < 0x80) break;
        }
        out.insert(out.begin() + static_cast<std::ptrdiff_t>(at), len, len + n);
      } else {
        put_value(out, leaf, number(r, call, _numbers[static_cast<std::size_t>(leaf.placeholder)]) & leaf.mask);
      }
      for (auto it = leaf.path.rbegin(); it != leaf.path.rend(); ++it) {
        insert_varints(out, start, (std::uint64_t{*it} << 3) | 2, out.size() - start);
      }
    }
  }

  std::size_t max_size(std::size_t longest_line) const noexcept override {
    std::size_t n = _fixed.size();
    for (const pb_leaf& leaf : _leaves) {
      n += 20 * (leaf.path.size() + 1) + 10;  // tags and lengths, a varint or fixed value
      if (leaf.how == encoding::text) n += _texts[leaf.text].max_rendered_size(longest_line);
    }
    return n;
  }

 private:
  static void put_value(std::vector<std::byte>& out, const pb_leaf& leaf, std::uint64_t v) {
    switch (leaf.how) {
      case encoding::zigzag: v <<= 1; break;  // non-negative: zigzag is a doubling
      case encoding::as_float: return put_fixed(out, static_cast<float>(v));
      case encoding::as_double: return put_fixed(out, static_cast<double>(v));
      default: break;
    }
    if (leaf.type == wire::fixed32) return put_fixed(out, static_cast<std::uint32_t>(v));
    if (leaf.type == wire::fixed64) return put_fixed(out, v);
    put_varint(out, v);
  }

  std::string _fixed;
  std::vector<pb_leaf> _leaves;
  std::vector<template_segment> _numbers;  // by placeholder index
};

// A numeric field's wire type, encoding and largest value; false for types that take no number.
bool numeric_leaf(const pb::FieldDescriptor& f, pb_leaf& leaf) {
  constexpr std::uint64_t i32 = 0x7fffffff, u32 = 0xffffffff, i64 = std::numeric_limits<std::int64_t>::max();
  using T = pb::FieldDescriptor;
  switch (f.type()) {
    case T::TYPE_INT32: leaf = {{}, 0, wire::varint, encoding::plain, i32}; return true;
    case T::TYPE_INT64: leaf = {{}, 0, wire::varint, encoding::plain, i64}; return true;
    case T::TYPE_UINT32: leaf = {{}, 0, wire::varint, encoding::plain, u32}; return true;
    case T::TYPE_UINT64: leaf = {{}, 0, wire::varint, encoding::plain, ~0ull}; return true;
    case T::TYPE_SINT32: leaf = {{}, 0, wire::varint, encoding::zigzag, i32}; return true;
    case T::TYPE_SINT64: leaf = {{}, 0, wire::varint, encoding::zigzag, i64}; return true;
    case T::TYPE_FIXED32: leaf = {{}, 0, wire::fixed32, encoding::plain, u32}; return true;
    case T::TYPE_SFIXED32: leaf = {{}, 0, wire::fixed32, encoding::plain, i32}; return true;
    case T::TYPE_FIXED64: leaf = {{}, 0, wire::fixed64, encoding::plain, ~0ull}; return true;
    case T::TYPE_SFIXED64: leaf = {{}, 0, wire::fixed64, encoding::plain, i64}; return true;
    case T::TYPE_FLOAT: leaf = {{}, 0, wire::fixed32, encoding::as_float, ~0ull}; return true;
    case T::TYPE_DOUBLE: leaf = {{}, 0, wire::fixed64, encoding::as_double, ~0ull}; return true;
    default: return false;
  }
}

// The sentinel a numeric field holds, or -1.
int sentinel_of(const pb::Message& m, const pb::FieldDescriptor& f, const json_placeholders& p) {
  const pb::Reflection& r = *m.GetReflection();
  using C = pb::FieldDescriptor;
  switch (f.cpp_type()) {
    case C::CPPTYPE_INT32: return r.GetInt32(m, &f) < 0 ? -1 : p.number_index(std::uint64_t(r.GetInt32(m, &f)));
    case C::CPPTYPE_INT64: return r.GetInt64(m, &f) < 0 ? -1 : p.number_index(std::uint64_t(r.GetInt64(m, &f)));
    case C::CPPTYPE_UINT32: return p.number_index(std::uint64_t{r.GetUInt32(m, &f)});
    case C::CPPTYPE_UINT64: return p.number_index(r.GetUInt64(m, &f));
    case C::CPPTYPE_FLOAT: return p.number_index(static_cast<double>(r.GetFloat(m, &f)));
    case C::CPPTYPE_DOUBLE: return p.number_index(r.GetDouble(m, &f));
    default: return -1;
  }
}

struct pb_plan {
  std::vector<pb_leaf> leaves;
  std::vector<request_template> texts;
};

// Finds the placeholders in `m` (fields outside arrays), records them and clears their fields.
void walk(pb::Message& m, std::vector<std::uint32_t>& path, json_placeholders& p, pb_plan& plan) {
  const pb::Reflection& r = *m.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  r.ListFields(m, &fields);
  for (const pb::FieldDescriptor* f : fields) {
    if (f->is_repeated()) continue;  // unfound placeholders there are refused by check_all_found
    const auto number = static_cast<std::uint32_t>(f->number());
    if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      const std::size_t leaves_before = plan.leaves.size();
      path.push_back(number);
      walk(*r.MutableMessage(&m, f), path, p, plan);
      path.pop_back();
      // A group is framed by start/end tags, not a length: the leaves' encoding cannot splice
      // into it (grpc_template writes every enclosing message length-delimited).
      if (f->type() == pb::FieldDescriptor::TYPE_GROUP && plan.leaves.size() != leaves_before) {
        throw std::invalid_argument("--data: a placeholder in " + f->full_name() +
                                    ", a proto2 group: groups cannot take placeholders; use fixed values "
                                    "there, or a message field");
      }
      continue;
    }
    pb_leaf leaf;
    if (f->type() == pb::FieldDescriptor::TYPE_STRING) {
      const std::string value = r.GetString(m, f);
      if (!json_placeholders::has_marker(value)) continue;
      leaf = {path, number, wire::length, encoding::text, ~0ull, -1, plan.texts.size()};
      plan.texts.push_back(request_template::compile(p.template_text(value), "--data"));
    } else {
      const int i = sentinel_of(m, *f, p);
      if (i < 0 || !numeric_leaf(*f, leaf)) continue;
      p.found_number(i, f->full_name(), leaf.mask);
      leaf.path = path;
      leaf.number = number;
      leaf.placeholder = i;
    }
    plan.leaves.push_back(std::move(leaf));
    r.ClearField(&m, f);
  }
}

}  // namespace

std::shared_ptr<const message_template> grpc_template_from_json(const std::string& proto_file,
                                                                const std::vector<std::string>& includes,
                                                                const std::string& method, const std::string& json) {
  json_placeholders p = json_placeholders::scan(json, "--data");
  std::unique_ptr<loaded_request> loaded;
  try {
    loaded = std::make_unique<loaded_request>(proto_file, includes, method, p.sentinel_json());
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(e.what() + p.parse_hint());
  }
  pb_plan plan;
  std::vector<std::uint32_t> path;
  walk(*loaded->request, path, p, plan);
  p.check_all_found();
  std::string fixed;
  // Partial: clearing a placeholder's field may leave a proto2 required field unset, which the
  // checked serializer refuses (and debug builds assert on); the leaves fill it in every call.
  if (!loaded->request->SerializePartialToString(&fixed)) throw std::invalid_argument("cannot serialize the request");
  std::vector<template_segment> numbers;
  for (std::size_t i = 0; i < p.size(); ++i) numbers.push_back(p.segment(i));
  return std::make_shared<grpc_template>(p, std::move(fixed), std::move(plan.leaves), std::move(plan.texts),
                                         std::move(numbers));
}

}  // namespace ringrpc::load
