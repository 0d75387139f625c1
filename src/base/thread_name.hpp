#pragma once
// Names the calling thread as `top -H`, `ps -L`, gdb and perf show it. Every ringrpc thread is
// "rr-<role>[/<index>]" ("rr-accept", "rr-read/0", "rr-default/3", "rr-stop"). The kernel keeps
// 15 bytes, so a long role is cut, never the index: threads of one role stay distinct
// ("rr-a-very-lo/11").

#include <pthread.h>

#include <charconv>
#include <string_view>

namespace ringrpc::detail {

inline void name_this_thread(std::string_view role) noexcept {
  char buf[16] = {};
  role.copy(buf, sizeof(buf) - 1);
  pthread_setname_np(pthread_self(), buf);
}

inline void name_this_thread(std::string_view role, unsigned index) noexcept {
  char suffix[12] = {'/'};
  const auto end = std::to_chars(suffix + 1, suffix + sizeof(suffix), index).ptr;
  const std::size_t suffix_len = static_cast<std::size_t>(end - suffix);
  char buf[16] = {};
  const std::size_t cut = role.copy(buf, sizeof(buf) - 1 - suffix_len);
  std::string_view(suffix, suffix_len).copy(buf + cut, suffix_len);
  pthread_setname_np(pthread_self(), buf);
}

}  // namespace ringrpc::detail
