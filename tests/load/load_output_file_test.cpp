// Result files are claimed before a run and appear only when written whole.

#include "output_file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace {

namespace fs = std::filesystem;
using ringrpc::load::output_file;

fs::path scratch_dir() {
  auto dir = fs::temp_directory_path() / ("load_output_file." + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(output_file, BadPathFailsAtOnceNamingIt) {
  const auto dir = scratch_dir();
  for (const auto& bad : {dir / "no-such-dir" / "x.json", dir}) {
    try {
      output_file f(bad.string());
      ADD_FAILURE() << "accepted " << bad;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(bad.string()), std::string::npos) << e.what();
    }
  }
  fs::remove_all(dir);
}

TEST(output_file, NothingLeftBehindWithoutCommitAndOldFileKept) {
  const auto dir = scratch_dir();
  const auto path = dir / "r.json";
  { std::ofstream(path) << "old"; }
  {
    output_file f(path.string());
    EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 2) << "the claim is a file";
  }
  EXPECT_EQ(read(path), "old");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1);
  {
    output_file f(path.string());
    f.commit("new");
  }
  EXPECT_EQ(read(path), "new");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1);
  EXPECT_NE(fs::status(path).permissions() & fs::perms::owner_read, fs::perms::none);
  fs::remove_all(dir);
}

TEST(output_file, DashIsStdout) {
  output_file f("-");
  EXPECT_TRUE(f.is_stdout());
}

}  // namespace
