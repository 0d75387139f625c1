#pragma once
// The open-file limit a tool that holds many connections needs. The soft RLIMIT_NOFILE is 1,024
// on most systems while the hard one is far higher: 10,000 connections (ringrpc-load -c 10000,
// a ringrpc-server facing them) need the soft limit raised, which any process may do up to the
// hard one, as nginx and systemd's services do. Header-only: ringrpc-server and ringrpc-load
// share nothing else from here.

#include <sys/resource.h>

namespace ringrpc::tools {

/// Raises the soft open-file limit to the hard one; returns the soft limit now in force (0 if
/// it cannot be read). A failure leaves the limit as it was: the tool then reports its own
/// EMFILE where it meets one.
inline rlim_t raise_open_file_limit() noexcept {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0) return 0;
  if (files.rlim_cur < files.rlim_max) {
    rlimit wanted = files;
    wanted.rlim_cur = files.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &wanted) == 0) files = wanted;
  }
  return files.rlim_cur;
}

}  // namespace ringrpc::tools
