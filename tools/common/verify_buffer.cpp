// A reflection-driven verifier that follows nothing it has not checked; see verify_buffer.hpp
// for why flatbuffers::Verify is not used.

#include "verify_buffer.hpp"

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <flatbuffers/idl.h>
#include <flatbuffers/verifier.h>

namespace ringrpc::tools {

namespace {

using flatbuffers::Offset;
using flatbuffers::Table;
using flatbuffers::uoffset_t;
using flatbuffers::Vector;
using flatbuffers::voffset_t;

bool is_scalar(reflection::BaseType t) { return t >= reflection::UType && t <= reflection::Double; }

// A struct is plain bytes: in bounds and aligned is all it needs. Its size comes from the
// schema, which may be hostile too.
bool struct_size_ok(const reflection::Object& obj) {
  return obj.is_struct() && obj.bytesize() > 0 && obj.minalign() > 0 && (obj.minalign() & (obj.minalign() - 1)) == 0;
}

class buffer_verifier {
 public:
  buffer_verifier(const reflection::Schema& s, const std::uint8_t* data, std::size_t size)
      : _s(s), _v(data, size) {}

  bool root(const reflection::Object& obj, const std::uint8_t* data) {
    const uoffset_t o = _v.VerifyOffset(std::size_t{0});
    return o != 0 && table(obj, data + o);
  }

 private:
  const reflection::Object* object(int index) const {
    const auto* objs = _s.objects();
    if (objs == nullptr || index < 0 || static_cast<uoffset_t>(index) >= objs->size()) return nullptr;
    return objs->Get(static_cast<uoffset_t>(index));
  }
  const reflection::Enum* enumeration(int index) const {
    const auto* enums = _s.enums();
    if (enums == nullptr || index < 0 || static_cast<uoffset_t>(index) >= enums->size()) return nullptr;
    return enums->Get(static_cast<uoffset_t>(index));
  }

  bool table(const reflection::Object& obj, const std::uint8_t* p) {
    if (obj.is_struct()) return false;
    const auto* t = reinterpret_cast<const Table*>(p);
    if (!t->VerifyTableStart(_v)) return false;
    if (obj.fields() != nullptr) {
      for (const reflection::Field* f : *obj.fields()) {
        if (f == nullptr || !field(*t, p, *f)) return false;
      }
    }
    return _v.EndTable();
  }

  bool field(const Table& t, const std::uint8_t* p, const reflection::Field& f) {
    const voffset_t off = f.offset();
    const reflection::Type* type = f.type();
    // Offsets 0 and 2 are the vtable's own header; odd ones would read past its end.
    if (type == nullptr || off < 4 || off % 2 != 0) return false;
    const voffset_t at = t.GetOptionalFieldOffset(off);
    if (at == 0) return !f.required();
    const auto base = type->base_type();
    if (is_scalar(base)) {
      const std::size_t n = flatbuffers::GetTypeSize(base);
      return _v.VerifyFieldStruct(p, at, n, n);
    }
    if (base == reflection::Obj) {
      const reflection::Object* child = object(type->index());
      if (child == nullptr) return false;
      if (child->is_struct()) {
        return struct_size_ok(*child) &&
               _v.VerifyFieldStruct(p, at, static_cast<std::size_t>(child->bytesize()),
                                    static_cast<std::size_t>(child->minalign()));
      }
    }
    if (base != reflection::String && base != reflection::Obj && base != reflection::Vector &&
        base != reflection::Union) {
      return false;  // arrays live only in structs; vectors of vectors do not exist
    }
    if (_v.VerifyOffset(p, at) == 0) return false;
    const auto* target = t.GetPointer<const std::uint8_t*>(off);
    switch (base) {
      case reflection::String: return _v.VerifyString(reinterpret_cast<const flatbuffers::String*>(target));
      case reflection::Obj: return table(*object(type->index()), target);
      case reflection::Vector: return vector(t, f, *type, target);
      case reflection::Union: {
        // The hidden type field sits in the slot before the value's.
        const voffset_t type_at = t.GetOptionalFieldOffset(static_cast<voffset_t>(off - sizeof(voffset_t)));
        if (type_at == 0 || !_v.VerifyFieldStruct(p, type_at, 1, 1)) return false;
        return union_member(type->index(), p[type_at], target);
      }
      default: return false;
    }
  }

