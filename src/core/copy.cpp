// LocalBox::copy_in and LocalBox::copy_out (boxlite/copy.hpp): the host end of a copy. The box
// end is the agent's "copy-in"/"copy-out" builtin (src/guest/copy.cpp); both ends
// use image/copy_archive.hpp.
#include <fcntl.h>
#include <linux/capability.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string_view>

#include "common/confine.hpp"
#include "common/error.hpp"
#include "common/fd.hpp"
#include "common/io.hpp"
#include "common/process.hpp"
#include "core/box.hpp"
#include "image/copy_archive.hpp"
#include "image/libarchive.hpp"
#include "protocol/frame.hpp"

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

// The builtin's own failure: exit status kBuiltinFailed with the error encoded on
// stderr (protocol/frame.hpp), or whatever else ended it.
Error builtin_error(const BuiltinOutcome& o, const std::string& context) {
  int code = o.result.exit_code;
  if (code < 0)
    return Error(ErrorKind::Execution, context + ": the copy was killed by signal " + std::to_string(-code));
  if (code == protocol::kBuiltinFailed) return with_context(decode_error(o.stderr_text, "the box"), context);
  std::string msg = trim(o.stderr_text);
  return Error(ErrorKind::Execution,
               context + ": failed with exit code " + std::to_string(code) + (msg.empty() ? "" : ": " + msg));
}

// Box paths are taken from the box's "/" (docker cp does the same).
std::string box_path_of(const std::string& p, const char* what) {
  if (p.empty()) throw Error(ErrorKind::InvalidArgument, std::string(what) + ": the box path is empty");
  return p[0] == '/' ? p : "/" + p;
}

std::string host_path_of(const std::string& p, const char* what) {
  if (p.empty()) throw Error(ErrorKind::InvalidArgument, std::string(what) + ": the host path is empty");
  if (p[0] == '/') return p;
  char cwd[4096];
  if (!::getcwd(cwd, sizeof cwd)) throw_errno(ErrorKind::Storage, std::string(what) + ": getcwd");
  return std::string(cwd) + "/" + p;
}

struct ArchiveReadDeleter {
  void operator()(archive* a) const { la::archive_read_free(a); }
};

