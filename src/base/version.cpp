#include "ringrpc/version.hpp"

#ifndef RINGRPC_VERSION
#error "RINGRPC_VERSION is set by src/meson.build from the project's version"
#endif

namespace ringrpc {

std::string_view version() noexcept { return RINGRPC_VERSION; }

}  // namespace ringrpc