  bool vector(const Table& t, const reflection::Field& f, const reflection::Type& type, const std::uint8_t* vec) {
    const auto elem = type.element();
    if (is_scalar(elem)) return _v.VerifyVectorOrString(vec, flatbuffers::GetTypeSize(elem));
    switch (elem) {
      case reflection::String: {
        const auto* strings = reinterpret_cast<const Vector<Offset<flatbuffers::String>>*>(vec);
        return _v.VerifyVector(strings) && _v.VerifyVectorOfStrings(strings);
      }
      case reflection::Obj: {
        const reflection::Object* child = object(type.index());
        if (child == nullptr) return false;
        if (child->is_struct()) {
          return struct_size_ok(*child) &&
                 _v.VerifyVectorOrString(vec, static_cast<std::size_t>(child->bytesize()));
        }
        const auto* tables = reinterpret_cast<const Vector<Offset<Table>>*>(vec);
        if (!_v.VerifyVector(tables)) return false;
        for (uoffset_t i = 0; i < tables->size(); ++i) {
          if (!element_offset_ok(tables->Data(), i)) return false;
          if (!table(*child, reinterpret_cast<const std::uint8_t*>(tables->Get(i)))) return false;
        }
        return true;
      }
      case reflection::Union: {
        const auto type_slot = static_cast<voffset_t>(f.offset() - sizeof(voffset_t));
        const voffset_t types_at = t.GetOptionalFieldOffset(type_slot);
        const auto* base = reinterpret_cast<const std::uint8_t*>(&t);
        if (types_at == 0 || _v.VerifyOffset(base, types_at) == 0) return false;
        const auto* types = t.GetPointer<const Vector<std::uint8_t>*>(type_slot);
        const auto* values = reinterpret_cast<const Vector<Offset<Table>>*>(vec);
        if (!_v.VerifyVector(types) || !_v.VerifyVector(values) || types->size() != values->size()) return false;
        for (uoffset_t i = 0; i < values->size(); ++i) {
          if (!element_offset_ok(values->Data(), i)) return false;
          if (!union_member(type.index(), types->Get(i), reinterpret_cast<const std::uint8_t*>(values->Get(i)))) {
            return false;
          }
        }
        return true;
      }
      default: return false;
    }
  }

  // Each element of a vector of tables is an offset; follow it only once it stays inside.
  bool element_offset_ok(const std::uint8_t* elements, uoffset_t i) const {
    return _v.VerifyOffset(elements + std::size_t{i} * sizeof(uoffset_t), 0) != 0;
  }

  // The member is looked up by its value, not its position in the enum: they differ when
  // values are not 0, 1, 2, ...
  bool union_member(int enum_index, std::uint8_t utype, const std::uint8_t* p) {
    const reflection::Enum* e = enumeration(enum_index);
    if (e == nullptr || e->values() == nullptr) return false;
    if (utype == 0) return true;  // NONE: the value is ignored
    const reflection::EnumVal* member = nullptr;
    for (const reflection::EnumVal* ev : *e->values()) {
      if (ev != nullptr && ev->value() == utype) member = ev;
    }
    if (member == nullptr || member->union_type() == nullptr) return false;
    const reflection::Type& ut = *member->union_type();
    if (ut.base_type() == reflection::String) {
      return _v.VerifyString(reinterpret_cast<const flatbuffers::String*>(p));
    }
    if (ut.base_type() != reflection::Obj) return false;
    const reflection::Object* child = object(ut.index());
    if (child == nullptr) return false;
    if (child->is_struct()) {
      return struct_size_ok(*child) && _v.VerifyFromPointer(p, static_cast<std::size_t>(child->bytesize()));
    }
    return table(*child, p);
  }

