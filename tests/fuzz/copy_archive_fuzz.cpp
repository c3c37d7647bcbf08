// The tar reader of copy-in and copy-out (image::extract_copy_archive): a copy
// archive from a hostile box, placed the three ways docker cp places one (into an
// existing directory, at a new name the request expected, the contents only
// without overwriting), each in a fresh scratch tree. Checks: only the documented
// error kinds; nothing outside the destination changes; no device node, FIFO or
// setuid bit lands in it (the archive came from a box, as copy_out's does).
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/io.hpp"
#include "fuzz/fuzz_support.hpp"
#include "image/copy_archive.hpp"
#include "image/libarchive.hpp"

namespace {

using namespace boxlite;

struct Memory {
  std::string_view data;
  bool done = false;
};

la_ssize_t read_memory(archive*, void* user, const void** buf) {
  auto* m = static_cast<Memory*>(user);
  if (m->done) return 0;
  m->done = true;
  *buf = m->data.data();
  return static_cast<la_ssize_t>(m->data.size());
}

struct ReaderDeleter {
  void operator()(archive* a) const { la::archive_read_free(a); }
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

void put(const std::string& path, std::string_view data) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(data.data(), 1, data.size(), f) != data.size()) fuzz::fail("write " + path);
  std::fclose(f);
}

struct Sandbox {
  std::string dir, dest, outside;
  Sandbox() : dir(fuzz::make_scratch_dir("copy")) {
    dest = dir + "/dest";
    outside = dir + "/outside";
  }
  // dest holds a file "b" and a directory "d" to merge with or overwrite.
  void reset() {
    remove_tree(dest);
    remove_tree(outside);
    make_dirs(dest + "/d");
    make_dirs(outside);
    put(dest + "/b", "old");
    put(outside + "/sentinel", "untouched");
  }
  void check() const {
    auto top = entries(dir), out = entries(outside);
    fuzz::check(
        top.size() == 2 && out.size() == 1 && out[0] == "sentinel" && read_file(outside + "/sentinel") == "untouched",
        "a copy archive wrote outside its destination");
    std::vector<std::string> stack = {dest};
    while (!stack.empty()) {
      std::string d = stack.back();
      stack.pop_back();
      for (const auto& n : entries(d)) {
        std::string p = d + "/" + n;
        struct stat st {};
        if (::lstat(p.c_str(), &st) != 0) continue;
        fuzz::check(!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode),
                    "a copy archive made a special file");
        fuzz::check(S_ISLNK(st.st_mode) || (st.st_mode & (S_ISUID | S_ISGID)) == 0, "a setuid or setgid bit was kept");
        if (S_ISDIR(st.st_mode)) stack.push_back(p);
      }
    }
  }
};

void extract(Sandbox& s, std::string_view data, const std::string& dest, const image::CopyExtractOptions& o) {
  s.reset();
  std::unique_ptr<archive, ReaderDeleter> reader(la::archive_read_new());
  la::archive_read_support_format_tar(reader.get());
  la::archive_read_support_format_empty(reader.get());
  Memory m{data};
  try {
    if (la::archive_read_open(reader.get(), &m, nullptr, read_memory, nullptr) != ARCHIVE_OK) return;
    image::extract_copy_archive(reader.get(), dest, o);
  } catch (const Error& e) {
    fuzz::check_error(e,
                      {ErrorKind::NotFound, ErrorKind::InvalidArgument, ErrorKind::AlreadyExists, ErrorKind::Storage});
  }
  s.check();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Sandbox* s = new Sandbox();
  std::string_view tar = fuzz::as_text(data, size);
  image::CopyExtractOptions into;  // copy_out BOX:SRC DIR
  into.strip_setid = true;
  extract(*s, tar, s->dest, into);
  image::CopyExtractOptions renamed = into;  // copy_out BOX:a NEW, the box asked for "a"
  renamed.expected_top = "a";
  extract(*s, tar, s->dest + "/new", renamed);
  image::CopyExtractOptions contents = into;  // cp --no-overwrite BOX:SRC/. DIR
  contents.include_parent = false;
  contents.overwrite = false;
  extract(*s, tar, s->dest + "/", contents);
  return 0;
}
