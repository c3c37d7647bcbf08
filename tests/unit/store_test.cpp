#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>

#include "common/error.hpp"
#include "common/io.hpp"
#include "image/test_support.hpp"
#include "store/store.hpp"

namespace boxlite::store {
namespace {

class StoreTest : public ::testing::Test {
 protected:
  static BoxRecord record(const std::string& id, const std::string& name, int64_t created) {
    BoxRecord r;
    r.id = id;
    r.name = name;
    r.image = "busybox";
    r.engine = EngineKind::Jail;
    r.state = BoxState::Configured;
    r.created_at_ms = created;
    r.options_json = "{}";
    return r;
  }
  image::testing::ScratchDir scratch_;
  std::string dir_ = scratch_.path(), path_ = dir_ + "/db/boxlite.db";
};

TEST_F(StoreTest, InsertFindUpdateListRemove) {
  Store s(path_);
  s.insert(record("aaaaaaaaaaaa", "first", 1));
  s.insert(record("bbbbbbbbbbbb", "", 2));
  auto by_name = s.find("first");
  ASSERT_TRUE(by_name);
  EXPECT_EQ(by_name->id, "aaaaaaaaaaaa");
  EXPECT_TRUE(s.find("bbbbbbbbbbbb"));
  EXPECT_TRUE(s.find("bbbb")) << "unique id prefix";
  EXPECT_FALSE(s.find("nope"));
  auto r = *by_name;
  r.state = BoxState::Stopped;
  r.stop_reason = "stop requested";
  s.update(r);
  EXPECT_EQ(s.find("first")->stop_reason, "stop requested");
  auto all = s.list();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, "bbbbbbbbbbbb") << "newest first";
  EXPECT_TRUE(s.remove("aaaaaaaaaaaa"));
  EXPECT_FALSE(s.remove("aaaaaaaaaaaa"));
  EXPECT_EQ(s.list().size(), 1u);
}

// The last connection closes without a checkpoint (what must survive a crash was
// synced when it committed): the rows stay in the -wal for the next process, and the
// checkpoints keep that -wal small, even under a stream of commits.
TEST_F(StoreTest, RowsOutliveTheConnectionInTheWalWhichStaysSmall) {
  {
    Store s(path_);
    BoxRecord kept = record("aaaaaaaaaaaa", "kept", 1);
    kept.auto_remove = false;
    s.insert(kept);
    s.insert(record("bbbbbbbbbbbb", "ephemeral", 2));
  }
  struct stat st {};
  ASSERT_EQ(::stat((path_ + "-wal").c_str(), &st), 0);
  EXPECT_GT(st.st_size, 0) << "closed without a checkpoint";
  {
    Store s(path_);
    EXPECT_TRUE(s.find("kept"));
    EXPECT_TRUE(s.find("ephemeral"));
    BoxRecord r = *s.find("ephemeral");
    for (int i = 0; i < 500; ++i) {
      r.stop_reason = std::string(2000, static_cast<char>('a' + i % 26));
      s.update(r);
    }
    EXPECT_EQ(s.find("ephemeral")->stop_reason, r.stop_reason);
    EXPECT_TRUE(s.remove("bbbbbbbbbbbb", /*durable=*/false));
  }
  ASSERT_EQ(::stat((path_ + "-wal").c_str(), &st), 0);
  EXPECT_LT(st.st_size, 1 << 20) << "the checkpoints bound the -wal";
  Store s(path_);
  EXPECT_TRUE(s.find("kept"));
  EXPECT_FALSE(s.find("ephemeral"));
}

// A commit that leaves a few dozen pages in the -wal starts a checkpoint on a thread
// (the commit does not wait for its syncs), which the store's destructor waits for:
// the pages committed before it (at least the first ~32) are in the database file
// itself afterwards, where nothing else would have put them (SQLite's own
// autocheckpoint is off, and closing checkpoints nothing). How many more it copies
// depends on how the thread and the later commits interleave.
TEST_F(StoreTest, ACommitPastAFewDozenPagesCheckpointsOnAThread) {
  auto db_size = [&] {
    struct stat st {};
    return ::stat(path_.c_str(), &st) == 0 ? st.st_size : -1;
  };
  int64_t before = 0;
  {
    Store s(path_);
    before = db_size();
    for (int i = 0; i < 16; ++i) {
      BoxRecord r = record("box" + std::to_string(100000000 + i), "", i);
      r.options_json = std::string(6000, 'x');  // two pages a row
      s.insert(r);
    }
  }
  EXPECT_GT(db_size(), before + 8 * 4096) << "no page reached the database file";
  {
    Store s(path_);
    for (int i = 0; i < 16; ++i) EXPECT_TRUE(s.remove("box" + std::to_string(100000000 + i), /*durable=*/false));
  }
  Store s(path_);
  EXPECT_TRUE(s.list().empty());
}

// The first connection resets the WAL's index (-shm) by zeroing it in place
// (zero_wal_index_instead_of_truncating): an index left by an earlier process, valid
// but stale (it counts fewer frames than the -wal holds, as after a crash between a
// commit and its index update), is not trusted; the rows are read back from the -wal.
TEST_F(StoreTest, TheWalIndexZeroedInPlaceIsRebuiltFromTheWal) {
  zero_wal_index_instead_of_truncating();
  sqlite3_vfs* vfs = sqlite3_vfs_find(nullptr);
  ASSERT_NE(vfs, nullptr);
  EXPECT_NE(vfs->xGetSystemCall(vfs, "ftruncate"), reinterpret_cast<sqlite3_syscall_ptr>(&::ftruncate))
      << "SQLite still truncates the -shm itself";
  std::string stale_index;
  {
    Store s(path_);
    s.insert(record("aaaaaaaaaaaa", "first", 1));
    stale_index = read_file(path_ + "-shm");
    for (int i = 0; i < 5; ++i) s.insert(record("box" + std::to_string(100000000 + i), "", 2 + i));
  }
  ASSERT_FALSE(stale_index.empty());
  {  // the index of one row, over a -wal of six
    int fd = ::open((path_ + "-shm").c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    EXPECT_EQ(::pwrite(fd, stale_index.data(), stale_index.size(), 0), static_cast<ssize_t>(stale_index.size()));
    ::close(fd);
  }
  {
    Store s(path_);
    EXPECT_EQ(s.list().size(), 6u) << "the stale index was trusted";
  }
  struct stat st {};
  ASSERT_EQ(::stat((path_ + "-shm").c_str(), &st), 0);
  EXPECT_GE(st.st_size, 32768) << "kept at its size, not truncated";
}

TEST_F(StoreTest, ListOptionsContainingFindsOnlyRowsWhoseOptionsHoldTheText) {
  Store s(path_);
  BoxRecord a = record("aaaaaaaaaaaa", "", 1), b = record("bbbbbbbbbbbb", "", 2), c = record("cccccccccccc", "", 3);
  b.options_json = R"({"clone_of":"aaaaaaaaaaaa"})";
  c.options_json = R"({"clone_of":"aaaaaaaaaaaa","image":"x"})";
  for (const auto& r : {a, b, c}) s.insert(r);
  auto found = s.list_options_containing("\"aaaaaaaaaaaa\"");
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].id, "cccccccccccc");  // newest first, as list()
  EXPECT_EQ(found[1].id, "bbbbbbbbbbbb");
  EXPECT_TRUE(s.list_options_containing("\"bbbbbbbbbbbb\"").empty());
}