  const reflection::Schema& _s;
  flatbuffers::Verifier _v;
};

// What a type may refer to by index, and whether the index is in range.
std::string type_problem(const reflection::Schema& s, const reflection::Type* t) {
  if (t == nullptr) return "a type is missing";
  // Read as the bytes they are: base_type() would make an enum of any value, and outside
  // BaseType's range that is undefined behaviour.
  const auto* raw = reinterpret_cast<const Table*>(t);
  const auto base_value = raw->GetField<std::int8_t>(reflection::Type::VT_BASE_TYPE, 0);
  const auto elem_value = raw->GetField<std::int8_t>(reflection::Type::VT_ELEMENT, 0);
  if (base_value <= reflection::None || base_value >= reflection::MaxBaseType || elem_value < reflection::None ||
      elem_value >= reflection::MaxBaseType) {
    return "a type has an unknown base type";
  }
  const auto base = t->base_type();
  const auto elem = t->element();
  // Which table an index refers to, as Type::Deserialize decides it.
  const bool to_object =
      base == reflection::Obj || ((base == reflection::Vector || base == reflection::Array) && elem == reflection::Obj);
  // Union types and their hidden type fields need their enum (describe() looks it up too).
  const bool series = base == reflection::Vector || base == reflection::Array;
  const bool to_enum = base == reflection::Union || base == reflection::UType ||
                       (series && (elem == reflection::Union || elem == reflection::UType));
  const int index = t->index();
  if ((to_object || to_enum) && index < 0) return "a table, struct or union type has no index";
  if (index < 0) return {};
  const uoffset_t n = to_object ? (s.objects() ? s.objects()->size() : 0) : (s.enums() ? s.enums()->size() : 0);
  if (static_cast<uoffset_t>(index) >= n) return "a type index is out of range";
  return {};
}

// DeserializeAttributes fails on a key the parser does not know, and reads every value.
std::string attributes_problem(const Vector<Offset<reflection::KeyValue>>* attrs,
                               const std::map<std::string, bool>& known) {
  if (attrs == nullptr) return {};
  for (const reflection::KeyValue* kv : *attrs) {
    if (kv == nullptr || kv->key() == nullptr || kv->value() == nullptr) return "an attribute is incomplete";
    if (!known.contains(kv->key()->str())) return "unknown attribute " + kv->key()->str();
  }
  return {};
}

const reflection::KeyValue* attribute(const Vector<Offset<reflection::KeyValue>>* attrs, std::string_view key) {
  if (attrs == nullptr) return nullptr;
  for (const reflection::KeyValue* kv : *attrs) {
    if (kv->key()->string_view() == key) return kv;
  }
  return nullptr;
}

// Sizes as flatbuffers' parser counts them (idl.h SizeOf): unlike reflection's GetTypeSize,
// None is 1 and Array 4.
std::size_t parser_size_of(reflection::BaseType t) {
  if (t == reflection::None) return 1;
  if (t == reflection::Array) return 4;
  return flatbuffers::GetTypeSize(t);
}

// idl.h InlineSize, on a schema whose type indices were checked.
std::size_t inline_size(const reflection::Schema& s, reflection::BaseType base, int index, std::uint16_t fixed_length) {
  if (base == reflection::Obj) {
    const reflection::Object* obj = s.objects()->Get(static_cast<uoffset_t>(index));
    return obj->is_struct() ? static_cast<std::size_t>(obj->bytesize()) : parser_size_of(base);
  }
  return parser_size_of(base) * (fixed_length != 0 ? fixed_length : 1);
}

std::size_t inline_size(const reflection::Schema& s, const reflection::Type& t) {
  if (t.base_type() == reflection::Vector || t.base_type() == reflection::Array) {
    return inline_size(s, t.element(), t.index(), 1) * t.fixed_length();
  }
  return inline_size(s, t.base_type(), t.index(), 0);
}

// StructDef::Deserialize (2.0.8) recomputes a struct's size from its fields, in id order, with
// the padding their offsets imply, and asserts that it equals bytesize (0 for a table), ending
// the process when it does not. The same sum, with the same unsigned wrap-around.
bool layout_matches(const reflection::Schema& s, const reflection::Object& obj) {
  if (!obj.is_struct()) return obj.bytesize() == 0;
  const auto& fields = *obj.fields();
  std::vector<const reflection::Field*> by_id(fields.size());
  for (const reflection::Field* f : fields) by_id[f->id()] = f;
  std::size_t total = 0;
  for (std::size_t i = 0; i < by_id.size(); ++i) {
    const std::size_t size = inline_size(s, *by_id[i]->type());
    total += size;
    if (i + 1 < by_id.size()) {
      total += static_cast<std::size_t>(int{by_id[i + 1]->offset()} - int{by_id[i]->offset()}) - size;
    } else {
      total += (~total + 1) & (static_cast<std::size_t>(obj.minalign()) - 1);
    }
  }
  return static_cast<int>(total) == obj.bytesize();
}

}  // namespace

std::string schema_problem(const reflection::Schema& s) {
  // A definition that fails to deserialize is freed while its table still holds it (the double
  // free): every reason FieldDef, StructDef and EnumDef::Deserialize have to fail is checked
  // here, with the attributes a fresh parser knows.
  const flatbuffers::Parser fresh;
  const std::map<std::string, bool>& known = fresh.known_attributes_;
  std::set<std::string_view> object_names;
  if (s.objects() != nullptr) {
    for (const reflection::Object* obj : *s.objects()) {
      if (obj != nullptr && obj->name() != nullptr) object_names.insert(obj->name()->string_view());
    }
  }
  std::set<std::string_view> seen_objects;
  if (s.objects() != nullptr) {
    for (const reflection::Object* obj : *s.objects()) {
      if (obj == nullptr || obj->name() == nullptr || obj->fields() == nullptr) return "a table is incomplete";
      const std::string_view name = obj->name()->string_view();
      if (!seen_objects.insert(name).second) return "two tables or structs are named " + std::string(name);
      if (std::string why = attributes_problem(obj->attributes(), known); !why.empty()) {
        return std::string(name) + ": " + why;
      }
      if (obj->is_struct() && !struct_size_ok(*obj)) return "struct " + std::string(name) + " has no valid size";
      const uoffset_t n = obj->fields()->size();
      std::vector<bool> ids(n, false);
      std::set<std::string_view> field_names;
      bool has_key = false;
      for (const reflection::Field* f : *obj->fields()) {
        if (f == nullptr || f->name() == nullptr) return std::string(name) + " has an incomplete field";
        if (f->id() >= n || ids[f->id()]) return std::string(name) + " has field ids that are not 0..n-1";
        ids[f->id()] = true;
        if (!field_names.insert(f->name()->string_view()).second) {
          return std::string(name) + " has two fields named " + f->name()->str();
        }
        if (std::string why = type_problem(s, f->type()); !why.empty()) {
          return std::string(name) + "." + f->name()->str() + ": " + why;
        }
        if (std::string why = attributes_problem(f->attributes(), known); !why.empty()) {
          return std::string(name) + "." + f->name()->str() + ": " + why;
        }
        if (attribute(f->attributes(), "flexbuffer") != nullptr &&
            (f->type()->base_type() != reflection::Vector || f->type()->element() != reflection::UByte)) {
          return std::string(name) + "." + f->name()->str() + ": a flexbuffer field must be [ubyte]";
        }
        if (const auto* nested = attribute(f->attributes(), "nested_flatbuffer");
            nested != nullptr && !object_names.contains(nested->value()->string_view())) {
          return std::string(name) + "." + f->name()->str() + ": nested_flatbuffer names no table";
        }
        // As flatc allows it: one key per table, a scalar or a string.
        if (f->key()) {
          const auto kb = f->type()->base_type();
          if (has_key || !(kb == reflection::String || (kb >= reflection::Bool && kb <= reflection::Double))) {
            return std::string(name) + "." + f->name()->str() + ": a key must be the only one, a scalar or a string";
          }
          has_key = true;
        }
        // Deserialize asserts this, which ends the process.
        if (f->required() && f->optional()) {
          return std::string(name) + "." + f->name()->str() + " is both required and optional";
        }
      }
    }
  }
  // Only now are all type indices known good, which the sizes of nested structs need.
  if (s.objects() != nullptr) {
    for (const reflection::Object* obj : *s.objects()) {
      if (!layout_matches(s, *obj)) return obj->name()->str() + ": its size does not match its fields";
    }
  }
  std::set<std::string_view> enum_names;
  if (s.enums() != nullptr) {
    for (const reflection::Enum* e : *s.enums()) {
      if (e == nullptr || e->name() == nullptr || e->values() == nullptr) return "an enum is incomplete";
      const std::string_view name = e->name()->string_view();
      if (!enum_names.insert(name).second) return "two enums or unions are named " + std::string(name);
      if (std::string why = attributes_problem(e->attributes(), known); !why.empty()) {
        return std::string(name) + ": " + why;
      }
      if (std::string why = type_problem(s, e->underlying_type()); !why.empty()) return std::string(name) + ": " + why;
      std::set<std::string_view> value_names;
      for (const reflection::EnumVal* v : *e->values()) {
        if (v == nullptr || v->name() == nullptr) return std::string(name) + " has an incomplete value";
        if (!value_names.insert(v->name()->string_view()).second) {
          return std::string(name) + " has two values named " + v->name()->str();
        }
        // The NONE member of a union has a union_type of base None.
        if (v->union_type() != nullptr && v->union_type()->base_type() != reflection::None) {
          if (std::string why = type_problem(s, v->union_type()); !why.empty()) {
            return std::string(name) + "." + v->name()->str() + ": " + why;
          }
        }
      }
    }
  }
  if (s.services() != nullptr) {
    for (const reflection::Service* svc : *s.services()) {
      if (svc == nullptr || svc->name() == nullptr) return "a service is incomplete";
      if (std::string why = attributes_problem(svc->attributes(), known); !why.empty()) {
        return svc->name()->str() + ": " + why;
      }
      if (svc->calls() == nullptr) continue;
      for (const reflection::RPCCall* call : *svc->calls()) {
        if (call == nullptr || call->name() == nullptr || call->request() == nullptr || call->response() == nullptr ||
            call->request()->name() == nullptr || call->response()->name() == nullptr ||
            !object_names.contains(call->request()->name()->string_view()) ||
            !object_names.contains(call->response()->name()->string_view())) {
          return "a method of " + svc->name()->str() + " names a request or reply that is not a table";
        }
        if (std::string why = attributes_problem(call->attributes(), known); !why.empty()) {
          return svc->name()->str() + "." + call->name()->str() + ": " + why;
        }
      }
    }
  }
  return {};
}

bool verify_buffer(const reflection::Schema& schema, const reflection::Object& root, const std::uint8_t* data,
                   std::size_t size) {
  if (data == nullptr || size < sizeof(uoffset_t)) return false;
  buffer_verifier v(schema, data, size);
  return v.root(root, data);
}

}  // namespace ringrpc::tools
