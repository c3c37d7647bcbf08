// The Simple API: a runtime and one started box, used synchronously.
#include <cstdlib>
#include <cstring>

#include "errors.hpp"
#include "state.hpp"

using namespace boxlite;
using namespace boxlite::capi;

namespace {

// A malloc'ed copy of output that may hold NUL bytes (the C string ends at the
// first one; the whole text is kept).
char* dup_text(const std::string& s) {
  char* p = dup_string(s);
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace

extern "C" {

BoxliteErrorCode boxlite_simple_new(const char* image, int cpus, int memory_mib, CBoxliteSimple** out_box,
                                    CBoxliteError* out_error) {
  return guard(out_error, [&] {
    require(out_box, "out_box");
    *out_box = nullptr;
    require_str(image, "image");
    if (cpus < 0) invalid("cpus must be >= 0 (0 = the default, 1), got " + std::to_string(cpus));
    if (memory_mib < 0) {
      invalid("memory_mib must be >= 0 (0 = the default, 1024 MiB), got " + std::to_string(memory_mib));
    }
    auto simple = std::make_unique<CBoxliteSimple>();
    simple->rt = std::make_unique<Runtime>();
    BoxOptions o;
    o.image = image;
    if (cpus > 0) o.cpus = cpus;
    if (memory_mib > 0) o.memory_mib = memory_mib;
    simple->box = simple->rt->create(o);
    simple->box->start();  // a failed start drops the box, which removes it
    *out_box = simple.release();
  });
}

BoxliteErrorCode boxlite_simple_run(CBoxliteSimple* box, const char* command, const char* const* args, int argc,
                                    CBoxliteExecResult** out_result, CBoxliteError* out_error) {
  return guard(out_error, [&] {
    require(out_result, "out_result");
    *out_result = nullptr;
    require(box, "box");
    require_str(command, "command");
    if (argc < 0) invalid("argc is negative");
    if (argc > 0) require(args, "args (with argc > 0)");
    ExecOptions o;
    o.argv.emplace_back(command);
    for (int i = 0; i < argc; ++i) {
      if (!args[i]) invalid("args[" + std::to_string(i) + "] is NULL");
      o.argv.emplace_back(args[i]);
    }
    BufferedResult r = box->box->run(o);
    auto* res = static_cast<CBoxliteExecResult*>(std::calloc(1, sizeof(CBoxliteExecResult)));
    if (!res) throw std::bad_alloc();
    try {
      res->exit_code = r.exit_code;
      res->stdout_text = dup_text(r.stdout_text);
      res->stderr_text = dup_text(r.stderr_text);
    } catch (...) {
      boxlite_result_free(res);
      throw;
    }
    *out_result = res;
  });
}

void boxlite_simple_free(CBoxliteSimple* box) {
  if (!box) return;
  try {
    box->box->destroy();
  } catch (...) {
    // Removed already, or its directory is gone: the handle goes all the same.
  }
  try {
    delete box;
  } catch (...) {
  }
}

void boxlite_result_free(CBoxliteExecResult* result) {
  if (!result) return;
  std::free(result->stdout_text);
  std::free(result->stderr_text);
  std::free(result);
}

}  // extern "C"
