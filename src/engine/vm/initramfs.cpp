// The guest initramfs: the agent as /init and, for a modular kernel, the modules
// it loads. Host-side only (the runtime builds it; the shim never does).
#include "engine/vm/initramfs.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "common/error.hpp"
#include "common/io.hpp"
#include "common/sha256.hpp"

namespace boxlite::engine::vm {

namespace {

// Minimal writer of the "newc" cpio format the kernel unpacks as initramfs.
class CpioWriter {
 public:
  void dir(const std::string& name, unsigned mode = 0755) { entry(name, S_IFDIR | mode, 0, 0, ""); }
  void file(const std::string& name, const std::string& data, unsigned mode) {
    entry(name, S_IFREG | mode, 0, 0, data);
  }
  void chardev(const std::string& name, unsigned mode, unsigned major, unsigned minor) {
    entry(name, S_IFCHR | mode, major, minor, "");
  }
  std::string finish() {
    entry("TRAILER!!!", 0, 0, 0, "");
    return std::move(out_);
  }

 private:
  void hex(unsigned v) {
    char b[9];
    std::snprintf(b, sizeof b, "%08X", v);
    out_.append(b, 8);
  }
  void pad() {
    while (out_.size() % 4) out_.push_back('\0');
  }
  void entry(const std::string& name, unsigned mode, unsigned rmaj, unsigned rmin, const std::string& data) {
    out_ += "070701";
    hex(++ino_);
    hex(mode);
    hex(0);  // uid
    hex(0);  // gid
    hex(1);  // nlink
    hex(0);  // mtime
    hex(static_cast<unsigned>(data.size()));
    hex(0);
    hex(0);
    hex(rmaj);
    hex(rmin);
    hex(static_cast<unsigned>(name.size() + 1));
    hex(0);
    out_ += name;
    out_.push_back('\0');
    pad();
    out_ += data;
    pad();
  }
  std::string out_;
  unsigned ino_ = 0;
};

// What the agent needs from a modular (Debian) kernel; dependencies are added.
// crc32c_generic: ext4 asks the crypto API for crc32c by name, not as a module dependency.
const std::vector<std::string> kWantedModules = {
    "virtio_mmio", "virtio_console", "virtio_blk", "virtio_rng", "crc32c_generic",
    "ext4",        "9pnet_virtio",   "9p",         "overlay",
    "virtio_net",  // the box's eth0 (issue 7)
};

std::string module_name(const std::filesystem::path& p) {
  std::string n = p.filename().string();
  n = n.substr(0, n.find(".ko"));
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}

// The "depends=" entry of a module's .modinfo section (no depmod output needed).
std::vector<std::string> module_depends(const std::string& ko_bytes) {
  static const std::string key = std::string("\0depends=", 9);
  auto pos = ko_bytes.find(key);
  if (pos == std::string::npos) return {};
  auto end = ko_bytes.find('\0', pos + key.size());
  std::vector<std::string> out;
  for (auto& d : split(ko_bytes.substr(pos + key.size(), end - pos - key.size()), ',')) {
    if (!d.empty()) out.push_back(d);
  }
  return out;
}

// Modules in load order (dependencies first); wanted modules this kernel has built in are skipped.
std::vector<std::pair<std::string, std::string>> modules_in_load_order(const std::string& modules_dir) {
  std::map<std::string, std::string> index;  // name -> path
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(modules_dir + "/kernel", ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file() && it->path().filename().string().find(".ko") != std::string::npos) {
      index[module_name(it->path())] = it->path().string();
    }
  }
  if (ec) throw Error(ErrorKind::Config, "read kernel modules in " + modules_dir + ": " + ec.message());
  std::vector<std::pair<std::string, std::string>> order;  // (path, bytes)
  std::set<std::string> done, visiting;
  std::function<void(const std::string&)> visit = [&](const std::string& name) {
    if (done.count(name) || visiting.count(name)) return;
    auto it = index.find(name);
    if (it == index.end()) return;  // built in
    if (it->second.size() > 3 && it->second.substr(it->second.size() - 3) != ".ko") {
      throw Error(ErrorKind::Config,
                  "kernel module " + it->second + " is compressed; only plain .ko files are supported");
    }
    visiting.insert(name);
    std::string bytes = read_file(it->second);
    for (const auto& dep : module_depends(bytes)) visit(dep);
    visiting.erase(name);
    done.insert(name);
    order.emplace_back(it->second, std::move(bytes));
  };
  for (const auto& w : kWantedModules) visit(w);
  return order;
}

}  // namespace

std::string ensure_initramfs(const std::string& cache_dir, const std::string& guest_binary,
                             const std::string& modules_dir) {
  std::string agent = read_file(guest_binary);
  CpioWriter cpio;
  for (const char* d : {"dev", "proc", "sys", "newroot", "modules"}) cpio.dir(d);
  cpio.chardev("dev/console", 0600, 5, 1);
  cpio.chardev("dev/null", 0666, 1, 3);
  cpio.file("init", agent, 0755);
  if (!modules_dir.empty()) {
    std::string list;
    int n = 0;
    for (auto& [path, bytes] : modules_in_load_order(modules_dir)) {
      std::string name = "modules/" + std::to_string(n++) + "-" + path.substr(path.rfind('/') + 1);
      cpio.file(name, bytes, 0644);
      list += "/" + name + "\n";
    }
    cpio.file("modules/load.list", list, 0644);
  }
  std::string image = cpio.finish();
  make_dirs(cache_dir);
  std::string path = cache_dir + "/initramfs-" + sha256_of(image).substr(7, 16) + ".cpio";
  if (!path_exists(path)) write_file_atomic(path, image);
  return path;
}

}  // namespace boxlite::engine::vm
