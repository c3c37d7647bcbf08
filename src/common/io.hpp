// Small I/O helpers shared by host and guest code. All throw boxlite::Error with
// the path or fd they worked on.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "common/fd.hpp"

namespace boxlite {

std::string read_file(const std::string& path);
// read_file, or nullopt when there is no such file: for files that are often
// absent, which should not cost a throw (the first throw in a static binary sorts
// all of its unwind tables, milliseconds).
std::optional<std::string> read_file_if_present(const std::string& path);
// Writes to path.tmp, fsyncs, renames: readers see the old or the new file, never half.
void write_file_atomic(const std::string& path, std::string_view data, mode_t mode = 0644, bool durable = true);
void write_all(int fd, const void* data, size_t len);
// write_all for a socket: a peer that has gone is an error, never SIGPIPE (which
// would kill whatever process embeds us).
void send_all(int fd, const void* data, size_t len);
// Reads exactly len bytes; false on EOF before the first byte, throws on short read.
bool read_exact(int fd, void* data, size_t len);
// Reads until `max` bytes or EOF, whichever comes first (a file that shrank while
// read gives what there was). Throws `code` on a read error, naming `what`.
std::string read_up_to(int fd, size_t max, const std::string& what, ErrorKind code = ErrorKind::Storage);
// One message of `len` bytes carrying up to kMaxPassedFds descriptors
// (SCM_RIGHTS). Neither allocates nor throws, so a child that shares its parent's
// memory until its exec may use them. send_with_fds returns sendmsg's result;
// recv_with_fds the bytes received, with the descriptors (close-on-exec) in
// fds[0..*nfds), or -1 with errno: EMSGSIZE for a message cut short (whatever
// descriptors came with it are closed), 0 at EOF.
inline constexpr size_t kMaxPassedFds = 16;
ssize_t send_with_fds(int sock, const void* data, size_t len, const int* fds, size_t nfds) noexcept;
ssize_t recv_with_fds(int sock, void* data, size_t len, int* fds, size_t max_fds, size_t* nfds) noexcept;
// Closes every descriptor from `first` up: close_range(2), or, where that is missing
// (Linux < 5.9) or refused (a seccomp profile), each one /proc/self/fd lists, or
// failing that every number below the descriptor limit. A child that will not exec
// must close them itself: close-on-exec closes nothing. Allocates nothing and makes
// only system calls, so a vfork-style child (sharing its parent's memory) may call
// it. False if a descriptor may be left open.
bool close_descriptors_from(int first) noexcept;
void set_nonblocking(int fd, bool on = true);
// Lets a stream socket hold `bytes` unsent (SO_SNDBUFFORCE when privileged, else up
// to net.core.wmem_max). Best effort: the default only means more, smaller writes.
void set_send_buffer(int fd, int bytes);
void set_cloexec(int fd, bool on = true);
// mkdir -p.
void make_dirs(const std::string& path, mode_t mode = 0755);
// Asks the file system to spread the directories made in `path` over the whole disk
// rather than pack them beside it (FS_TOPDIR_FL: ext4's allocator then places each one
// as it places a directory of the root). A hint: where it is unsupported or refused,
// nothing changes. See docs/jail.md for why box directories want it.
void spread_subdirectories(const std::string& path) noexcept;
void remove_tree(const std::string& path);
// Removes everything inside the directory `path` (not following symlinks), keeping
// the directory itself. False if anything is left (or `path` is not a directory).
bool empty_directory(const std::string& path) noexcept;
bool path_exists(const std::string& path);
std::vector<std::string> split(std::string_view s, char sep);
// The bytes a tree takes on disk (st_blocks), never following a symlink nor entering
// another file system; what cannot be read counts nothing.
uint64_t disk_usage(const std::string& path);
std::string trim(std::string_view s);
// Unix socket helpers; paths longer than sun_path fail with a clear error.
UniqueFd unix_listen(const std::string& path, int backlog = 64);
UniqueFd unix_connect(const std::string& path);
// The pid of the process listening on `path` (SO_PEERCRED: who called listen), or 0
// if none does (no socket, nobody listening, a full backlog, a path too long). The
// listener sees a client that hangs up at once.
pid_t unix_listener_pid(const std::string& path);
std::string hex_encode(const unsigned char* data, size_t len);
std::string random_hex(size_t bytes);
// Monotonic milliseconds.
double now_ms();
// Milliseconds since the Unix epoch (what records store as times).
int64_t wall_clock_ms();

}  // namespace boxlite
