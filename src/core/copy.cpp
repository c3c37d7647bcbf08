// Box::copy_in and Box::copy_out (core/copy.hpp): the host end of a copy. The box
// end is the agent's "copy-in"/"copy-out" builtin (src/guest/copy.cpp); both ends
// use image/copy_archive.hpp.
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <optional>

#include "common/error.hpp"
#include "common/io.hpp"
#include "core/box.hpp"
#include "image/copy_archive.hpp"
#include "image/libarchive.hpp"

namespace boxlite {
namespace {

// What a builtin says on stderr is its error message; more is never needed.
constexpr size_t kMaxErrorText = 64u << 10;

struct BuiltinOutcome {
  ExecResult result;
  std::string stderr_text;
};

// Reads what is left of the exec (stdout discarded) and its exit.
BuiltinOutcome finish(Execution& e, std::string stderr_text = {}) {
  while (auto chunk = e.next_output()) {
    if (chunk->stream == StreamKind::Stderr && stderr_text.size() < kMaxErrorText) stderr_text += chunk->data;
  }
  return {e.wait(), std::move(stderr_text)};
}

// The builtin's own failure: its exit status is the ErrorCode, stderr the message.
Error builtin_error(const BuiltinOutcome& o, const std::string& context) {
  int code = o.result.exit_code;
  std::string msg = trim(o.stderr_text);
  if (code < 0)
    return Error(ErrorCode::Execution, context + ": the copy was killed by signal " + std::to_string(-code));
  if (code > 0 && code <= static_cast<int>(ErrorCode::SessionReaped)) {
    return Error(static_cast<ErrorCode>(code), context + ": " + (msg.empty() ? "failed" : msg));
  }
  return Error(ErrorCode::Execution,
               context + ": failed with exit code " + std::to_string(code) + (msg.empty() ? "" : ": " + msg));
}

// Box paths are taken from the box's "/" (docker cp does the same).
std::string box_path_of(const std::string& p, const char* what) {
  if (p.empty()) throw Error(ErrorCode::InvalidArgument, std::string(what) + ": the box path is empty");
  return p[0] == '/' ? p : "/" + p;
}

std::string host_path_of(const std::string& p, const char* what) {
  if (p.empty()) throw Error(ErrorCode::InvalidArgument, std::string(what) + ": the host path is empty");
  if (p[0] == '/') return p;
  char cwd[4096];
  if (!::getcwd(cwd, sizeof cwd)) throw_errno(ErrorCode::Storage, std::string(what) + ": getcwd");
  return std::string(cwd) + "/" + p;
}

struct ArchiveReadDeleter {
  void operator()(archive* a) const { la::archive_read_free(a); }
};

// Feeds the builtin's stdout to libarchive; stderr is kept for the error message.
struct StdoutSource {
  Execution* exec;
  std::string chunk;
  std::string stderr_text;
  std::optional<Error> error;

  static la_ssize_t read(archive*, void* self, const void** buf) {
    auto* s = static_cast<StdoutSource*>(self);
    try {
      while (auto c = s->exec->next_output()) {
        if (c->stream == StreamKind::Stderr) {
          if (s->stderr_text.size() < kMaxErrorText) s->stderr_text += c->data;
          continue;
        }
        s->chunk = std::move(c->data);
        *buf = s->chunk.data();
        return static_cast<la_ssize_t>(s->chunk.size());
      }
    } catch (const Error& e) {
      s->error = e;  // no exception may cross libarchive's C frames
      return -1;
    }
    return 0;
  }
};

}  // namespace

void Box::copy_in(const std::string& host_path, const std::string& box_path, const CopyOptions& opts) {
  std::string src = host_path_of(host_path, "copy_in");
  std::string dst = box_path_of(box_path, "copy_in");
  std::string context = "box " + id() + ": copy_in " + host_path + " -> " + dst;
  bool contents = !opts.include_parent || image::copy_wants_contents(host_path);
  // The source is checked before the box is involved: a missing one costs no exec.
  struct stat st;
  // (Other failures are the archive writer's to report precisely.)
  if ((opts.follow_symlinks ? ::stat(src.c_str(), &st) : ::lstat(src.c_str(), &st)) != 0 && errno == ENOENT) {
    throw Error(ErrorCode::NotFound, context + ": no such file or directory on the host: " + host_path);
  }
  Execution e = exec_builtin("copy-in", {dst, contents ? "0" : "1", opts.overwrite ? "1" : "0"}, /*stdin_open=*/true);
  bool box_gone = false;  // the builtin stopped reading: its own error says why
  try {
    image::CopyWriteOptions wo;
    wo.follow_symlinks = opts.follow_symlinks;
    image::write_copy_archive(src, wo, [&](std::string_view piece) {
      try {
        e.write_stdin(piece);
      } catch (const Error&) {
        box_gone = true;
        throw;
      }
    });
    e.close_stdin();
  } catch (const Error& err) {
    if (!box_gone) {
      // Reading the host side failed: stop the builtin before it places a torn tree.
      e.kill();
      try {
        finish(e);
      } catch (const Error&) {
      }
      throw Error(err.code(), context + ": " + err.what());
    }
  }
  BuiltinOutcome o = finish(e);
  if (o.result.exit_code != 0) throw builtin_error(o, context);
  if (box_gone) throw Error(ErrorCode::Internal, context + ": the box stopped reading the copy but reported success");
}

void Box::copy_out(const std::string& box_path, const std::string& host_path, const CopyOptions& opts) {
  std::string src = box_path_of(box_path, "copy_out");
  std::string dst = host_path_of(host_path, "copy_out");
  std::string context = "box " + id() + ": copy_out " + src + " -> " + host_path;
  image::CopyExtractOptions xo;
  xo.include_parent = opts.include_parent && !image::copy_wants_contents(src);
  xo.overwrite = opts.overwrite;
  // The box is untrusted, and the host side may run as root.
  xo.strip_setid = true;
  xo.expected_top = image::copy_top_name(src);  // what the builtin names it
  Execution e = exec_builtin("copy-out", {src, opts.follow_symlinks ? "1" : "0"}, /*stdin_open=*/false);
  StdoutSource source{&e, {}, {}, {}};
  std::optional<Error> failure;
  {
    std::unique_ptr<archive, ArchiveReadDeleter> reader(la::archive_read_new());
    if (!reader) throw Error(ErrorCode::Internal, context + ": libarchive: out of memory");
    la::archive_read_support_format_tar(reader.get());
    la::archive_read_support_format_empty(reader.get());
    try {
      if (la::archive_read_open(reader.get(), &source, nullptr, &StdoutSource::read, nullptr) != ARCHIVE_OK) {
        const char* msg = la::archive_error_string(reader.get());
        throw Error(ErrorCode::Storage,
                    std::string("read the copy archive: ") + (msg ? msg : "unknown libarchive error"));
      }
      image::extract_copy_archive(reader.get(), dst, xo);
    } catch (const Error& err) {
      failure = source.error ? *source.error : err;
    }
  }
  // On a failure here the builtin may still be writing: it has nowhere to go.
  if (failure) e.kill();
  BuiltinOutcome o = finish(e, std::move(source.stderr_text));
  // The builtin's error (a missing path, ...) explains a broken stream best; our
  // kill shows as a signal and leaves our own error to report.
  if (o.result.exit_code > 0) throw builtin_error(o, context);
  if (failure) throw Error(failure->code(), context + ": " + failure->what());
  if (o.result.exit_code != 0) throw builtin_error(o, context);
}

}  // namespace boxlite
