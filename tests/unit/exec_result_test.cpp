#include <gtest/gtest.h>

#include "boxlite/options.hpp"

namespace boxlite {
namespace {

BufferedResult result(std::string out, std::string err, int code) {
  BufferedResult r;
  r.stdout_text = std::move(out);
  r.stderr_text = std::move(err);
  r.exit_code = code;
  return r;
}

TEST(AsText, StdoutThenExitCodeAsTheConsumerDocuments) {
  EXPECT_EQ(result("hello from the VM\n", "", 0).as_text(), "hello from the VM\n\nExit code: 0");
}

TEST(AsText, StderrBlockOnlyWhenThereIsStderr) {
  EXPECT_EQ(result("out\n", "err\n", 3).as_text(), "out\nSTDERR:\nerr\n\nExit code: 3");
  EXPECT_EQ(result("no newline", "e", 1).as_text(), "no newline\nSTDERR:\ne\n\nExit code: 1");
  EXPECT_EQ(result("", "", 0).as_text(), "Exit code: 0");
  EXPECT_EQ(result("", "only err", 2).as_text(), "STDERR:\nonly err\n\nExit code: 2");
}

TEST(AsText, TimeoutIsReported) {
  auto r = result("partial\n", "", -15);
  r.timed_out = true;
  r.timeout_secs = 5;
  EXPECT_EQ(r.as_text(), "partial\nSTDERR:\nCommand timed out after 5s\n\nExit code: -15");
  r.timeout_secs = 2.5;
  EXPECT_NE(r.as_text().find("after 2.5s"), std::string::npos);
}

TEST(AsText, LongOutputIsCutInTheMiddleAndTheExitCodeKept) {
  std::string out = std::string(100, 'a') + std::string(100, 'b');
  auto text = result(out, "", 7).as_text(50);
  EXPECT_EQ(text.substr(0, 25), std::string(25, 'a'));
  EXPECT_NE(text.find("\n... (150 chars truncated) ...\n"), std::string::npos) << text;
  EXPECT_NE(text.find(std::string(25, 'b') + "\n\nExit code: 7"), std::string::npos) << text;
}

TEST(AsText, TruncationCountsCodePointsAndNeverSplitsOne) {
  std::string out;
  for (int i = 0; i < 40; ++i) out += "\xc3\xa9";  // é
  auto text = result(out, "", 0).as_text(10);
  EXPECT_NE(text.find("(30 chars truncated)"), std::string::npos) << text;
  EXPECT_EQ(text.substr(0, 10), std::string("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"));
}

}  // namespace
}  // namespace boxlite
