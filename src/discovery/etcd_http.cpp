#include "discovery/etcd_http.hpp"

#include <curl/curl.h>

#include <memory>
#include <mutex>

namespace ringrpc::discovery::detail {

namespace {

// curl_global_init is not thread-safe in every libcurl build: once per process, first use.
void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct easy_deleter {
  void operator()(CURL* c) const noexcept { curl_easy_cleanup(c); }
};
struct slist_deleter {
  void operator()(curl_slist* l) const noexcept { curl_slist_free_all(l); }
};
using easy_ptr = std::unique_ptr<CURL, easy_deleter>;
using slist_ptr = std::unique_ptr<curl_slist, slist_deleter>;

struct collected {
  std::string body;
  bool too_long = false;
};

std::size_t collect(char* data, std::size_t size, std::size_t n, void* user) {
  auto* c = static_cast<collected*>(user);
  const std::size_t bytes = size * n;
  if (c->body.size() + bytes > max_etcd_reply_bytes) {
    c->too_long = true;
    return 0;  // fails the transfer
  }
  c->body.append(data, bytes);
  return bytes;
}

struct line_splitter {
  const std::function<bool(std::string_view)>* on_line;
  std::string partial;
  bool ended_by_reader = false;
  bool too_long = false;
};

std::size_t split_lines(char* data, std::size_t size, std::size_t n, void* user) {
  auto* s = static_cast<line_splitter*>(user);
  const std::size_t bytes = size * n;
  std::string_view in(data, bytes);
  while (!in.empty()) {
    const auto nl = in.find('\n');
    if (nl == std::string_view::npos) {
      if (s->partial.size() + in.size() > max_etcd_reply_bytes) {
        s->too_long = true;
        return 0;
      }
      s->partial.append(in);
      break;
    }
    s->partial.append(in.substr(0, nl));
    in.remove_prefix(nl + 1);
    if (!s->partial.empty() && !(*s->on_line)(s->partial)) {
      s->ended_by_reader = true;
      return 0;
    }
    s->partial.clear();
  }
  return bytes;
}

easy_ptr make_post(const std::string& url, const std::string& body, curl_slist* headers,
                   std::chrono::milliseconds connect_timeout) {
  global_init();
  easy_ptr h(curl_easy_init());
  if (!h) return h;
  CURL* c = h.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // threads of an embedding program: no SIGALRM
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(connect_timeout.count()));
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");  // etcd is dialled directly, whatever http_proxy says
  return h;
}

}  // namespace

http_reply http_post(const std::string& url, const std::string& body, std::chrono::milliseconds timeout) {
  http_reply r;
  slist_ptr headers(curl_slist_append(nullptr, "Content-Type: application/json"));
  easy_ptr h = make_post(url, body, headers.get(), timeout);
  if (!h) {
    r.error = "cannot create an HTTP request (out of memory)";
    return r;
  }
  collected got;
  curl_easy_setopt(h.get(), CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(h.get(), CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(h.get(), CURLOPT_WRITEDATA, &got);
  const CURLcode rc = curl_easy_perform(h.get());
  if (got.too_long) {
    r.error = "etcd reply longer than 16 MiB";
  } else if (rc != CURLE_OK) {
    r.error = curl_easy_strerror(rc);
  }
  curl_easy_getinfo(h.get(), CURLINFO_RESPONSE_CODE, &r.status);
  r.body = std::move(got.body);
  return r;
}

std::string http_post_stream(const std::string& url, const std::string& body,
                             const std::function<bool(std::string_view)>& on_line,
                             const std::atomic<bool>& stop, std::chrono::milliseconds connect_timeout) {
  slist_ptr headers(curl_slist_append(nullptr, "Content-Type: application/json"));
  easy_ptr h = make_post(url, body, headers.get(), connect_timeout);
  if (!h) return "cannot create an HTTP request (out of memory)";
  line_splitter split{&on_line, {}, false, false};
  curl_easy_setopt(h.get(), CURLOPT_WRITEFUNCTION, split_lines);
  curl_easy_setopt(h.get(), CURLOPT_WRITEDATA, &split);
  // Detects a peer that vanished without closing (a partitioned host) on an idle watch.
  curl_easy_setopt(h.get(), CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h.get(), CURLOPT_TCP_KEEPIDLE, 10L);
  curl_easy_setopt(h.get(), CURLOPT_TCP_KEEPINTVL, 5L);

  // A multi handle only so that the wait can be cut short by `stop`: curl_multi_poll with a
  // short timeout, where curl_easy_perform would block until etcd sends something.
  CURLM* m = curl_multi_init();
  if (m == nullptr) return "cannot create an HTTP request (out of memory)";
  curl_multi_add_handle(m, h.get());
  std::string why;
  for (;;) {
    int running = 0;
    if (curl_multi_perform(m, &running) != CURLM_OK) {
      why = "HTTP stream failed";
      break;
    }
    int queued = 0;
    bool done = false;
    while (CURLMsg* msg = curl_multi_info_read(m, &queued)) {
      if (msg->msg != CURLMSG_DONE) continue;
      done = true;
      if (split.ended_by_reader) {
        why.clear();
      } else if (split.too_long) {
        why = "etcd stream line longer than 16 MiB";
      } else if (msg->data.result != CURLE_OK) {
        why = curl_easy_strerror(msg->data.result);
      } else {
        long status = 0;
        curl_easy_getinfo(h.get(), CURLINFO_RESPONSE_CODE, &status);
        why = status == 200 ? "stream ended" : "HTTP status " + std::to_string(status);
      }
    }
    if (done || running == 0) break;
    if (stop.load(std::memory_order_acquire)) break;
    curl_multi_poll(m, nullptr, 0, 100, nullptr);
    if (stop.load(std::memory_order_acquire)) break;
  }
  curl_multi_remove_handle(m, h.get());
  curl_multi_cleanup(m);
  return why;
}

}  // namespace ringrpc::discovery::detail
