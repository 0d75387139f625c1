#pragma once
// ringrpc's public headers are C++20 (concepts, std::span, designated initializers). Without
// this check an older -std gives pages of errors from inside them instead of one line.

#if __cplusplus < 202002L
#error "ringrpc needs C++20: compile with -std=c++20 (meson: cpp_std=c++20; pkg-config --cflags ringrpc does not set it)"
#endif
