#include "core/record_copy.hpp"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/io.hpp"

namespace boxlite::core {
namespace {

std::string copy_path(const std::string& box_dir) { return box_dir + "/" + kRecordCopyFile; }

}  // namespace

void keep_record_copy(const std::string& box_dir, const store::BoxRecord& r) noexcept {
  if (r.auto_remove) return;
  nlohmann::json j{{"id", r.id},
                   {"name", r.name},
                   {"image", r.image},
                   {"engine", engine_kind_name(r.engine)},
                   {"created_at_ms", r.created_at_ms},
                   {"detach", r.detach},
                   {"options_json", r.options_json},
                   {"timings_json", r.timings_json}};
  try {
    // Not synced: after a host crash the row (synced) is there, and a copy lost
    // with it only weakens what the copy is for.
    write_file_atomic(copy_path(box_dir), j.dump(), 0600, /*durable=*/false);
  } catch (...) {
  }
}

void drop_record_copy(const std::string& box_dir) noexcept { (void)::unlink(copy_path(box_dir).c_str()); }

bool has_record_copy(const std::string& box_dir) { return ::access(copy_path(box_dir).c_str(), F_OK) == 0; }

store::BoxRecord read_record_copy(const std::string& box_dir) {
  std::string path = copy_path(box_dir);
  store::BoxRecord r;
  try {
    auto j = nlohmann::json::parse(read_file(path));
    r.id = j.at("id").get<std::string>();
    r.name = j.at("name").get<std::string>();
    r.image = j.at("image").get<std::string>();
    r.engine = parse_engine_kind(j.at("engine").get<std::string>(), path);
    r.created_at_ms = j.at("created_at_ms").get<int64_t>();
    r.detach = j.at("detach").get<bool>();
    r.options_json = j.at("options_json").get<std::string>();
    r.timings_json = j.value("timings_json", std::string("{}"));
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::Storage, path + " is not a box's record: " + e.what());
  } catch (const Error& e) {
    throw Error(ErrorKind::Storage, path + " is not a box's record: " + e.what());
  }
  if (box_dir.substr(box_dir.rfind('/') + 1) != r.id) {
    throw Error(ErrorKind::Storage, path + " records box " + r.id + ", not the box of its directory");
  }
  r.state = BoxState::Stopped;
  r.auto_remove = false;
  return r;
}

}  // namespace boxlite::core
