// Fuzz target for the layer unpacker (image::apply_layer): whatever the tar, the
// unpack either succeeds or throws boxlite::Error, and nothing outside the root
// changes. Built two ways:
//  - with -DBOXLITE_LIBFUZZER (clang -fsanitize=fuzzer): LLVMFuzzerTestOneInput
//    over raw bytes (tests/fuzz/CMakeLists.txt, scripts/fuzz; seeds in corpus/unpack);
//  - otherwise a standalone driver (ctest "unpack_fuzz"): runs the files named on
//    the command line, or `--iterations N [--seed S]` layers generated from a
//    grammar of hostile entries (escaping paths, symlink and hardlink tricks,
//    whiteouts, devices, setuid, sparse sizes) with random byte damage on top.
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "common/io.hpp"
#include "image/unpack.hpp"

namespace {

using boxlite::Error;

// No fsync: thousands of runs on a scratch directory.
void write_plain(const std::string& path, std::string_view data) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(data.data(), 1, data.size(), f) != data.size()) std::abort();
  std::fclose(f);
}

struct Sandbox {
  std::string dir, root, outside, layer;
  Sandbox() {
    char tmpl[] = "/tmp/blfuzz-XXXXXX";
    if (!::mkdtemp(tmpl)) std::abort();
    dir = tmpl;
    root = dir + "/root";
    outside = dir + "/outside";
    layer = dir + "/layer.tar";
  }
  ~Sandbox() {
    try {
      boxlite::remove_tree(dir);
    } catch (const Error&) {
    }
  }
  void reset() {
    boxlite::remove_tree(root);
    boxlite::remove_tree(outside);
    boxlite::make_dirs(root);
    boxlite::make_dirs(outside);
    write_plain(outside + "/sentinel", "untouched");
  }
};

std::vector<std::string> entries(const std::string& d) {
  std::vector<std::string> out;
  if (DIR* h = ::opendir(d.c_str())) {
    while (auto* e = ::readdir(h)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") out.push_back(n);
    }
    ::closedir(h);
  }
  return out;
}

// The invariants: the sandbox holds only root, outside and the layer; outside
// holds only its sentinel, unchanged; the root holds no device node.
void check(const Sandbox& s) {
  auto top = entries(s.dir);
  auto out = entries(s.outside);
  bool ok = top.size() == 3 && out.size() == 1 && out[0] == "sentinel" &&
            boxlite::read_file(s.outside + "/sentinel") == "untouched";
  if (!ok) {
    std::fprintf(stderr, "unpack_fuzz: a layer wrote outside its root (sandbox %s)\n", s.dir.c_str());
    std::abort();
  }
  std::vector<std::string> stack = {s.root};
  while (!stack.empty()) {
    std::string d = stack.back();
    stack.pop_back();
    for (const auto& n : entries(d)) {
      struct stat st;
      std::string p = d + "/" + n;
      if (::lstat(p.c_str(), &st) != 0) continue;
      if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
        std::fprintf(stderr, "unpack_fuzz: device node %s created\n", p.c_str());
        std::abort();
      }
      if (S_ISDIR(st.st_mode)) stack.push_back(p);
    }
  }
}

void run_one(Sandbox& s, const uint8_t* data, size_t size) {
  s.reset();
  write_plain(s.layer, std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    // Twice: the second layer lands on the first one's tree (whiteouts, replacements).
    boxlite::image::apply_layer(s.root, s.layer, 64u << 20);
    boxlite::image::apply_layer(s.root, s.layer, 64u << 20);
  } catch (const Error&) {
    // Refusing is fine; escaping or crashing is not.
  }
  check(s);
}

#ifndef BOXLITE_LIBFUZZER
// ---- the grammar of hostile layers (the standalone driver's) ----

