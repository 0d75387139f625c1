// A reflection-driven verifier that follows nothing it has not checked; see verify_buffer.hpp
// for why flatbuffers::Verify is not used.

#include "verify_buffer.hpp"

#include <set>
#include <string_view>
#include <vector>

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
  const auto base = t->base_type();
  const auto elem = t->element();
  if (base <= reflection::None || base >= reflection::MaxBaseType || elem < reflection::None ||
      elem >= reflection::MaxBaseType) {
    return "a type has an unknown base type";
  }
  const bool to_object = base == reflection::Obj || elem == reflection::Obj;
  const bool to_enum = base == reflection::Union || (base == reflection::Vector && elem == reflection::Union);
  const int index = t->index();
  if ((to_object || to_enum) && index < 0) return "a table, struct or union type has no index";
  if (index < 0) return {};
  const uoffset_t n = to_object ? (s.objects() ? s.objects()->size() : 0) : (s.enums() ? s.enums()->size() : 0);
  if (static_cast<uoffset_t>(index) >= n) return "a type index is out of range";
  return {};
}

}  // namespace

std::string schema_problem(const reflection::Schema& s) {
  std::set<std::string_view> object_names;
  if (s.objects() != nullptr) {
    for (const reflection::Object* obj : *s.objects()) {
      if (obj == nullptr || obj->name() == nullptr || obj->fields() == nullptr) return "a table is incomplete";
      const std::string_view name = obj->name()->string_view();
      if (!object_names.insert(name).second) return "two tables or structs are named " + std::string(name);
      if (obj->is_struct() && !struct_size_ok(*obj)) return "struct " + std::string(name) + " has no valid size";
      const uoffset_t n = obj->fields()->size();
      std::vector<bool> ids(n, false);
      std::set<std::string_view> field_names;
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
      }
    }
  }
  std::set<std::string_view> enum_names;
  if (s.enums() != nullptr) {
    for (const reflection::Enum* e : *s.enums()) {
      if (e == nullptr || e->name() == nullptr || e->values() == nullptr) return "an enum is incomplete";
      const std::string_view name = e->name()->string_view();
      if (!enum_names.insert(name).second) return "two enums or unions are named " + std::string(name);
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
      if (svc->calls() == nullptr) continue;
      for (const reflection::RPCCall* call : *svc->calls()) {
        if (call == nullptr || call->name() == nullptr || call->request() == nullptr || call->response() == nullptr ||
            call->request()->name() == nullptr || call->response()->name() == nullptr ||
            !object_names.contains(call->request()->name()->string_view()) ||
            !object_names.contains(call->response()->name()->string_view())) {
          return "a method of " + svc->name()->str() + " names a request or reply that is not a table";
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
