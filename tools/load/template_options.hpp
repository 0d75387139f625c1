#pragma once
// The command line's request templates (--template, --redis-key, --data-file, placeholders in
// HTTP paths), compiled and checked before the run: a bad one is a usage error at start-up,
// never a failure on an engine thread.

#include <memory>
#include <string>
#include <vector>

#include "protocol.hpp"

namespace ringrpc::load {

/// The template options as given.
struct template_args {
  std::string payload;    ///< --template TEXT, or @FILE
  std::string redis_key;  ///< --redis-key TEXT
  std::string data_file;  ///< --data-file FILE, the lines of {line}
};

/// Compiles and checks what `a` gives for a target of scheme `scheme` (after parse_target: "http"
/// for https too). Throws std::invalid_argument naming the option and what is wrong.
std::shared_ptr<request_templates> make_request_templates(const template_args& a, const std::string& scheme);

/// Checks the placeholders of the paths of `kinds` (HTTP, h2c: the URL's and --mix's): each
/// compiles, {line} has lines without spaces, and a --data-file given (`a`) has a {line} to
/// use it; and that some request of `kinds` sends each template given (a body, a redis key or
/// value). Throws std::invalid_argument.
void check_path_templates(const template_args& a, const std::vector<request_kind>& kinds,
                          const request_templates& templates, const std::string& scheme);

/// Whether any template of the run draws random numbers (then --seed applies).
bool uses_random(const std::vector<request_kind>& kinds, const request_templates& templates);

}  // namespace ringrpc::load
