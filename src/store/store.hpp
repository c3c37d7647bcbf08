// The state store: one SQLite database per home (<home>/db/boxlite.db) with a
// versioned schema. Every process that uses a home sees the same boxes through it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "boxlite/engine_kind.hpp"
#include "boxlite/lifecycle.hpp"

struct sqlite3;

namespace boxlite::store {

inline constexpr int kSchemaVersion = 3;

struct BoxRecord {
  std::string id;
  std::string name;  // "" = unnamed
  std::string image;
  EngineKind engine = kDefaultEngine;
  BoxState state = BoxState::Configured;  // text only in the database (box_state_name)
  std::string stop_reason;                // why it last stopped ("" if never)
  int64_t created_at_ms = 0;
  int64_t started_at_ms = 0;
  int64_t stopped_at_ms = 0;
  int shim_pid = 0;  // while running
  bool auto_remove = true;
  bool detach = false;
  std::string options_json;  // what it was created with
  // v2
  std::optional<int> main_exit_code;  // set when the box stopped because its main command exited
  std::string timings_json = "{}";    // how long create and the last start took, by stage (core)
};

// For a process whose SQLite is its own (the CLI links it statically; libboxlite
// shares the application's): the first connection to a home's database resets the
// -shm file (the WAL's index) by zeroing it in place instead of truncating it, as
// SQLite does, and extending it again. The two are the same to SQLite, which holds
// the file's dead-man lock alone for it; but a truncation frees the file's blocks,
// which on a file system mounted `discard` waits for the device (~2.3 ms on these
// hosts, on the path of every CLI command that opens the store). Call before the
// first Store; once is enough.
void zero_wal_index_instead_of_truncating();

class Store {
 public:
  // Opens (creating and migrating as needed). A database from a newer boxlite is
  // refused with Error(Database): "Schema version mismatch: database has vN,
  // process expects vM. Upgrade boxlite to a newer version."
  explicit Store(const std::string& db_path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Writes commit durably (on disk when they return) unless the record is
  // auto_remove: an ephemeral box's rows need not survive a host crash, and not
  // syncing them is most of what the store costs a `boxlite run --rm`.
  // Throws AlreadyExists when the id or the name is taken.
  void insert(const BoxRecord& r);
  // Every field but id and created_at; throws NotFound.
  void update(const BoxRecord& r);
  // By exact id, then by name, then by unique id prefix (a prefix of more than one id
  // names no box).
  std::optional<BoxRecord> find(const std::string& id_or_name);
  // By exact id or name only: what a new box's name must not be.
  std::optional<BoxRecord> find_exact(const std::string& id_or_name);
  // Newest first.
  std::vector<BoxRecord> list();
  // Those whose options_json contains `text` (a prefilter: the caller parses them).
  std::vector<BoxRecord> list_options_containing(const std::string& text);
  // Returns false when there was no such box. durable=false: the box was
  // auto_remove (as above).
  bool remove(const std::string& id, bool durable = true);

 private:
  int schema_version();
  void migrate();
  void enable_wal();
  // Runs body's statements; durable ones with synchronous=FULL, which syncs the -wal
  // at each commit (the connection's NORMAL leaves that to the next checkpoint).
  void write(bool durable, const std::function<void()>& body);
  void insert_row(const BoxRecord& r);
  void update_row(const BoxRecord& r);
  // SQLite's commit hook in WAL mode, standing in for its autocheckpoint (below).
  static int on_wal_commit(void* self, sqlite3* db, const char* schema, int frames);
  void checkpoint_in_background();

  std::string db_path_;
  sqlite3* db_ = nullptr;
  std::mutex write_mu_;
  // A checkpoint copies the -wal's pages into the database and syncs both, which a
  // commit that crosses SQLite's autocheckpoint threshold waits for. Here a commit
  // that leaves kBackgroundCheckpointFrames or more starts one on this thread
  // instead, on a connection of its own (on db_, whose mutex it would hold through
  // both syncs, the caller's next statement would wait for them), and the commit
  // returns: in `run`, it overlaps the box's start and stop. Not after a removal, the
  // last write of a box's life (the caller is usually about to exit and would wait
  // for it in ~Store). A -wal that still reaches kInlineCheckpointFrames is
  // checkpointed by the commit itself, as SQLite's autocheckpoint does.
  std::thread checkpointer_;
  std::atomic<bool> checkpointing_{false};
  bool removing_ = false;  // under write_mu_
};

}  // namespace boxlite::store
