// The one error contract (common/error.hpp): every kind has one row, each REST
// code decodes to one kind, and an error survives the process-boundary encoding.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "common/error.hpp"
#include "protocol/frame.hpp"

namespace boxlite {
namespace {

std::vector<ErrorKind> all_kinds() {
  std::vector<ErrorKind> kinds;
  for (int i = 1; i <= kErrorKindCount; ++i) kinds.push_back(static_cast<ErrorKind>(i));
  return kinds;
}

TEST(ErrorKindTest, EveryKindHasOneRowWithANameOfItsOwn) {
  std::set<std::string_view> names;
  for (ErrorKind k : all_kinds()) {
    const ErrorKindInfo& row = error_kind_info(k);
    EXPECT_EQ(row.kind, k);
    EXPECT_TRUE(names.insert(row.name).second) << row.name;
    EXPECT_EQ(error_kind_from_name(row.name), k);
    EXPECT_GE(row.c_code, 1);
    EXPECT_LE(row.c_code, 21);
    EXPECT_GE(row.http_status, 400);
    EXPECT_FALSE(row.python_class.empty());
  }
  EXPECT_EQ(error_kind_from_name("Nonsense"), std::nullopt);
}

// The REST envelope's 21 codes (the upstream OpenAPI ErrorModel.code enum), each
// decoding to a kind whose row gives that code back.
TEST(ErrorKindTest, EveryRestCodeMapsToAKindAndBack) {
  const char* codes[] = {"invalid_argument",
                         "unsupported",
                         "unauthenticated",
                         "permission_denied",
                         "not_found",
                         "session_reaped",
                         "already_exists",
                         "invalid_state",
                         "stopped",
                         "image_pull_failed",
                         "execution_failed",
                         "resource_exhausted",
                         "network_unavailable",
                         "upstream_unavailable",
                         "engine_unavailable",
                         "storage_error",
                         "database_error",
                         "metadata_error",
                         "config_error",
                         "internal",
                         "timeout"};
  std::set<std::string_view> served;
  for (ErrorKind k : all_kinds()) served.insert(error_kind_info(k).rest_code);
  EXPECT_EQ(served.size(), std::size(codes));
  for (const char* code : codes) {
    auto k = error_kind_from_rest_code(code);
    ASSERT_TRUE(k) << code;
    EXPECT_EQ(error_kind_info(*k).rest_code, code);
  }
}

// The C API's numbers are the kinds' own for the first 21.
TEST(ErrorKindTest, CApiCodesAreTheFirstKinds) {
  for (int c = 1; c <= 21; ++c) {
    auto k = error_kind_from_c_code(c);
    ASSERT_TRUE(k) << c;
    EXPECT_EQ(error_kind_info(*k).c_code, c);
  }
  EXPECT_EQ(error_kind_from_c_code(0), std::nullopt);
  EXPECT_EQ(error_kind_from_c_code(22), std::nullopt);
  EXPECT_EQ(error_kind_info(ErrorKind::UnsupportedEngine).c_code, 19);
}

// Python sees a kind through its C code (python/boxlite/errors.py maps each code
// to one of upstream's classes): the 21 codes have 21 classes, and a kind the C
// API folds into a code has that code's class.
TEST(ErrorKindTest, EachCCodeHasOnePythonClass) {
  std::set<std::string_view> classes;
  for (int c = 1; c <= 21; ++c) classes.insert(error_kind_info(*error_kind_from_c_code(c)).python_class);
  EXPECT_EQ(classes.size(), 21u);
  for (ErrorKind k : all_kinds()) {
    const ErrorKindInfo& row = error_kind_info(k);
    EXPECT_EQ(row.python_class, error_kind_info(*error_kind_from_c_code(row.c_code)).python_class) << row.name;
  }
  EXPECT_EQ(error_kind_info(ErrorKind::RpcTransport).python_class, "RpcTransportError");
  EXPECT_EQ(error_kind_info(ErrorKind::UnsupportedEngine).python_class, "UnsupportedEngineError");
}

TEST(ErrorReportTest, AnErrorSurvivesItsEncoding) {
  Error e(ErrorKind::Execution, "spawn_failed: executable file 'x' not found in $PATH\nsecond line",
          SpawnFailure::NotFound);
  Error back = decode_error(encode_error(e), "test");
  EXPECT_EQ(back.kind(), ErrorKind::Execution);
  EXPECT_EQ(back.spawn_failure(), SpawnFailure::NotFound);
  EXPECT_STREQ(back.what(), e.what());
  Error plain = decode_error(encode_error(Error(ErrorKind::NotFound, "no such box")), "test");
  EXPECT_EQ(plain.kind(), ErrorKind::NotFound);
  EXPECT_EQ(plain.spawn_failure(), SpawnFailure::None);
}

// What another process says is never trusted: a report that is not one is an
// Internal error naming its sender.
TEST(ErrorReportTest, AMalformedOrUnknownReportIsInternalAndNamesItsSender) {
  for (std::string bad : {"", "no newline", "17\nnumbers are not kinds", "Bogus\nmsg", "NotFound/Bogus\nmsg"}) {
    Error e = decode_error(bad, "boxlite-pull");
    EXPECT_EQ(e.kind(), ErrorKind::Internal) << bad;
    EXPECT_NE(std::string(e.what()).find("boxlite-pull"), std::string::npos) << e.what();
  }
}

TEST(ErrorReportTest, AnErrorFrameCarriesKindAndSpawnFailure) {
  protocol::Frame f;
  f.type = protocol::FrameType::Error;
  f.payload = protocol::error_payload(Error(ErrorKind::Execution, "cannot", SpawnFailure::BadWorkingDir));
  Error e = protocol::error_from_frame(f, "the guest");
  EXPECT_EQ(e.kind(), ErrorKind::Execution);
  EXPECT_EQ(e.spawn_failure(), SpawnFailure::BadWorkingDir);
  f.payload = "\xff\xff garbage";
  EXPECT_EQ(protocol::error_from_frame(f, "the guest").kind(), ErrorKind::Rpc);
}

TEST(SpawnFailureTest, ExitCodesAreDockerExecs) {
  EXPECT_EQ(spawn_failure_exit_code(SpawnFailure::NotFound), 127);
  EXPECT_EQ(spawn_failure_exit_code(SpawnFailure::NotExecutable), 126);
  EXPECT_EQ(spawn_failure_exit_code(SpawnFailure::BadWorkingDir), 126);
  EXPECT_EQ(spawn_failure_exit_code(SpawnFailure::UnknownUser), 126);
  EXPECT_EQ(spawn_failure_exit_code(SpawnFailure::Setup), 125);
}

}  // namespace
}  // namespace boxlite
