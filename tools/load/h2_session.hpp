#pragma once
// What ringrpc-load's two HTTP/2 codecs share: proto_h2.cpp (h2c://, grpc://: a call per stream)
// and proto_grpc_stream.cpp (grpc:// --stream: one gRPC bidi call per connection). The settings
// made once per run from the URL and the options, the request headers, a client nghttp2 session,
// and the names HTTP/2 error codes are counted by. Internal to those two files.

#include <nghttp2/nghttp2.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol.hpp"

namespace ringrpc::load::h2_detail {

inline constexpr std::size_t frame_header_bytes = 9;
/// The largest frame a server may send before we raise SETTINGS_MAX_FRAME_SIZE (we never do).
inline constexpr std::size_t max_frame_payload = 16384;

struct h2_settings {
  bool grpc = false;
  std::string scheme = "http";
  std::string authority;
  std::vector<std::pair<std::string, std::string>> headers;  ///< -H, names lowercased
  std::vector<std::byte> body;  ///< POST body: the payload (h2c) or the framed message (grpc)
  std::string default_path;
  std::uint32_t max_reply_bytes = 64u << 20;
  std::shared_ptr<const request_templates> templates;  ///< never null
  bool stream = false;            ///< grpc --stream: one bidi call per connection
  std::uint32_t stream_depth = 1;  ///< --stream: -P, which sizes the windows we grant
};

/// The run's settings from the target and the options. Throws std::invalid_argument for a bad
/// -H or what --stream cannot go with.
std::shared_ptr<h2_settings> make_h2_settings(const target& t, const codec_options& options);

/// A header whose strings outlive the session (the settings', or a kind's): nghttp2 copies none.
nghttp2_nv nv(const std::string& name, const std::string& value);

/// The request headers of `kind`: :method, :scheme, :authority, :path in that order (path_index),
/// gRPC's content-type and te, then -H.
std::vector<nghttp2_nv> request_headers(const h2_settings& s, const request_kind& kind);
inline constexpr std::size_t path_index = 3;

/// A client session for `user`, with the callbacks `install` sets; nghttp2's HTTP messaging checks
/// off (the codecs read only :status and grpc-status), at most 100 streams until the server's
/// SETTINGS, and our SETTINGS queued (no push, `stream_window`) with `connection_window`.
/// Throws std::bad_alloc.
nghttp2_session* new_client_session(void (*install)(nghttp2_session_callbacks*), void* user,
                                    std::int32_t stream_window, std::int32_t connection_window);

/// "flow_control_error", "enhance_your_calm": an HTTP/2 error code as error kinds show it.
std::string code_name(std::uint32_t code);
/// A response's `:status` value as a number: three digits, else 0 (counted as http_0; nghttp2's
/// messaging checks are off).
inline unsigned http_status_of(std::string_view v) noexcept {
  if (v.size() != 3 || v[0] < '0' || v[0] > '9' || v[1] < '0' || v[1] > '9' || v[2] < '0' || v[2] > '9') return 0;
  return static_cast<unsigned>((v[0] - '0') * 100 + (v[1] - '0') * 10 + (v[2] - '0'));
}

/// The HTTP/2 error code that answers one of nghttp2's errors about the server's frames (a
/// flood of frames that each want an answer is "excessive load", ENHANCE_YOUR_CALM).
std::uint32_t code_of(int lib_error_code);

/// grpc:// --stream's codec (proto_grpc_stream.cpp).
std::unique_ptr<connection_codec> make_grpc_stream_codec(std::shared_ptr<const h2_settings> settings);

}  // namespace ringrpc::load::h2_detail
