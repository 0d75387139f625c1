#include "typed_template.hpp"

#include <flatbuffers/reflection.h>

#include <cstring>
#include <limits>
#include <stdexcept>

#include "typed_json.hpp"

namespace ringrpc::load {

namespace {

using reflection::BaseType;

struct fb_leaf {
  std::size_t at = 0;            // where the scalar, or the string field's offset, is in the buffer
  BaseType type = BaseType::None;
  std::uint64_t mask = ~0ull;    // {seq} wraps within the field's non-negative range
  int placeholder = -1;          // a number; else a string
  std::size_t text = 0;          // index into _texts
};

class typed_template final : public message_template {
 public:
  typed_template(const json_placeholders& p, std::vector<std::uint8_t> fixed, std::vector<fb_leaf> leaves,
                 std::vector<request_template> texts)
      : message_template(p), _fixed(std::move(fixed)), _leaves(std::move(leaves)) {
    _texts = std::move(texts);
    for (std::size_t i = 0; i < p.size(); ++i) _numbers.push_back(p.segment(i));
  }

  void render(template_renderer& r, const template_call& call, std::vector<std::byte>& out) const override {
    const std::size_t base = out.size();
    const auto* f = reinterpret_cast<const std::byte*>(_fixed.data());
    out.insert(out.end(), f, f + _fixed.size());
    for (const fb_leaf& leaf : _leaves) {
      if (leaf.placeholder >= 0) {
        const std::uint64_t v = number(r, call, _numbers[static_cast<std::size_t>(leaf.placeholder)]) & leaf.mask;
        put_scalar(out.data() + base + leaf.at, leaf.type, v);
        continue;
      }
      // A string: its length (4-aligned), bytes and NUL, appended; the field points forward to it.
      out.resize(out.size() + (-(out.size() - base) & 3));
      const std::size_t at = out.size();
      out.resize(at + 4);
      r.render(_texts[leaf.text], call, out);
      const auto length = static_cast<std::uint32_t>(out.size() - at - 4);
      out.push_back(std::byte{0});
      flatbuffers::WriteScalar<std::uint32_t>(out.data() + at, length);
      flatbuffers::WriteScalar<std::uint32_t>(out.data() + base + leaf.at,
                                              static_cast<std::uint32_t>(at - base - leaf.at));
    }
  }

  std::size_t max_size(std::size_t longest_line) const noexcept override {
    std::size_t n = _fixed.size();
    for (const fb_leaf& leaf : _leaves) {
      if (leaf.placeholder < 0) n += 8 + _texts[leaf.text].max_rendered_size(longest_line);
    }
    return n;
  }

 private:
  static void put_scalar(std::byte* at, BaseType type, std::uint64_t v) {
    switch (type) {
      case BaseType::Int: case BaseType::UInt: return flatbuffers::WriteScalar(at, static_cast<std::uint32_t>(v));
      case BaseType::Float: return flatbuffers::WriteScalar(at, static_cast<float>(v));
      case BaseType::Double: return flatbuffers::WriteScalar(at, static_cast<double>(v));
      default: return flatbuffers::WriteScalar(at, v);  // Long, ULong
    }
  }

  std::vector<std::uint8_t> _fixed;
  std::vector<fb_leaf> _leaves;
  std::vector<template_segment> _numbers;  // by placeholder index
};

// The largest value of a scalar type that can hold a placeholder; 0 for the others (bool,
// enums, 8- and 16-bit integers).
std::uint64_t largest(BaseType t, bool is_enum) {
  if (is_enum) return 0;
  switch (t) {
    case BaseType::Int: return 0x7fffffff;
    case BaseType::UInt: return 0xffffffff;
    case BaseType::Long: return std::numeric_limits<std::int64_t>::max();
    case BaseType::ULong: case BaseType::Float: case BaseType::Double: return ~0ull;
    default: return 0;
  }
}

struct fb_walk {
  const reflection::Schema& schema;
  const std::uint8_t* buffer;
  json_placeholders& p;
  std::vector<fb_leaf> leaves;
  std::vector<request_template> texts;

