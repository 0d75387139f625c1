#pragma once
// A result file (--json, --hdr-log, --plot) claimed before the run and written after it.

#include <string>
#include <string_view>

namespace ringrpc::load {

/// "-" means standard output. Any other path gets a temporary file beside it at once, so that
/// an unwritable place fails before a long run rather than after it; commit() renames it over
/// the path, so a run that fails leaves no file (and no truncated old one) behind.
class output_file {
 public:
  /// Throws std::runtime_error "cannot write PATH: REASON".
  explicit output_file(std::string path);
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;
  ~output_file();

  bool is_stdout() const noexcept { return _path == "-"; }
  const std::string& path() const noexcept { return _path; }
  /// Writes `text` and puts the file in place. Throws std::runtime_error.
  void commit(std::string_view text);

 private:
  std::string _path;
  std::string _temp;
  int _fd = -1;
};

}  // namespace ringrpc::load
