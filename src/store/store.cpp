#include "store/store.hpp"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <mutex>
#include <string_view>
#include <system_error>

#include "common/error.hpp"
#include "common/io.hpp"
#include "common/thread.hpp"

namespace boxlite::store {
namespace {

[[noreturn]] void db_error(sqlite3* db, const std::string& what) {
  throw Error(ErrorKind::Database, what + ": " + (db ? sqlite3_errmsg(db) : "out of memory"));
}

// The connection's mutex (recursive: SQLITE_OPEN_FULLMUTEX) held across a call and
// the reading of its error: another thread using the store would otherwise reset the
// connection's error message in between.
class DbLock {
 public:
  explicit DbLock(sqlite3* db) : mu_(sqlite3_db_mutex(db)) { sqlite3_mutex_enter(mu_); }
  ~DbLock() { sqlite3_mutex_leave(mu_); }
  DbLock(const DbLock&) = delete;
  DbLock& operator=(const DbLock&) = delete;

 private:
  sqlite3_mutex* mu_;
};

// RAII prepared statement.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    DbLock lk(db);
    if (sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) != SQLITE_OK) db_error(db, std::string("prepare ") + sql);
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt& bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& bind_null_if_empty(int i, const std::string& v) {
    if (v.empty()) {
      sqlite3_bind_null(s_, i);
      return *this;
    }
    return bind(i, v);
  }
  // true: a row is ready; false: done.
  bool step() {
    DbLock lk(db_);
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    if (rc == SQLITE_CONSTRAINT) throw Error(ErrorKind::AlreadyExists, sqlite3_errmsg(db_));
    db_error(db_, "step");
  }
  std::string text(int col) {
    auto p = sqlite3_column_text(s_, col);
    return p ? reinterpret_cast<const char*>(p) : "";
  }
  int64_t integer(int col) { return sqlite3_column_int64(s_, col); }
  bool is_null(int col) { return sqlite3_column_type(s_, col) == SQLITE_NULL; }
  Stmt& bind(int i, const std::optional<int>& v) {
    if (v) return bind(i, int64_t{*v});
    sqlite3_bind_null(s_, i);
    return *this;
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
};

// Stopping is a stopping handle's own: the row says running until it is stopped.
std::string recorded_state(const BoxRecord& r) {
  return std::string(box_state_name(r.state == BoxState::Stopping ? BoxState::Running : r.state));
}

void exec_sql(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown";
    sqlite3_free(err);
    throw Error(ErrorKind::Database, std::string("database: ") + msg);
  }
}

constexpr const char* kColumns =
    "id, name, image, engine, state, stop_reason, created_at_ms, started_at_ms, stopped_at_ms, shim_pid, auto_remove, "
    "detach, options_json, main_exit_code, timings_json";

// The database's text, checked: a row another program wrote may say anything.
EngineKind engine_of(const std::string& text, const std::string& id) {
  if (auto k = engine_kind_from_name(text)) return *k;
  throw Error(ErrorKind::Database, "box " + id + ": the database names an unknown engine '" + text + "'");
}
BoxState state_of(const std::string& text, const std::string& id) {
  if (auto st = box_state_from_name(text)) return *st;
  throw Error(ErrorKind::Database, "box " + id + ": the database names an unknown state '" + text + "'");
}

BoxRecord read_row(Stmt& s) {
  BoxRecord r;
  r.id = s.text(0);
  r.name = s.text(1);
  r.image = s.text(2);
  r.engine = engine_of(s.text(3), r.id);
  r.state = state_of(s.text(4), r.id);
  r.stop_reason = s.text(5);
  r.created_at_ms = s.integer(6);
  r.started_at_ms = s.integer(7);
  r.stopped_at_ms = s.integer(8);
  r.shim_pid = static_cast<int>(s.integer(9));
  r.auto_remove = s.integer(10) != 0;
  r.detach = s.integer(11) != 0;
  r.options_json = s.text(12);
  if (!s.is_null(13)) r.main_exit_code = static_cast<int>(s.integer(13));
  r.timings_json = s.text(14);
  return r;
}

