#include "wire/frame_codec.hpp"

#include <bit>
#include <cstring>

namespace ringrpc::detail {

std::span<const std::byte> frame_encoder::encode(const frame_view& f) {
  _fbb.Clear();
  // Children first: FlatBuffers builds back to front and a table may only refer to objects
  // that already exist in the buffer.
  flatbuffers::Offset<flatbuffers::String> method;
  if (!f.method.empty()) method = _fbb.CreateString(f.method.data(), f.method.size());
  flatbuffers::Offset<flatbuffers::Vector<std::uint8_t>> payload;
  if (!f.payload.empty()) {
    payload = _fbb.CreateVector(reinterpret_cast<const std::uint8_t*>(f.payload.data()),
                                f.payload.size());
  }
  flatbuffers::Offset<flatbuffers::String> message;
  if (!f.message.empty()) message = _fbb.CreateString(f.message.data(), f.message.size());
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<wire::Metadata>>> metadata;
  if (f.metadata_out != nullptr && !(f.metadata_out->defaults.empty() && f.metadata_out->pairs.empty())) {
    metadata = encode_metadata(*f.metadata_out);
  }
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<wire::Metadata>>> trailers;
  if (f.trailers_out != nullptr && !(f.trailers_out->defaults.empty() && f.trailers_out->pairs.empty())) {
    trailers = encode_metadata(*f.trailers_out);
  }
  flatbuffers::Offset<flatbuffers::Vector<std::uint8_t>> details;
  if (!f.details.empty()) {
    details = _fbb.CreateVector(reinterpret_cast<const std::uint8_t*>(f.details.data()), f.details.size());
  }

  wire::FrameBuilder b(_fbb);
  b.add_call_id(f.call_id);
  b.add_timeout_us(f.timeout_us);
  b.add_credit_bytes(f.credit_bytes);
  if (!payload.IsNull()) b.add_payload(payload);
  if (!method.IsNull()) b.add_method(method);
  if (!message.IsNull()) b.add_message(message);
  b.add_retry_after_ms(f.retry_after_ms);
  b.add_credit_messages(f.credit_messages);
  if (!metadata.IsNull()) b.add_metadata(metadata);
  if (!trailers.IsNull()) b.add_trailers(trailers);
  if (!details.IsNull()) b.add_details(details);
  b.add_status(static_cast<wire::Status>(f.code));
  b.add_kind(f.kind);
  b.add_stream_kind(f.stream_kind);
  _fbb.FinishSizePrefixed(b.Finish());
  return {reinterpret_cast<const std::byte*>(_fbb.GetBufferPointer()), _fbb.GetSize()};
}

void encode_reply_frame(std::uint64_t call_id, std::span<const std::byte> payload,
                        std::vector<std::byte>& out) {
  encode_payload_frame(call_id, wire::Kind::Reply, payload, out);
}

void encode_payload_frame(std::uint64_t call_id, wire::Kind kind, std::span<const std::byte> payload,
                          std::vector<std::byte>& out) {
  // Offsets from the frame's first byte (the length prefix), which is where verifiers start
  // counting alignment:
  //    0  u32  length of what follows
  //    4  u32  root: offset to the table (24)
  //    8  vtable, 14 bytes: its size, the table's size, then one u16 per field up to payload
  //          (call_id, kind, method, timeout_us, payload); 0 = absent (defaults: not stored)
  //   22  2 bytes padding
  //   24  table: i32 offset back to the vtable (16), u32 offset to payload, u64 call_id (at 32,
  //          8-aligned), u8 kind, 3 bytes padding
  //   44  payload vector: u32 count, then the bytes (absent when empty, as the builder does)
  //       then zeros to a multiple of 8, as the builder pads: the next frame of the stream
  //       then starts as aligned as this one, and can be verified where it lies
  constexpr std::size_t table_at = 24, vector_at = 44;
  const bool has_payload = !payload.empty();
  const std::size_t used = has_payload ? vector_at + 4 + payload.size() : vector_at;
  const std::size_t total = (used + 7) & ~std::size_t{7};
  out.resize(total);
  std::uint8_t* p = reinterpret_cast<std::uint8_t*>(out.data());
  auto put16 = [p](std::size_t at, std::uint16_t v) { std::memcpy(p + at, &v, 2); };
  auto put32 = [p](std::size_t at, std::uint32_t v) { std::memcpy(p + at, &v, 4); };
  static_assert(std::endian::native == std::endian::little, "FlatBuffers is little-endian");
  put32(0, static_cast<std::uint32_t>(total - frame_prefix_bytes));
  put32(4, static_cast<std::uint32_t>(table_at - 4));
  put16(8, 14);                      // vtable size
  put16(10, 20);                     // table size: 4 + 4 + 8 + 1, padded to 4
  put16(12, 8);                      // call_id at table + 8
  put16(14, 16);                     // kind at table + 16
  put16(16, 0);                      // method: absent
  put16(18, 0);                      // timeout_us: absent (0)
  put16(20, has_payload ? 4 : 0);    // payload offset at table + 4
  put16(22, 0);
  put32(table_at, static_cast<std::uint32_t>(table_at - 8));  // soffset: table - vtable
  put32(table_at + 4, has_payload ? static_cast<std::uint32_t>(vector_at - (table_at + 4)) : 0);
  std::memcpy(p + table_at + 8, &call_id, 8);
  p[table_at + 16] = static_cast<std::uint8_t>(kind);
  p[table_at + 17] = p[table_at + 18] = p[table_at + 19] = 0;
  if (has_payload) {
    put32(vector_at, static_cast<std::uint32_t>(payload.size()));
    std::memcpy(p + vector_at + 4, payload.data(), payload.size());
  }
  std::memset(p + used, 0, total - used);
}

namespace {

std::span<const std::byte> bytes_of(const flatbuffers::Vector<std::uint8_t>* v) noexcept {
  if (v == nullptr) return {};
  return {reinterpret_cast<const std::byte*>(v->data()), v->size()};
}

std::string_view chars_of(const flatbuffers::String* s) noexcept {
  return s != nullptr ? std::string_view{s->data(), s->size()} : std::string_view{};
}

// Reads only the call id of a frame that failed full verification, checking every byte it
// touches, so a corrupt body can still be answered with BAD_REQUEST for the right call.
bool salvage_call_id(const std::uint8_t* buf, std::size_t size, std::uint64_t& id) noexcept {
  flatbuffers::Verifier v(buf, size);
  const auto root = v.VerifyOffset(frame_prefix_bytes);
  if (root == 0) return false;
  const auto* table =
      reinterpret_cast<const flatbuffers::Table*>(buf + frame_prefix_bytes + root);
  if (!table->VerifyTableStart(v) ||
      !table->VerifyField<std::uint64_t>(v, wire::Frame::VT_CALL_ID, sizeof(std::uint64_t))) {
    return false;
  }
  id = table->GetField<std::uint64_t>(wire::Frame::VT_CALL_ID, 0);
  return true;
}

}  // namespace

decoded_frame decode_frame(std::span<const std::byte> frame) noexcept {
  const auto* buf = reinterpret_cast<const std::uint8_t*>(frame.data());
  flatbuffers::Verifier::Options opts;
  opts.max_depth = 8;  // a Frame nests one level (metadata); a deep buffer is an attack, not a call
  flatbuffers::Verifier verifier(buf, frame.size(), opts);
  if (frame.size() < frame_prefix_bytes + 8 ||
      !verifier.VerifySizePrefixedBuffer<wire::Frame>(nullptr)) [[unlikely]] {
    decoded_frame d{decode_outcome::malformed, {}};
    if (salvage_call_id(buf, frame.size(), d.view.call_id)) d.outcome = decode_outcome::malformed_with_id;
    return d;
  }
  const auto* f = flatbuffers::GetSizePrefixedRoot<wire::Frame>(buf);
  const wire::Kind kind = f->kind();
  // One aggregate returned as a prvalue: it is built in place, every field written once
  // (decoded_frame's comment). The encoder's fields, metadata_out and trailers_out, stay null.
  return decoded_frame{
      // Enum values the schema does not know are legal FlatBuffers but meaningless to us.
      kind > wire::Kind::MAX ? decode_outcome::malformed_with_id : decode_outcome::ok,
      frame_view{
          .call_id = f->call_id(),
          .kind = kind,
          .method = chars_of(f->method()),
          .timeout_us = f->timeout_us(),
          .payload = bytes_of(f->payload()),
          .code = static_cast<status>(f->status()),
          .message = chars_of(f->message()),
          .retry_after_ms = f->retry_after_ms(),
          .metadata = f->metadata(),
          .trailers = f->trailers(),
          .details = bytes_of(f->details()),
          .stream_kind = f->stream_kind(),
          .credit_messages = f->credit_messages(),
          .credit_bytes = f->credit_bytes(),
      }};
}

decode_outcome decode_frame(std::span<const std::byte> frame, frame_view& view) noexcept {
  decoded_frame d = decode_frame(frame);
  view = d.view;
  return d.outcome;
}

}  // namespace ringrpc::detail
