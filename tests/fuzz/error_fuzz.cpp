// decode_error (common/error.hpp): the one decoder of errors other processes
// report (the shim's ready report, copy_out's extraction child, a guest builtin's
// stderr, boxlite-pull's answers). Whatever the report, decoding never throws,
// gives a kind of the table, and what it gives survives encode_error and
// decode_error again unchanged; the three-field form agrees with the text form.
#include <cstdint>
#include <string>

#include "fuzz/fuzz_support.hpp"

namespace {

using namespace boxlite;

void check_decoded(const Error& e) {
  fuzz::check(error_kind_info(e.kind()).kind == e.kind(), "decode_error gave a kind outside the table");
  fuzz::check(spawn_failure_from_name(spawn_failure_name(e.spawn_failure())) == e.spawn_failure(),
              "decode_error gave a spawn failure without a name");
  Error again = decode_error(encode_error(e), "the fuzzer");
  fuzz::check(
      again.kind() == e.kind() && again.spawn_failure() == e.spawn_failure() && std::string(again.what()) == e.what(),
      "an error does not survive encode_error and decode_error");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view report = fuzz::as_text(data, size);
  Error e = decode_error(report, "the box");
  check_decoded(e);

  // The fielded form (ErrorReply, a JSON line): the report's head split as the text form splits it.
  size_t nl = report.find('\n');
  std::string_view head = report.substr(0, nl), message = nl == std::string_view::npos ? "" : report.substr(nl + 1);
  size_t slash = head.find('/');
  std::string_view kind = head.substr(0, slash), spawn = slash == std::string_view::npos ? "" : head.substr(slash + 1);
  Error fielded = decode_error(kind, spawn, std::string(message), "the box");
  check_decoded(fielded);
  if (nl != std::string_view::npos) {
    fuzz::check(fielded.kind() == e.kind() && fielded.spawn_failure() == e.spawn_failure() &&
                    std::string(fielded.what()) == e.what(),
                "the two forms of decode_error disagree");
  }

  // The other ways a kind arrives: a REST code, a C API code.
  if (auto k = error_kind_from_rest_code(report)) fuzz::check(error_kind_info(*k).rest_code == report, "REST code");
  if (size >= 4) {
    int code = static_cast<int>(uint32_t{data[0]} | uint32_t{data[1]} << 8 | uint32_t{data[2]} << 16 |
                                uint32_t{data[3]} << 24);
    if (auto k = error_kind_from_c_code(code)) fuzz::check(error_kind_info(*k).c_code == code, "C code");
  }
  return 0;
}
