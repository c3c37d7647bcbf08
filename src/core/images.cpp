// Runtime's image operations: pulling into the home's image store, listing,
// removing and pruning. The store itself is registry::ImageStore; this file adds
// what needs the runtime: the configured registries, the boxes that use images,
// and the derived caches (ext4 bases, jail layer directories).
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "common/error.hpp"
#include "common/io.hpp"
#include "core/paths.hpp"
#include "core/runtime.hpp"
#include "engine/spec.hpp"
#include "registry/pull_client.hpp"

namespace boxlite {

namespace {

std::vector<std::string> dir_entries(const std::string& dir) {
  std::vector<std::string> out;
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return out;
  while (auto* e = ::readdir(d.get())) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  return out;
}

bool is_hex(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

uint64_t file_size(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_blocks) * 512 : 0;
}

}  // namespace

registry::PullResult LocalRuntime::pull_into(const std::string& images_dir, const std::string& reference) const {
  registry::PullOptions o;
  o.registries = registries_;
  o.progress = pull_progress_;
  o.on_manifest = pull_on_manifest_;
  return registry::pull_in_helper(core::libexec_dir() + "/boxlite-pull", images_dir, reference, o);
}

image::LayoutRef LocalRuntime::resolve_registry_image(const std::string& reference, std::string& normalized) {
  registry::ImageStore store(layout_.images());
  auto hit = registry::find_cached(store, reference, registries_);
  registry::PullResult r = hit ? *hit : pull_into(layout_.images(), reference);
  normalized = r.reference;
  return {store.layout_dir(), r.reference};
}

registry::PullResult LocalRuntime::pull_image(const std::string& reference) {
  return pull_into(layout_.images(), reference);
}

std::vector<registry::StoredImage> LocalRuntime::list_images() {
  registry::ImageStore store(layout_.images());
  auto out = store.list();
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.created_ms > b.created_ms; });
  return out;
}

std::vector<std::string> LocalRuntime::remove_image(const std::string& reference_or_id) {
  registry::ImageStore store(layout_.images());
  auto images = store.list();
  std::vector<std::string> refs;
  std::string id = reference_or_id.starts_with("sha256:") ? reference_or_id.substr(7) : reference_or_id;
  if (id.size() >= 4 && is_hex(id)) {
    std::set<std::string> digests;
    for (const auto& i : images) {
      if (i.manifest_digest.compare(7, id.size(), id) == 0) {
        digests.insert(i.manifest_digest);
        refs.push_back(i.reference);
      }
    }
    if (digests.size() > 1)
      throw Error(ErrorKind::InvalidArgument, "image id prefix '" + id + "' is ambiguous: use more digits");
  }
  if (refs.empty()) {
    std::vector<registry::ImageRef> wanted;
    try {
      wanted = registry::candidates(reference_or_id, registries_);
    } catch (const Error&) {
      throw Error(ErrorKind::NotFound, "No such image: " + reference_or_id);
    }
    for (const auto& c : wanted) {
      for (const auto& i : images) {
        if (refs.empty() && i.reference == c.str()) refs.push_back(i.reference);
      }
    }
  }
  if (refs.empty()) throw Error(ErrorKind::NotFound, "No such image: " + reference_or_id);
  for (const auto& r : this->store()->list()) {
    if (std::find(refs.begin(), refs.end(), r.image) != refs.end()) {
      throw Error(ErrorKind::InvalidState, "image " + r.image + " is used by box " + (r.name.empty() ? r.id : r.name) +
                                               ": remove the box first");
    }
  }
  std::set<std::string> released;
  for (const auto& i : images) {
    if (std::find(refs.begin(), refs.end(), i.reference) == refs.end()) continue;
    released.insert(i.manifest_digest.substr(7));
    for (const auto& b : i.blobs) released.insert(b.substr(7));
  }
  store.untag(refs);
  prune_store(false, &released);
  return refs;
}

uint64_t LocalRuntime::prune_images(bool all) { return prune_store(all, nullptr); }