TEST_F(StoreTest, NamesAndIdsAreUnique) {
  Store s(path_);
  s.insert(record("aaaaaaaaaaaa", "dup", 1));
  try {
    s.insert(record("cccccccccccc", "dup", 2));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::AlreadyExists);
    EXPECT_NE(std::string(e.what()).find("'dup' is already in use"), std::string::npos) << e.what();
  }
  EXPECT_THROW(s.insert(record("aaaaaaaaaaaa", "", 3)), Error);
  // Several unnamed boxes are fine (NULL is not a duplicate).
  s.insert(record("dddddddddddd", "", 4));
  s.insert(record("eeeeeeeeeeee", "", 5));
}

TEST_F(StoreTest, UpdatingAMissingBoxIsNotFound) {
  Store s(path_);
  try {
    s.update(record("zzzzzzzzzzzz", "", 1));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotFound);
  }
}

TEST_F(StoreTest, ANewerSchemaIsRefusedWithTheDocumentedMessage) {
  { Store s(path_); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "PRAGMA user_version = 10", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  try {
    Store s(path_);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Database);
    EXPECT_STREQ(e.what(),
                 "Schema version mismatch: database has v10, process expects v3. Upgrade boxlite to a newer version.");
  }
}

// A home made by the first release (schema v1) keeps its boxes, gains the v2
// columns, and its "created" boxes are "configured" (v3, the reference's name).
TEST_F(StoreTest, AVersion1DatabaseIsMigrated) {
  make_dirs(dir_ + "/db");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(
          db,
          "CREATE TABLE boxes (id TEXT PRIMARY KEY, name TEXT UNIQUE, image TEXT NOT NULL, engine TEXT NOT NULL,"
          " state TEXT NOT NULL CHECK (state IN ('created','running','stopped')), stop_reason TEXT NOT NULL DEFAULT '',"
          " created_at_ms INTEGER NOT NULL, started_at_ms INTEGER NOT NULL DEFAULT 0, stopped_at_ms INTEGER NOT NULL "
          "DEFAULT 0,"
          " shim_pid INTEGER NOT NULL DEFAULT 0, auto_remove INTEGER NOT NULL, detach INTEGER NOT NULL, options_json "
          "TEXT NOT NULL);"
          "INSERT INTO boxes (id, name, image, engine, state, created_at_ms, auto_remove, detach, options_json)"
          " VALUES ('abcdefabcdef', 'old', 'busybox', 'jail', 'stopped', 5, 0, 0, '{}'),"
          " ('bcdefabcdefa', 'new', 'busybox', 'vm', 'created', 6, 0, 0, '{}');"
          "PRAGMA user_version = 1;",
          nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close(db);
  Store s(path_);
  auto r = s.find("old");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->id, "abcdefabcdef");
  EXPECT_EQ(r->engine, EngineKind::Jail);
  EXPECT_EQ(r->state, BoxState::Stopped);
  EXPECT_FALSE(r->main_exit_code);
  auto never_started = s.find("new");
  ASSERT_TRUE(never_started);
  EXPECT_EQ(never_started->state, BoxState::Configured);
  EXPECT_EQ(never_started->engine, EngineKind::Vm);
  r->main_exit_code = 7;
  r->timings_json = R"({"guest_boot_ms":42})";
  s.update(*r);
  auto again = s.find("old");
  ASSERT_TRUE(again && again->main_exit_code);
  EXPECT_EQ(*again->main_exit_code, 7);
  EXPECT_EQ(again->timings_json, R"({"guest_boot_ms":42})");
}

TEST_F(StoreTest, ConcurrentWritersFromThreadsLoseNothing) {
  { Store init(path_); }
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this, t] {
      Store s(path_);  // one connection per thread, as separate processes would
      for (int i = 0; i < 50; ++i) {
        char id[13];
        std::snprintf(id, sizeof id, "t%dbox%06d", t, i);
        s.insert(record(id, "", t * 1000 + i));
      }
    });
  }
  for (auto& th : threads) th.join();
  Store s(path_);
  EXPECT_EQ(s.list().size(), 200u);
}

TEST_F(StoreTest, AnUnopenableDatabaseIsADatabaseError) {
  write_file_atomic(dir_ + "/notadir", "x");
  EXPECT_THROW(Store(dir_ + "/notadir/boxlite.db"), Error);
}

}  // namespace
}  // namespace boxlite::store
