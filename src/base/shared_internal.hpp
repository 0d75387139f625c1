#pragma once
// The libraries are built with hidden visibility (ringrpc/export.hpp). A few internals of the
// core are called by the other ringrpc libraries (ops, tls, discovery) through libringrpc.so;
// RINGRPC_SHARED_INTERNAL exports them for those callers. They are not part of the ABI promise:
// abi/suppressions.abignore leaves ringrpc::detail and ringrpc::log out of the comparison, and
// the libraries of one release are always installed together (one Debian package).

#define RINGRPC_SHARED_INTERNAL __attribute__((visibility("default")))