const char* kPaths[] = {"a",
                        "a/b",
                        "../a",
                        "../../outside/sentinel",
                        "/etc/passwd",
                        "/../outside/x",
                        "a/../../outside/y",
                        "l",
                        "l/x",
                        "l/../z",
                        "d",
                        "d/.wh..wh..opq",
                        ".wh.a",
                        "a/.wh.b",
                        "d/e/f",
                        "./a",
                        "a//b",
                        "",
                        "link2/sentinel",
                        "dev",
                        "s",
                        "h",
                        "x/../../../outside/sentinel"};
const char* kTargets[] = {"/",    "..",      "../..", "../../outside",       "/outside", "a", "l",
                          "/etc", "d/../..", "link2", "../outside/sentinel", "h",        "s"};

std::string generate(std::mt19937& rng) {
  std::string buf;
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  if (rng() % 2) archive_write_add_filter_gzip(a);
  archive_write_open(
      a, &buf, nullptr,
      [](archive*, void* user, const void* data, size_t n) -> la_ssize_t {
        static_cast<std::string*>(user)->append(static_cast<const char*>(data), n);
        return static_cast<la_ssize_t>(n);
      },
      nullptr);
  int n = 1 + static_cast<int>(rng() % 12);
  for (int i = 0; i < n; ++i) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, kPaths[rng() % std::size(kPaths)]);
    unsigned kind = rng() % 7;
    archive_entry_set_perm(e, (rng() % 2 ? 04000 : 0) | (rng() % 2 ? 02000 : 0) | 0755);
    archive_entry_set_uid(e, rng() % 3 == 0 ? 0 : rng() % 70000);
    std::string data;
    switch (kind) {
      case 0: archive_entry_set_filetype(e, AE_IFDIR); break;
      case 1:
        archive_entry_set_filetype(e, AE_IFLNK);
        archive_entry_set_symlink(e, kTargets[rng() % std::size(kTargets)]);
        break;
      case 2:
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_hardlink(e, kPaths[rng() % std::size(kPaths)]);
        break;
      case 3:
        archive_entry_set_filetype(e, rng() % 2 ? AE_IFCHR : AE_IFIFO);
        archive_entry_set_rdevmajor(e, 1);
        archive_entry_set_rdevminor(e, 3);
        break;
      case 4:  // sparse: a declared size far over the data
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_size(e, int64_t{1} << (20 + rng() % 20));
        archive_entry_sparse_add_entry(e, 0, 512);
        data.assign(512, 's');
        break;
      default:
        archive_entry_set_filetype(e, AE_IFREG);
        data.assign(rng() % 64, 'f');
        archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
    }
    archive_write_header(a, e);
    if (!data.empty()) archive_write_data(a, data.data(), data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  // Byte damage: flips, and sometimes a truncation.
  int flips = static_cast<int>(rng() % 4);
  for (int i = 0; i < flips && !buf.empty(); ++i) buf[rng() % buf.size()] ^= static_cast<char>(1 + rng() % 255);
  if (rng() % 8 == 0 && !buf.empty()) buf.resize(rng() % buf.size());
  return buf;
}
#endif

}  // namespace

#ifdef BOXLITE_LIBFUZZER
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Sandbox s;  // one per process, reused; removed at exit
  run_one(s, data, size);
  return 0;
}
#else
int main(int argc, char** argv) {
  long iterations = 0;
  unsigned seed = 1;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--iterations" && i + 1 < argc) {
      iterations = std::atol(argv[++i]);
    } else if (a == "--seed" && i + 1 < argc) {
      seed = static_cast<unsigned>(std::atol(argv[++i]));
    } else {
      files.push_back(a);
    }
  }
  Sandbox s;
  for (const auto& f : files) {
    std::string d = boxlite::read_file(f);
    run_one(s, reinterpret_cast<const uint8_t*>(d.data()), d.size());
  }
  std::mt19937 rng(seed);
  for (long i = 0; i < iterations; ++i) {
    std::string d = generate(rng);
    run_one(s, reinterpret_cast<const uint8_t*>(d.data()), d.size());
  }
  std::printf("unpack_fuzz: %zu files and %ld generated layers, no escape\n", files.size(), iterations);
  return 0;
}
#endif
