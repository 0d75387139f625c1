#include "h2_session.hpp"

#include <algorithm>
#include <cctype>
#include <new>
#include <stdexcept>

#include "grpc_framing.hpp"

namespace ringrpc::load::h2_detail {

namespace {

const std::string k_method = ":method", k_scheme = ":scheme", k_authority = ":authority", k_path = ":path",
                  k_content_type = "content-type", k_te = "te", v_grpc = "application/grpc", v_trailers = "trailers",
                  v_post = "POST";

}  // namespace

nghttp2_nv nv(const std::string& name, const std::string& value) {
  return {reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
          NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE};
}

std::vector<nghttp2_nv> request_headers(const h2_settings& s, const request_kind& kind) {
  std::vector<nghttp2_nv> nva;
  const std::string& method = s.grpc ? v_post : kind.method;
  nva.push_back(nv(k_method, method));
  nva.push_back(nv(k_scheme, s.scheme));
  nva.push_back(nv(k_authority, s.authority));
  nva.push_back(nv(k_path, kind.path.empty() ? s.default_path : kind.path));
  if (s.grpc) {
    nva.push_back(nv(k_content_type, v_grpc));
    nva.push_back(nv(k_te, v_trailers));
  }
  for (const auto& [name, value] : s.headers) nva.push_back(nv(name, value));
  return nva;
}

nghttp2_session* new_client_session(void (*install)(nghttp2_session_callbacks*), void* user,
                                    std::int32_t stream_window, std::int32_t connection_window) {
  nghttp2_session_callbacks* cbs = nullptr;
  if (nghttp2_session_callbacks_new(&cbs) != 0) throw std::bad_alloc();
  install(cbs);
  // nghttp2's HTTP messaging checks validate every received header name and value (a few
  // per cent of a call's CPU); the codecs read only :status and grpc-status, and a reply
  // without :status counts as http_0, so the checks buy nothing here.
  nghttp2_option* opt = nullptr;
  if (nghttp2_option_new(&opt) != 0) {
    nghttp2_session_callbacks_del(cbs);
    throw std::bad_alloc();
  }
  nghttp2_option_set_no_http_messaging(opt, 1);
  // Until the server's SETTINGS say its limit, open at most 100 streams (RFC 9113's lowest
  // recommended limit), not the unbounded default that a server refuses stream by stream.
  nghttp2_option_set_peer_max_concurrent_streams(opt, 100);
  nghttp2_session* session = nullptr;
  const int rc = nghttp2_session_client_new2(&session, cbs, user, opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cbs);
  if (rc != 0) throw std::bad_alloc();
  const nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                       {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<std::uint32_t>(stream_window)}};
  nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, iv, std::size(iv));
  nghttp2_session_set_local_window_size(session, NGHTTP2_FLAG_NONE, 0, connection_window);
  return session;
}

std::string code_name(std::uint32_t code) {
  std::string name;
  for (const char* p = nghttp2_http2_strerror(code); *p != '\0'; ++p) {
    name.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(*p))));
  }
  return name;
}

std::uint32_t code_of(int lib_error_code) {
  switch (lib_error_code) {
    case NGHTTP2_ERR_FLOW_CONTROL: return NGHTTP2_FLOW_CONTROL_ERROR;
    case NGHTTP2_ERR_FRAME_SIZE_ERROR: return NGHTTP2_FRAME_SIZE_ERROR;
    case NGHTTP2_ERR_STREAM_CLOSED: return NGHTTP2_STREAM_CLOSED;
    case NGHTTP2_ERR_FLOODED: return NGHTTP2_ENHANCE_YOUR_CALM;
    default: return NGHTTP2_PROTOCOL_ERROR;
  }
}

std::shared_ptr<h2_settings> make_h2_settings(const target& t, const codec_options& options) {
  auto s = std::make_shared<h2_settings>();
  s->grpc = t.scheme == "grpc";
  s->authority = options.host_header.empty() ? t.host + ":" + std::to_string(t.port) : options.host_header;
  s->default_path = t.path.empty() ? "/" : t.path;
  s->max_reply_bytes = options.max_reply_bytes;
  for (const std::string& h : options.headers) {
    const auto colon = h.find(':', 1);  // not the first byte: pseudo-headers are ours
    std::string name = colon == std::string::npos ? std::string() : h.substr(0, colon);
    if (name.empty() || name.find_first_of(" \t") != std::string::npos || name[0] == ':' ||
        h.find_first_of("\r\n") != std::string::npos) {
      throw std::invalid_argument("bad header '" + h + "': expected 'Name: value' on one line");
    }
    std::string value = h.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    value.erase(value.find_last_not_of(" \t") + 1);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (name == "host") {
      s->authority = value;  // HTTP/2 says it in :authority
    } else if (name == "connection" || name == "content-length" || name == "te" || name == "transfer-encoding" ||
               (s->grpc && name == "content-type")) {
      throw std::invalid_argument("header '" + name + "' is set by ringrpc-load itself");
    } else {
      s->headers.emplace_back(std::move(name), std::move(value));
    }
  }
  s->body = s->grpc ? grpc_frame_message(options.payload) : options.payload;
  s->templates = options.templates;
  s->stream = options.stream;
  s->stream_depth = options.stream_depth;
  if (s->stream && s->templates->has_payload) {
    // The message is made once (-s, --payload-file, --proto --data), as for unary grpc://.
    throw std::invalid_argument("grpc:// --stream sends one message, made once: it cannot go with --template");
  }
  return s;
}

}  // namespace ringrpc::load::h2_detail