// SQLite's own ftruncate, for every truncation but the -shm reset.
sqlite3_syscall_ptr sqlite_ftruncate = nullptr;
// A -shm file larger than this (a WAL of ~30,000 frames) is truncated as usual.
constexpr off_t kMaxZeroedWalIndex = 1 << 20;

bool is_wal_index(int fd) {
  char link[40];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  std::array<char, PATH_MAX> path{};
  ssize_t n = ::readlink(link, path.data(), path.size());
  return n > 0 && std::string_view(path.data(), static_cast<size_t>(n)).ends_with("-shm");
}

bool zero_file(int fd, off_t size) {
  static const std::array<char, 4096> zeros{};
  for (off_t off = 0; off < size;) {
    ssize_t n = ::pwrite(fd, zeros.data(), static_cast<size_t>(std::min<off_t>(size - off, zeros.size())), off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += n;
  }
  return true;
}

// SQLite truncates the -shm file to 3 bytes (and nothing else to that length) when
// the first connection attaches to it: zeroed, it reads the same.
int zero_or_truncate(int fd, off_t length) {
  struct stat st;
  if (length == 3 && ::fstat(fd, &st) == 0 && st.st_size > length && st.st_size <= kMaxZeroedWalIndex &&
      is_wal_index(fd) && zero_file(fd, st.st_size)) {
    return 0;
  }
  return reinterpret_cast<int (*)(int, off_t)>(sqlite_ftruncate)(fd, length);
}

}  // namespace

void zero_wal_index_instead_of_truncating() {
  static std::once_flag once;
  std::call_once(once, [] {
    sqlite3_initialize();
    sqlite3_vfs* vfs = sqlite3_vfs_find(nullptr);  // "unix": its system calls are shared by its variants
    if (vfs == nullptr || vfs->iVersion < 3 || vfs->xGetSystemCall == nullptr) return;
    sqlite_ftruncate = vfs->xGetSystemCall(vfs, "ftruncate");
    if (sqlite_ftruncate == nullptr) return;
    vfs->xSetSystemCall(vfs, "ftruncate", reinterpret_cast<sqlite3_syscall_ptr>(&zero_or_truncate));
  });
}

