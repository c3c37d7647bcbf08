#include "guest/copy.hpp"
#include "protocol/frame.hpp"

#include <archive.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "common/error.hpp"
#include "common/io.hpp"
#include "image/copy_archive.hpp"

namespace boxlite::guest {
namespace {

constexpr size_t kReadBlock = 1u << 20;

bool flag(const std::string& v) { return v == "1"; }

void expect_args(const std::string& name, const std::vector<std::string>& args, size_t n) {
  if (args.size() != n) {
    throw Error(ErrorKind::InvalidArgument,
                "builtin " + name + " takes " + std::to_string(n) + " arguments, got " + std::to_string(args.size()));
  }
}

void copy_out(const std::vector<std::string>& args) {
  expect_args("copy-out", args, 2);
  image::CopyWriteOptions o;
  o.follow_symlinks = flag(args[1]);
  image::write_copy_archive(args[0], o, [](std::string_view piece) { write_all(1, piece.data(), piece.size()); });
}

struct ArchiveReadDeleter {
  void operator()(archive* a) const { archive_read_free(a); }
};

void copy_in(const std::vector<std::string>& args) {
  expect_args("copy-in", args, 3);
  image::CopyExtractOptions o;
  o.include_parent = flag(args[1]);
  o.overwrite = flag(args[2]);
  std::unique_ptr<archive, ArchiveReadDeleter> reader(archive_read_new());
  if (!reader) throw Error(ErrorKind::Internal, "libarchive: out of memory");
  // Plain tar only: the host writes it (image/copy_archive.cpp), uncompressed.
  archive_read_support_format_tar(reader.get());
  archive_read_support_format_empty(reader.get());
  if (archive_read_open_fd(reader.get(), 0, kReadBlock) != ARCHIVE_OK) {
    const char* msg = archive_error_string(reader.get());
    throw Error(ErrorKind::Storage, std::string("read the copy archive: ") + (msg ? msg : "unknown libarchive error"));
  }
  image::extract_copy_archive(reader.get(), args[0], o);
  // Read the stream to its end (the archive's trailing blocks): exiting first would
  // make the host's last writes fail as if the copy had.
  std::string buf(kReadBlock, '\0');
  while (::read(0, buf.data(), buf.size()) > 0) {
  }
}

}  // namespace

bool is_builtin(const std::string& name) { return name == "copy-out" || name == "copy-in" || name == "sync"; }

int run_builtin(const std::string& name, const std::vector<std::string>& args) {
  // Named for ps inside the box: the agent's own name would mislead.
  ::prctl(PR_SET_NAME, ("boxlite-" + name).c_str());
  try {
    if (name == "copy-out") {
      copy_out(args);
    } else if (name == "copy-in") {
      copy_in(args);
    } else if (name == "sync") {
      // Before the host freezes the disk of a running box (snapshot, clone,
      // export): what the box wrote reaches the disk first.
      ::sync();
    } else {
      throw Error(ErrorKind::InvalidArgument, "unknown builtin '" + name + "'");
    }
    return 0;
  } catch (const Error& e) {
    std::string report = encode_error(e);
    std::fwrite(report.data(), 1, report.size(), stderr);
    return protocol::kBuiltinFailed;
  } catch (const std::exception& e) {
    std::string report = encode_error(Error(ErrorKind::Internal, e.what()));
    std::fwrite(report.data(), 1, report.size(), stderr);
    return protocol::kBuiltinFailed;
  }
}

}  // namespace boxlite::guest
