// ringrpc-gen: typed ringrpc stubs and server bases from a FlatBuffers schema's rpc_services.
//
//   ringrpc-gen [-I DIR]... [-o DIR] [--flatc PATH | --bfbs FILE] SCHEMA.fbs
//
// Writes DIR/NAME_ringrpc.hpp and, unless --bfbs names an existing binary schema, runs flatc
// for DIR/NAME_generated.h and DIR/NAME.bfbs. Exit status: 0 written, 1 the schema was
// refused (parse error, unknown streaming kind, id collision, unusable name) or flatc failed,
// 2 bad usage. docs/services.md has the details.

#include <spawn.h>
#include <sys/wait.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <flatbuffers/idl.h>
#include <flatbuffers/util.h>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "cli_conventions.hpp"
#include "codegen.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;

struct gen_failure {
  std::string message;
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw gen_failure{"cannot read " + p.string()};
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Written next to the target and renamed over it, so an interrupted run never leaves a
// truncated header that a later build would take for a good one.
void write_file(const fs::path& p, const std::string& text) {
  const fs::path tmp = p.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) throw gen_failure{"cannot write " + tmp.string()};
  }
  std::error_code ec;
  fs::rename(tmp, p, ec);
  if (ec) throw gen_failure{"cannot write " + p.string() + ": " + ec.message()};
}

void run(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ);
  if (rc != 0) throw gen_failure{"cannot run " + argv[0] + ": " + std::strerror(rc)};
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw gen_failure{"waiting for " + argv[0] + ": " + std::strerror(errno)};
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string cmd;
    for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    throw gen_failure{"flatc failed (" +
                      (WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                         : "killed by signal " + std::to_string(WTERMSIG(status))) +
                      "): " + cmd};
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ringrpc-gen: typed ringrpc client stubs and server bases from a FlatBuffers schema.\n"
               "  ringrpc-gen [-I DIR]... [-o DIR] SCHEMA.fbs   writes DIR/NAME_ringrpc.hpp, and runs flatc\n"
               "                                               for DIR/NAME_generated.h and DIR/NAME.bfbs"};
  app.footer(std::string("Exit status:\n"
                         "  0 the files were written (or --help, --version)\n"
                         "  1 the schema has an error, flatc failed, or a file could not be read or written\n  ")
                 .append(ringrpc::tools::usage_exit_line));
  ringrpc::tools::set_name_and_version(app, "ringrpc-gen");
  std::string schema, out_dir = ".", flatc = "flatc", bfbs_path, depfile;
  std::vector<std::string> includes, flatc_args;
  app.add_option("schema", schema, "the .fbs file")->required()->type_name("SCHEMA.fbs");
  app.add_option("-o,--output-dir", out_dir, "directory for the generated files")->capture_default_str()->type_name("DIR");
  app.add_option("-I,--include", includes, "search path for the schema's include statements (repeatable)")
      ->allow_extra_args(false)
      ->type_name("DIR");
  app.add_option("--flatc", flatc, "the flatc to run")->capture_default_str()->type_name("PATH");
  app.add_option("--flatc-arg", flatc_args, "extra argument for flatc, e.g. --gen-object-api (repeatable)")
      ->allow_extra_args(false)
      ->type_name("ARG");
  app.add_option("--bfbs", bfbs_path, "embed this binary schema (flatc --binary --schema) and do not run flatc")
      ->type_name("FILE");
  app.add_option("--depfile", depfile, "also write a Makefile dependency file listing the schemas read")
      ->type_name("FILE");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return ringrpc::tools::parse_error_exit(app, e);
  }

  try {
    const fs::path schema_path(schema);
    const std::string base = schema_path.stem().string();
    const fs::path out(out_dir);

    // Parse as flatc would: the schema's own directory first, then -I.
    const std::string source = read_file(schema_path);
    std::vector<std::string> search = {schema_path.parent_path().empty() ? std::string(".")
                                                                          : schema_path.parent_path().string()};
    search.insert(search.end(), includes.begin(), includes.end());
    std::vector<const char*> search_c;
    for (const auto& s : search) search_c.push_back(s.c_str());
    search_c.push_back(nullptr);
    flatbuffers::Parser parser;
    if (!parser.Parse(source.c_str(), search_c.data(), schema.c_str())) {
      throw gen_failure{parser.error_};  // already "FILE(LINE, COL): error: ..."
    }
    const auto services = ringrpc::gen::collect_services(parser, schema);

    if (bfbs_path.empty()) {
      std::vector<std::string> cmd = {flatc,      "--cpp",          "--binary", "--schema", "--bfbs-comments",
                                      // The `streaming` attribute is a built-in one: without this flag
                                      // the binary schema, hence reflection, would not carry the kinds.
                                      "--bfbs-builtins", "-o",      out.string()};
      for (const auto& i : includes) {
        cmd.push_back("-I");
        cmd.push_back(i);
      }
      cmd.insert(cmd.end(), flatc_args.begin(), flatc_args.end());
      cmd.push_back(schema);
      run(cmd);
      bfbs_path = (out / (base + ".bfbs")).string();
    }
    const std::string bfbs_text = read_file(bfbs_path);
    // The embedded copy is what counts; this one only needs the alignment of its scalars.
    std::vector<std::uint64_t> aligned((bfbs_text.size() + 7) / 8);
    std::memcpy(aligned.data(), bfbs_text.data(), bfbs_text.size());
    const std::span<const std::uint8_t> bfbs(reinterpret_cast<const std::uint8_t*>(aligned.data()), bfbs_text.size());
    ringrpc::gen::check_bfbs_matches(bfbs, parser);

    ringrpc::gen::header_input in;
    in.schema_name = schema_path.filename().string();
    in.flatc_header = base + "_generated.h";
    in.services = services;
    in.bfbs = bfbs;
    in.alignment = ringrpc::gen::max_alignment(parser);
    const fs::path header = out / (base + "_ringrpc.hpp");
    write_file(header, ringrpc::gen::generate_header(in));

    if (!depfile.empty()) {
      std::string deps = header.string() + ":";
      for (const auto& f : parser.GetIncludedFilesRecursive(schema)) deps += " " + f;
      write_file(depfile, deps + "\n");
    }
    return 0;
  } catch (const ringrpc::gen::schema_error& e) {
    // One line per problem, each naming the schema, as compilers do.
    std::string text = e.what();
    std::size_t start = 0;
    while (start < text.size()) {
      const auto end = text.find('\n', start);
      std::fprintf(stderr, "ringrpc-gen: %s: %s\n", schema.c_str(), text.substr(start, end - start).c_str());
      if (end == std::string::npos) break;
      start = end + 1;
    }
    return 1;
  } catch (const gen_failure& e) {
    std::fprintf(stderr, "ringrpc-gen: %s\n", e.message.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringrpc-gen: %s\n", e.what());
    return 1;
  }
}