Store::Store(const std::string& db_path) : db_path_(db_path) {
  auto slash = db_path.rfind('/');
  if (slash != std::string::npos && slash > 0) make_dirs(db_path.substr(0, slash), 0700);
  if (sqlite3_open_v2(db_path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw Error(ErrorKind::Database, "open " + db_path + ": " + msg);
  }
  // Several processes share one home: wait for each other's writes instead of failing.
  sqlite3_busy_timeout(db_, 10000);
  // Keep the -wal file between processes: each CLI call would otherwise create it
  // and fsync the directory for it (milliseconds on a busy disk), then delete it.
  int persist_wal = 1;
  sqlite3_file_control(db_, "main", SQLITE_FCNTL_PERSIST_WAL, &persist_wal);
  // No checkpoint when the last connection closes: a checkpoint syncs the -wal and
  // the database, and the next write restarts the -wal and syncs its header and the
  // directory, ~4 fsyncs per CLI call (2 ms idle, far more on a busy disk). What must
  // survive a crash is synced when it commits instead (write()); the checkpoint runs
  // when the -wal passes wal_autocheckpoint pages.
  sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  try {
    enable_wal();
    // Checkpoints every ~32 pages (on_wal_commit): each process rebuilds the -wal's
    // index when it first opens the database (no connection keeps it), reading the
    // -wal's frames up to the first stale one, so they are kept few. The file itself is
    // reused after a checkpoint, not truncated (journal_size_limit caps it at 1 MiB):
    // blocks freed and allocated again every few boxes cost a discard each on hosts
    // that discard synchronously, ~0.35 ms a `run --rm` here (docs/jail.md).
    exec_sql(db_, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; PRAGMA journal_size_limit=1048576;");
    sqlite3_wal_hook(db_, &Store::on_wal_commit, this);  // replaces wal_autocheckpoint
    // Nearly every open finds the schema current: a plain read, no write lock.
    if (schema_version() != kSchemaVersion) write(/*durable=*/true, [&] { migrate(); });
  } catch (...) {
    if (checkpointer_.joinable()) checkpointer_.join();  // a migration's commit may have started one
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

Store::~Store() {
  if (checkpointer_.joinable()) checkpointer_.join();
  sqlite3_close(db_);
}

namespace {
constexpr int kBackgroundCheckpointFrames = 32;
constexpr int kInlineCheckpointFrames = 128;
}  // namespace

int Store::on_wal_commit(void* self, sqlite3* db, const char* schema, int frames) {
  auto* store = static_cast<Store*>(self);
  if (frames >= kInlineCheckpointFrames) {
    // Commits coming faster than the thread's checkpoints: the one under way (it
    // would make this one return busy) first, so that the -wal stays bounded.
    if (store->checkpointer_.joinable()) store->checkpointer_.join();
    sqlite3_wal_checkpoint_v2(db, schema, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  } else if (frames >= kBackgroundCheckpointFrames && !store->removing_) {
    store->checkpoint_in_background();
  }
  return SQLITE_OK;  // a checkpoint that could not finish is retried by a later commit
}

namespace {
// A passive checkpoint (it never waits for a writer, nor a writer for it) through a
// connection opened for it alone. A failure is left to a later commit's checkpoint.
void checkpoint_on_own_connection(const std::string& db_path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) == SQLITE_OK) {
    int persist_wal = 1;  // as every connection of the store (Store::Store)
    sqlite3_file_control(db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist_wal);
    sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
    // A connection finds the -wal at its first read; a checkpoint before it has none.
    sqlite3_exec(db, "PRAGMA schema_version", nullptr, nullptr, nullptr);
    sqlite3_wal_checkpoint_v2(db, "main", SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  }
  sqlite3_close(db);
}
}  // namespace

void Store::checkpoint_in_background() {
  if (checkpointing_.exchange(true)) return;           // one is under way
  if (checkpointer_.joinable()) checkpointer_.join();  // the last one, finished
  try {
    checkpointer_ = start_thread_without_signals([this] {
      checkpoint_on_own_connection(db_path_);
      checkpointing_ = false;
    });
  } catch (const std::system_error&) {
    checkpointing_ = false;  // no thread to be had: a later commit tries again
  }
}

// Turning a new database to WAL needs it alone for a moment, and SQLite returns
// BUSY for that without waiting on the busy handler: processes (or threads) opening
// a fresh home together take turns here instead of failing.
void Store::enable_wal() {
  for (int attempt = 0;; ++attempt) {
    char* err = nullptr;
    int rc = sqlite3_exec(db_, "PRAGMA journal_mode=WAL", nullptr, nullptr, &err);
    std::string msg = err ? err : "";
    sqlite3_free(err);
    if (rc == SQLITE_OK) return;
    if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || attempt >= 500) {
      throw Error(ErrorKind::Database,
                  "database: set WAL journal mode: " + (msg.empty() ? std::string(sqlite3_errstr(rc)) : msg));
    }
    ::usleep(2000 + static_cast<useconds_t>(attempt % 7) * 1000);  // ~10 s in all
  }
}

int Store::schema_version() {
  Stmt s(db_, "PRAGMA user_version");
  return s.step() ? static_cast<int>(s.integer(0)) : 0;
}

void Store::migrate() {
  exec_sql(db_, "BEGIN IMMEDIATE");
  try {
    int version = schema_version();  // again, under the lock: another process may have migrated
    if (version > kSchemaVersion) {
      throw Error(ErrorKind::Database, "Schema version mismatch: database has v" + std::to_string(version) +
                                           ", process expects v" + std::to_string(kSchemaVersion) +
                                           ". Upgrade boxlite to a newer version.");
    }
    if (version < 1) {
      exec_sql(db_,
               "CREATE TABLE boxes ("
               " id TEXT PRIMARY KEY,"
               " name TEXT UNIQUE,"
               " image TEXT NOT NULL,"
               " engine TEXT NOT NULL,"
               " state TEXT NOT NULL CHECK (state IN ('created','running','stopped')),"
               " stop_reason TEXT NOT NULL DEFAULT '',"
               " created_at_ms INTEGER NOT NULL,"
               " started_at_ms INTEGER NOT NULL DEFAULT 0,"
               " stopped_at_ms INTEGER NOT NULL DEFAULT 0,"
               " shim_pid INTEGER NOT NULL DEFAULT 0,"
               " auto_remove INTEGER NOT NULL,"
               " detach INTEGER NOT NULL,"
               " options_json TEXT NOT NULL);"
               "CREATE INDEX boxes_created ON boxes(created_at_ms DESC);"
               "PRAGMA user_version = 1;");
    }
    if (version < 2) {
      exec_sql(db_,
               "ALTER TABLE boxes ADD COLUMN main_exit_code INTEGER;"
               "ALTER TABLE boxes ADD COLUMN timings_json TEXT NOT NULL DEFAULT '{}';"
               "PRAGMA user_version = 2;");
    }
    if (version < 3) {
      // The reference's status names ("created" was "configured" all along), and
      // room for the states a box can now be in. SQLite cannot change a CHECK: the
      // table is rebuilt.
      exec_sql(db_,
               "CREATE TABLE boxes_v3 ("
               " id TEXT PRIMARY KEY,"
               " name TEXT UNIQUE,"
               " image TEXT NOT NULL,"
               " engine TEXT NOT NULL CHECK (engine IN ('vm','jail')),"
               " state TEXT NOT NULL CHECK (state IN ('configured','running','stopped','paused','failed')),"
               " stop_reason TEXT NOT NULL DEFAULT '',"
               " created_at_ms INTEGER NOT NULL,"
               " started_at_ms INTEGER NOT NULL DEFAULT 0,"
               " stopped_at_ms INTEGER NOT NULL DEFAULT 0,"
               " shim_pid INTEGER NOT NULL DEFAULT 0,"
               " auto_remove INTEGER NOT NULL,"
               " detach INTEGER NOT NULL,"
               " options_json TEXT NOT NULL,"
               " main_exit_code INTEGER,"
               " timings_json TEXT NOT NULL DEFAULT '{}');"
               "INSERT INTO boxes_v3 SELECT id, name, image, engine,"
               " CASE state WHEN 'created' THEN 'configured' ELSE state END,"
               " stop_reason, created_at_ms, started_at_ms, stopped_at_ms, shim_pid, auto_remove, detach,"
               " options_json, main_exit_code, timings_json FROM boxes;"
               "DROP TABLE boxes;"
               "ALTER TABLE boxes_v3 RENAME TO boxes;"
               "CREATE INDEX boxes_created ON boxes(created_at_ms DESC);"
               "PRAGMA user_version = 3;");
    }
    exec_sql(db_, "COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

void Store::write(bool durable, const std::function<void()>& body) {
  std::lock_guard lk(write_mu_);  // the connection's synchronous level is shared
  if (durable) exec_sql(db_, "PRAGMA synchronous=FULL");
  try {
    body();
  } catch (...) {
    if (durable) sqlite3_exec(db_, "PRAGMA synchronous=NORMAL", nullptr, nullptr, nullptr);
    throw;
  }
  if (durable) exec_sql(db_, "PRAGMA synchronous=NORMAL");
}

void Store::insert(const BoxRecord& r) {
  write(!r.auto_remove, [&] { insert_row(r); });
}

void Store::insert_row(const BoxRecord& r) {
  Stmt s(db_, (std::string("INSERT INTO boxes (") + kColumns + ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)").c_str());
  s.bind(1, r.id)
      .bind_null_if_empty(2, r.name)
      .bind(3, r.image)
      .bind(4, std::string(engine_kind_name(r.engine)))
      .bind(5, recorded_state(r))
      .bind(6, r.stop_reason);
  s.bind(7, r.created_at_ms).bind(8, r.started_at_ms).bind(9, r.stopped_at_ms).bind(10, int64_t{r.shim_pid});
  s.bind(11, int64_t{r.auto_remove}).bind(12, int64_t{r.detach}).bind(13, r.options_json);
  s.bind(14, r.main_exit_code).bind(15, r.timings_json);
  try {
    s.step();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::AlreadyExists) throw;
    if (!r.name.empty() && find_exact(r.name))
      throw Error(ErrorKind::AlreadyExists, "box name '" + r.name + "' is already in use");
    throw Error(ErrorKind::AlreadyExists, "box id " + r.id + " already exists");
  }
}

void Store::update(const BoxRecord& r) {
  write(!r.auto_remove, [&] { update_row(r); });
}

void Store::update_row(const BoxRecord& r) {
  Stmt s(db_,
         "UPDATE boxes SET name=?, image=?, engine=?, state=?, stop_reason=?, started_at_ms=?, stopped_at_ms=?, "
         "shim_pid=?, auto_remove=?, detach=?, options_json=?, main_exit_code=?, timings_json=? WHERE id=?");
  s.bind_null_if_empty(1, r.name)
      .bind(2, r.image)
      .bind(3, std::string(engine_kind_name(r.engine)))
      .bind(4, recorded_state(r))
      .bind(5, r.stop_reason);
  s.bind(6, r.started_at_ms).bind(7, r.stopped_at_ms).bind(8, int64_t{r.shim_pid}).bind(9, int64_t{r.auto_remove});
  s.bind(10, int64_t{r.detach}).bind(11, r.options_json).bind(12, r.main_exit_code).bind(13, r.timings_json);
  s.bind(14, r.id);
  s.step();
  if (sqlite3_changes(db_) == 0) throw Error(ErrorKind::NotFound, "No such box: " + r.id);
}

std::optional<BoxRecord> Store::find_exact(const std::string& id_or_name) {
  if (id_or_name.empty()) return std::nullopt;
  Stmt s(db_,
         (std::string("SELECT ") + kColumns + " FROM boxes WHERE id=? OR name=? ORDER BY id=? DESC LIMIT 1").c_str());
  s.bind(1, id_or_name).bind(2, id_or_name).bind(3, id_or_name);
  if (s.step()) return read_row(s);
  return std::nullopt;
}

std::optional<BoxRecord> Store::find(const std::string& id_or_name) {
  if (auto r = find_exact(id_or_name)) return r;
  if (id_or_name.empty()) return std::nullopt;
  // A unique prefix of an id, as docker accepts.
  Stmt p(db_, (std::string("SELECT ") + kColumns + " FROM boxes WHERE substr(id, 1, length(?1)) = ?1 LIMIT 2").c_str());
  p.bind(1, id_or_name);
  if (!p.step()) return std::nullopt;
  BoxRecord r = read_row(p);
  if (p.step()) return std::nullopt;  // ambiguous: no box (the CLI says why, cli/boxes.cpp)
  return r;
}

std::vector<BoxRecord> Store::list() {
  Stmt s(db_, (std::string("SELECT ") + kColumns + " FROM boxes ORDER BY created_at_ms DESC, rowid DESC").c_str());
  std::vector<BoxRecord> out;
  while (s.step()) out.push_back(read_row(s));
  return out;
}

std::vector<BoxRecord> Store::list_options_containing(const std::string& text) {
  Stmt s(db_, (std::string("SELECT ") + kColumns +
               " FROM boxes WHERE instr(options_json, ?) > 0 ORDER BY created_at_ms DESC, rowid DESC")
                  .c_str());
  s.bind(1, text);
  std::vector<BoxRecord> out;
  while (s.step()) out.push_back(read_row(s));
  return out;
}

bool Store::remove(const std::string& id, bool durable) {
  bool removed = false;
  write(durable, [&] {
    removing_ = true;
    struct Reset {
      bool& flag;
      ~Reset() { flag = false; }
    } reset{removing_};
    Stmt s(db_, "DELETE FROM boxes WHERE id=?");
    s.bind(1, id);
    s.step();
    removed = sqlite3_changes(db_) > 0;
  });
  return removed;
}

}  // namespace boxlite::store
