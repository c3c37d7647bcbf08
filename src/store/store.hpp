// The state store: one SQLite database per home (<home>/db/boxlite.db) with a
// versioned schema. Every process that uses a home sees the same boxes through it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

struct sqlite3;

namespace boxlite::store {

inline constexpr int kSchemaVersion = 2;

struct BoxRecord {
  std::string id;
  std::string name;  // "" = unnamed
  std::string image;
  std::string engine;
  std::string state;        // created | running | stopped
  std::string stop_reason;  // why it last stopped ("" if never)
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
  // By exact id, then by name, then by unique id prefix.
  std::optional<BoxRecord> find(const std::string& id_or_name);
  // Newest first.
  std::vector<BoxRecord> list();
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
  sqlite3* db_ = nullptr;
  std::mutex write_mu_;
};

}  // namespace boxlite::store
