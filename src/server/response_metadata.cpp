#include "server/response_metadata.hpp"

#include <algorithm>

namespace ringrpc::detail {

bool response_metadata::add(bool trailer, std::string_view key, std::string_view value,
                            std::uint32_t max_entries, std::uint32_t max_bytes) {
  if (!valid_metadata_key(key)) return false;
  std::vector<metadata_entry>& list = trailer ? trailers : headers;
  if (std::any_of(list.begin(), list.end(), [&](const metadata_entry& e) { return e.key == key; })) {
    return false;
  }
  if (entries + 1 > max_entries || bytes + key.size() + value.size() > max_bytes) return false;
  list.push_back({std::string(key), std::string(value)});
  ++entries;
  bytes += key.size() + value.size();
  return true;
}

}  // namespace ringrpc::detail
