#pragma once
// What the ringrpc shared libraries export. They are built with -fvisibility=hidden, and every
// public header wraps its declarations in RINGRPC_API_BEGIN ... RINGRPC_API_END: what
// include/ringrpc declares is exported, and nothing of src/ is, so the ABI the libraries promise
// (docs/compatibility.md) is exactly the public headers.

#include "ringrpc/cxx20.hpp"

#if defined(__GNUC__)
#define RINGRPC_API_BEGIN _Pragma("GCC visibility push(default)")
#define RINGRPC_API_END _Pragma("GCC visibility pop")
#else
#define RINGRPC_API_BEGIN
#define RINGRPC_API_END
#endif
