#pragma once
// Names the calling thread as `top -H`, `ps -L` and perf show it. Every ringrpc thread is named
// "rr-<role>[/<index>]" ("rr-accept", "rr-read/0", "rr-resp", "rr-stop"): the kernel keeps 15
// bytes, so the role comes first and long names lose their tail, never their prefix.

#include <pthread.h>

#include <charconv>
#include <string_view>

namespace ringrpc::detail {

inline void name_this_thread(std::string_view name) noexcept {
  char buf[16] = {};
  name.copy(buf, sizeof(buf) - 1);
  pthread_setname_np(pthread_self(), buf);
}

inline void name_this_thread(std::string_view role, unsigned index) noexcept {
  char buf[16] = {};
  const std::string_view r = role.substr(0, 10);
  r.copy(buf, r.size());
  char* at = buf + r.size();
  *at++ = '/';
  std::to_chars(at, buf + sizeof(buf) - 1, index);  // left out if it does not fit
  pthread_setname_np(pthread_self(), buf);
}

}  // namespace ringrpc::detail
