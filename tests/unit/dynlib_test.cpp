// The lazy bindings' two sources (common/dynlib.hpp): dlopen, or the table of
// libraries a static executable links (the CLI's, use_linked_libraries).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "common/dynlib.hpp"
#include "common/error.hpp"

namespace {

int answer() { return 42; }

TEST(DynlibTest, DlopenFindsAnInstalledLibraryAndNamesWhatIsMissing) {
  void* lib = boxlite::open_library("libz.so.1", "a test");
  EXPECT_NE(boxlite::library_symbol(lib, "libz.so.1", "zlibVersion"), nullptr);
  try {
    boxlite::library_symbol(lib, "libz.so.1", "no_such_function");
    FAIL() << "a missing symbol was found";
  } catch (const boxlite::Error& e) {
    EXPECT_EQ(e.kind(), boxlite::ErrorKind::Config);
    EXPECT_NE(std::string(e.what()).find("no_such_function"), std::string::npos) << e.what();
  }
  try {
    boxlite::open_library("libboxlite-no-such.so.9", "a test");
    FAIL() << "a missing library was opened";
  } catch (const boxlite::Error& e) {
    EXPECT_EQ(e.kind(), boxlite::ErrorKind::Config);
    EXPECT_NE(std::string(e.what()).find("needed for a test"), std::string::npos) << e.what();
  }
}

// Installs a table and checks what is found, exiting 0 if all is as documented.
[[noreturn]] void find_only_what_a_linked_table_holds() {
  static const boxlite::LinkedSymbol symbols[] = {{"answer", reinterpret_cast<void*>(&answer)}};
  static const boxlite::LinkedLibrary libs[] = {{"libanswer.so.1", symbols}};
  boxlite::use_linked_libraries(libs);
  void* lib = boxlite::open_library("libanswer.so.1", "a test");
  int (*fn)() = nullptr;
  boxlite::bind_symbol(lib, "libanswer.so.1", "answer", fn);
  if (fn() != 42) std::exit(1);
  try {
    boxlite::library_symbol(lib, "libanswer.so.1", "question");
    std::exit(2);
  } catch (const boxlite::Error& e) {
    if (e.kind() != boxlite::ErrorKind::Internal) std::exit(3);
  }
  // Installed on the system, but not linked in: refused, never dlopen'd.
  try {
    boxlite::open_library("libz.so.1", "compressing");
    std::exit(4);
  } catch (const boxlite::Error& e) {
    std::string what = e.what();
    if (e.kind() != boxlite::ErrorKind::Internal || what.find("libz.so.1") == std::string::npos ||
        what.find("needed for compressing") == std::string::npos) {
      std::exit(5);
    }
  }
  std::exit(0);
}

// In a child (EXPECT_EXIT): the table is process-wide and permanent, as in the CLI.
TEST(DynlibTest, ALinkedTableIsAllThatIsFoundOnceInstalled) {
  EXPECT_EXIT(find_only_what_a_linked_table_holds(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