  void scalar(const reflection::Field& f, const std::uint8_t* at) {
    const BaseType t = f.type()->base_type();
    const std::uint64_t max = largest(t, f.type()->index() >= 0);
    if (max == 0) return;
    int i = -1;
    if (t == BaseType::Float) i = p.number_index(static_cast<double>(flatbuffers::ReadScalar<float>(at)));
    if (t == BaseType::Double) i = p.number_index(flatbuffers::ReadScalar<double>(at));
    if (t == BaseType::Int) i = p.number_index(std::uint64_t(std::max(0, flatbuffers::ReadScalar<std::int32_t>(at))));
    if (t == BaseType::UInt) i = p.number_index(std::uint64_t{flatbuffers::ReadScalar<std::uint32_t>(at)});
    if (t == BaseType::Long || t == BaseType::ULong) i = p.number_index(flatbuffers::ReadScalar<std::uint64_t>(at));
    if (i < 0) return;
    p.found_number(i, f.name()->str(), max);
    leaves.push_back({static_cast<std::size_t>(at - buffer), t, max, i, 0});  // {seq} wraps at max
  }

  void in_struct(const reflection::Object& o, const std::uint8_t* at) {
    for (const reflection::Field* f : *o.fields()) {
      if (f->type()->base_type() == BaseType::Obj) {
        in_struct(*schema.objects()->Get(f->type()->index()), at + f->offset());
      } else {
        scalar(*f, at + f->offset());
      }
    }
  }

  void in_table(const reflection::Object& o, const flatbuffers::Table& t) {
    for (const reflection::Field* f : *o.fields()) {
      if (!t.CheckField(f->offset())) continue;  // absent: its default
      const std::uint8_t* at = t.GetAddressOf(f->offset());
      const BaseType bt = f->type()->base_type();
      if (flatbuffers::IsScalar(bt)) {
        scalar(*f, at);
      } else if (bt == BaseType::String) {
        const auto* s = t.GetPointer<const flatbuffers::String*>(f->offset());
        if (!json_placeholders::has_marker(s->string_view())) continue;
        leaves.push_back({static_cast<std::size_t>(at - buffer), bt, ~0ull, -1, texts.size()});
        texts.push_back(request_template::compile(p.template_text(s->string_view()), "--data"));
      } else if (bt == BaseType::Obj) {
        const reflection::Object& sub = *schema.objects()->Get(f->type()->index());
        if (sub.is_struct()) {
          in_struct(sub, at);
        } else {
          in_table(sub, *t.GetPointer<const flatbuffers::Table*>(f->offset()));
        }
      }
      // Vectors and unions are not walked: a placeholder there is refused by check_all_found.
    }
  }
};

}  // namespace

std::shared_ptr<const message_template> typed_template_from_json(tools::typed_schema& schema, const std::string& type,
                                                                 const std::string& json) {
  json_placeholders p = json_placeholders::scan(json, "--data", /*lenient=*/true);  // FlatBuffers' JSON
  std::vector<std::uint8_t> fixed;
  try {
    fixed = schema.to_binary(type, p.sentinel_json());
  } catch (const tools::tool_error& e) {
    throw std::invalid_argument(e.what() + p.parse_hint());
  }
  const auto& s = *reflection::GetSchema(schema.bfbs().data());
  const reflection::Object* root = s.objects()->LookupByKey(type.c_str());
  if (root == nullptr) throw std::invalid_argument("the schema has no table " + type);
  fb_walk walk{s, fixed.data(), p, {}, {}};
  walk.in_table(*root, *flatbuffers::GetRoot<flatbuffers::Table>(fixed.data()));
  p.check_all_found();
  return std::make_shared<typed_template>(p, std::move(fixed), std::move(walk.leaves), std::move(walk.texts));
}

}  // namespace ringrpc::load