// `only`: restrict the derived caches removed to these digests' (hex) — what an
// image removal just released; nullptr = every one no stored image names.
uint64_t LocalRuntime::prune_store(bool all, const std::set<std::string>* only) {
  registry::ImageStore store(layout_.images());
  std::set<std::string> used_refs;
  std::set<std::string> used_paths;  // ext4 bases and jail layer dirs boxes run on
  for (const auto& r : this->store()->list()) {
    used_refs.insert(r.image);
    try {
      auto spec = engine::read_spec(layout_.box_dir(r.id));
      if (const auto* vm = spec.if_vm()) used_paths.insert(vm->disk_base);
      if (const auto* jail = spec.if_jail()) used_paths.insert(jail->lower_dirs.begin(), jail->lower_dirs.end());
    } catch (const Error&) {
    }
  }
  if (all) {
    std::vector<std::string> unused;
    for (const auto& i : store.list()) {
      if (!used_refs.count(i.reference)) unused.push_back(i.reference);
    }
    store.untag(unused);
  }
  uint64_t freed = store.collect_garbage();
  std::set<std::string> live;
  for (const auto& i : store.list()) {
    live.insert(i.manifest_digest.substr(7));
    for (const auto& b : i.blobs) live.insert(b.substr(7));
  }
  auto removable = [&](const std::string& hex) {
    return is_hex(hex) && !live.count(hex) && (!only || only->count(hex));
  };
  std::string disks = layout_.images() + "/disk-images";
  for (const auto& n : dir_entries(disks)) {
    std::string hex = n.substr(0, n.find('.'));
    // A base a box runs on is never removed, even when its image is gone.
    if (!removable(hex) || used_paths.count(disks + "/" + hex + ".ext4")) continue;
    std::string path = disks + "/" + n;
    freed += file_size(path);
    ::unlink(path.c_str());
  }
  std::string layers = layout_.images() + "/layers";
  for (const auto& n : dir_entries(layers)) {
    std::string path = layers + "/" + n;
    if (n.starts_with(".tmp-")) {
      if (auto locks = layer_build_locks(n)) freed += remove_abandoned_build(path, *locks);
      continue;
    }
    if (!removable(n.substr(0, n.find('-'))) || used_paths.count(path)) continue;
    uint64_t size = disk_usage(path);
    try {
      remove_tree(path);
      freed += size;
    } catch (const Error& e) {
      warn("could not remove the unused layer directory " + path + ": " + e.what());
    }
  }
  // A disk image's build that died (.<hex>.ext4.tmp-*, and the tree it was made
  // from, tmp/unpack-<hex prefix>-*), under its image's lock.
  for (const auto& n : dir_entries(disks)) {
    if (!n.starts_with(".") || n.find(".ext4.tmp-") == std::string::npos) continue;
    std::string hex = n.substr(1, n.find('.', 1) - 1);
    if (!is_hex(hex)) continue;
    freed += remove_abandoned_build(disks + "/" + n, {layout_.locks() + "/image-" + hex + ".lock"});
  }
  for (const auto& n : dir_entries(layout_.tmp())) {
    std::vector<std::string> parts = split(n, '-');
    if (parts.size() != 3 || parts[0] != "unpack" || !is_hex(parts[1])) continue;
    freed += remove_abandoned_build(layout_.tmp() + "/" + n, locks_named("image-" + parts[1], ".lock"));
  }
  // The verified-blob records (rootfs.cpp) of layers neither cached nor stored.
  std::set<std::string> cached;
  for (const auto& n : dir_entries(layers)) cached.insert(n.substr(0, n.find('-')));
  std::string verified = layout_.images() + "/verified";
  for (const auto& hex : dir_entries(verified)) {
    if (is_hex(hex) && !cached.count(hex) && !live.count(hex)) ::unlink((verified + "/" + hex).c_str());
  }
  return freed;
}

// The locks a layer build named `.tmp-<hex prefix>-<offset>-XXXXXX` is made under
// (rootfs::ensure_overlay_layers): every layer-<hex>-<offset>.lock whose hex starts
// so. None for a name of another shape: such a directory is left alone.
std::optional<std::vector<std::string>> LocalRuntime::layer_build_locks(const std::string& tmp_name) const {
  std::vector<std::string> parts = split(tmp_name.substr(5), '-');
  if (parts.size() != 3 || parts[0].empty() || !is_hex(parts[0]) || parts[1].empty() ||
      parts[1].find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return locks_named("layer-" + parts[0], "-" + parts[1] + ".lock");
}

// The lock files of this home whose names start and end so.
std::vector<std::string> LocalRuntime::locks_named(const std::string& prefix, const std::string& suffix) const {
  std::vector<std::string> out;
  for (const auto& l : dir_entries(layout_.locks())) {
    if (l.starts_with(prefix) && l.ends_with(suffix)) out.push_back(layout_.locks() + "/" + l);
  }
  return out;
}

// A build's scratch left by a builder that died (killed mid-unpack): removed once
// none of the locks its builder would hold is held (a live build holds one while
// its scratch exists). Returns what it freed.
uint64_t LocalRuntime::remove_abandoned_build(const std::string& path, const std::vector<std::string>& locks) {
  std::vector<FileLock> held;
  for (const auto& l : locks) {
    FileLock lock = FileLock::try_acquire(l);
    if (!lock.held()) return 0;  // being built now
    held.push_back(std::move(lock));
  }
  uint64_t size = disk_usage(path);
  try {
    remove_tree(path);
    return size;
  } catch (const Error& e) {
    warn("could not remove the abandoned build " + path + ": " + e.what());
    return 0;
  }
}

}  // namespace boxlite
