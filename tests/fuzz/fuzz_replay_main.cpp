// For builds without libFuzzer (the ASan+UBSan test build): runs a target's
// LLVMFuzzerTestOneInput over every file of the corpus directories (or files)
// given, so each seed and each regression input runs with the other tests.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

int run_one(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", file.c_str());
    return 1;
  }
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                         bytes.size());
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  int inputs = 0;
  int failures = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg = argv[i];
    std::error_code ec;
    if (!std::filesystem::is_directory(arg, ec)) {
      failures += run_one(arg);
      ++inputs;
      continue;
    }
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(arg))
      if (entry.is_regular_file())
        files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      failures += run_one(file);
      ++inputs;
    }
  }
  std::printf("%d inputs run\n", inputs);
  if (inputs == 0) {
    std::fprintf(stderr, "no inputs: give corpus directories or files\n");
    return 1;
  }
  return failures == 0 ? 0 : 1;
}
