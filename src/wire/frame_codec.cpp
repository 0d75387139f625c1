#include "wire/frame_codec.hpp"

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

  wire::FrameBuilder b(_fbb);
  b.add_call_id(f.call_id);
  b.add_timeout_us(f.timeout_us);
  if (!payload.IsNull()) b.add_payload(payload);
  if (!method.IsNull()) b.add_method(method);
  if (!message.IsNull()) b.add_message(message);
  b.add_retry_after_ms(f.retry_after_ms);
  b.add_status(static_cast<wire::Status>(f.code));
  b.add_kind(f.kind);
  _fbb.FinishSizePrefixed(b.Finish());
  return {reinterpret_cast<const std::byte*>(_fbb.GetBufferPointer()), _fbb.GetSize()};
}

namespace {

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

decode_outcome decode_frame(std::span<const std::byte> frame, frame_view& view) noexcept {
  const auto* buf = reinterpret_cast<const std::uint8_t*>(frame.data());
  view = frame_view{};
  flatbuffers::Verifier::Options opts;
  opts.max_depth = 8;  // a Frame has no nesting; a deep buffer is an attack, not a call
  flatbuffers::Verifier verifier(buf, frame.size(), opts);
  if (frame.size() < frame_prefix_bytes + 8 ||
      !verifier.VerifySizePrefixedBuffer<wire::Frame>(nullptr)) {
    return salvage_call_id(buf, frame.size(), view.call_id) ? decode_outcome::malformed_with_id
                                                            : decode_outcome::malformed;
  }
  const auto* f = flatbuffers::GetSizePrefixedRoot<wire::Frame>(buf);
  view.call_id = f->call_id();
  view.kind = f->kind();
  if (const auto* m = f->method()) view.method = {m->data(), m->size()};
  view.timeout_us = f->timeout_us();
  if (const auto* p = f->payload()) {
    view.payload = {reinterpret_cast<const std::byte*>(p->data()), p->size()};
  }
  view.code = static_cast<status>(f->status());
  if (const auto* msg = f->message()) view.message = {msg->data(), msg->size()};
  view.retry_after_ms = f->retry_after_ms();
  // Enum values the schema does not know are legal FlatBuffers but meaningless to us.
  if (view.kind > wire::Kind::MAX) return decode_outcome::malformed_with_id;
  return decode_outcome::ok;
}

}  // namespace ringrpc::detail