// The host directory a copy_out writes beneath: DST when it is an existing
// directory, else its parent, where DST is made or replaced. "" when neither exists:
// the extraction then reports the missing parent, and may write nowhere.
std::string writable_root_for(const std::string& dst) {
  struct stat st {};
  if (::stat(dst.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return dst;
  std::string d = dst;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  auto slash = d.rfind('/');
  std::string parent = slash == 0 ? "/" : d.substr(0, slash);
  return ::stat(parent.c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? parent : "";
}

// The extraction's report: its error, encoded (encode_error). Nothing on success.
void report_error(int fd, const Error& e) noexcept {
  try {
    std::string msg = encode_error(e);
    write_all(fd, msg.data(), msg.size());
  } catch (...) {
    // The caller then reports the child's exit status instead.
  }
}

std::optional<Error> error_from_report(const std::string& report) {
  if (report.empty()) return std::nullopt;
  return decode_error(report, "copy_out's extraction");
}

// The child that parses the box's tar stream (a box is hostile; the caller may be
// root): it confines itself first (common/confine.hpp), so that what a crafted
// stream could make of libarchive or of the placement code reaches only the
// destination. Every mount read-only but the destination's (root), no capability
// but what placing files needs, Landlock, no_new_privs.
[[noreturn]] void extract_confined(int data_fd, int report_fd, const std::string& dst, const std::string& writable,
                                   const image::CopyExtractOptions& xo) {
  try {
    const std::string who = "copy_out's extraction";
    confine::no_new_privs(who);
    confine::readonly_mounts_except(writable, who);
    confine::keep_only_capabilities({CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_FSETID}, who);
    confine::restrict_writes_beneath(writable, confine::landlock_abi(), who);
    std::unique_ptr<archive, ArchiveReadDeleter> reader(la::archive_read_new());
    if (!reader) throw Error(ErrorKind::Internal, "libarchive: out of memory");
    la::archive_read_support_format_tar(reader.get());
    la::archive_read_support_format_empty(reader.get());
    if (la::archive_read_open_fd(reader.get(), data_fd, 64 * 1024) != ARCHIVE_OK) {
      const char* msg = la::archive_error_string(reader.get());
      throw Error(ErrorKind::Storage,
                  std::string("read the copy archive: ") + (msg ? msg : "unknown libarchive error"));
    }
    image::extract_copy_archive(reader.get(), dst, xo);
    ::_exit(0);
  } catch (const Error& e) {
    report_error(report_fd, e);
  } catch (...) {
    report_error(report_fd, Error(ErrorKind::Internal, "the extraction failed"));
  }
  ::_exit(1);
}

// One piece of the stream to the extraction. False once it has stopped reading
// (done, or failed: its exit says which).
bool send_to_extraction(int fd, std::string_view piece) {
  while (!piece.empty()) {
    ssize_t n = ::send(fd, piece.data(), piece.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) return false;
    if (n < 0) throw_errno(ErrorKind::Internal, "send the copy archive to its extraction");
    piece.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Runs the extraction of the builtin's stdout into `dst` in a confined child
// (extract_confined), feeding it the stream; the builtin's stderr is kept in
// `stderr_text`. Returns what went wrong: the stream's own failure first (it
// explains a torn archive best), else the extraction's.
std::optional<Error> unpack_in_confined_child(Execution& e, const std::string& dst, const image::CopyExtractOptions& xo,
                                              const std::string& context, std::string& stderr_text) {
  std::string writable = writable_root_for(dst);
  // libarchive bound before the fork: a child of a threaded process must not dlopen.
  la::archive_read_free(la::archive_read_new());
  int sv[2], rp[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw_errno(ErrorKind::Internal, context + ": socketpair");
  UniqueFd data(sv[0]), data_child(sv[1]);
  if (::pipe2(rp, O_CLOEXEC) != 0) throw_errno(ErrorKind::Internal, context + ": pipe");
  UniqueFd report(rp[0]), report_child(rp[1]);
  pid_t pid = ::fork();
  if (pid < 0) throw_errno(ErrorKind::Internal, context + ": fork the extraction");
  if (pid == 0) {
    data.reset();  // else the archive never ends: its other end would stay open here
    report.reset();
    extract_confined(data_child.get(), report_child.get(), dst, writable, xo);
  }
  Child extraction(pid);  // killed if anything below throws
  data_child.reset();
  report_child.reset();

  std::optional<Error> failure;
  try {
    while (auto chunk = e.next_output()) {
      if (chunk->stream == StreamKind::Stderr) {
        if (stderr_text.size() < kMaxErrorText) stderr_text += chunk->data;
        continue;
      }
      if (!send_to_extraction(data.get(), chunk->data)) break;
    }
  } catch (const Error& err) {
    failure = err;
  }
  data.reset();  // the end of the archive, for the extraction
  if (failure) extraction.kill_now();
  int status = extraction.wait();
  if (failure) return failure;
  failure =
      error_from_report(read_up_to(report.get(), kMaxErrorText, "copy_out's extraction report", ErrorKind::Internal));
  if (!failure && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    return Error(ErrorKind::Internal, "the extraction of the archive ended without a word: " + describe_status(status));
  }
  return failure;
}

}  // namespace

void LocalBox::copy_in(const std::string& host_path, const std::string& box_path, const CopyOptions& opts) {
  std::string src = host_path_of(host_path, "copy_in");
  std::string dst = box_path_of(box_path, "copy_in");
  std::string context = "box " + id() + ": copy_in " + host_path + " -> " + dst;
  bool contents = !opts.include_parent || image::copy_wants_contents(host_path);
  // The source is checked before the box is involved: a missing one costs no exec.
  struct stat st;
  // (Other failures are the archive writer's to report precisely.)
  if ((opts.follow_symlinks ? ::stat(src.c_str(), &st) : ::lstat(src.c_str(), &st)) != 0 && errno == ENOENT) {
    throw Error(ErrorKind::NotFound, context + ": no such file or directory on the host: " + host_path);
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
      throw Error(err.kind(), context + ": " + err.what());
    }
  }
  BuiltinOutcome o = finish(e);
  if (o.result.exit_code != 0) throw builtin_error(o, context);
  if (box_gone) throw Error(ErrorKind::Internal, context + ": the box stopped reading the copy but reported success");
}

void LocalBox::copy_out(const std::string& box_path, const std::string& host_path, const CopyOptions& opts) {
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
  std::string stderr_text;
  std::optional<Error> failure = unpack_in_confined_child(e, dst, xo, context, stderr_text);
  // On a failure here the builtin may still be writing: it has nowhere to go.
  if (failure) e.kill();
  BuiltinOutcome o = finish(e, std::move(stderr_text));
  // The builtin's error (a missing path, ...) explains a broken stream best; our
  // kill shows as a signal and leaves our own error to report.
  if (o.result.exit_code > 0) throw builtin_error(o, context);
  if (failure) throw Error(failure->kind(), context + ": " + failure->what());
  if (o.result.exit_code != 0) throw builtin_error(o, context);
}

}  // namespace boxlite
