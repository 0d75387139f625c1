#pragma once
// The version of the ringrpc library an embedder linked, for --version lines, logs and
// ringrpc_build_info.

#include <string_view>

#include "ringrpc/cxx20.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

/// The library's version, "MAJOR.MINOR.PATCH" (meson's project version at build time).
std::string_view version() noexcept;

}  // namespace ringrpc

RINGRPC_API_END
