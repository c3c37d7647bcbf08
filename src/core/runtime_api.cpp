// The public Runtime (boxlite/runtime.hpp): each call is the local runtime's.
#include <mutex>

#include "boxlite/runtime.hpp"
#include "core/runtime.hpp"
#include "store/store.hpp"

namespace boxlite {

Runtime::Runtime(RuntimeOptions opts) : impl_(std::make_shared<LocalRuntime>(std::move(opts))) {}
Runtime::~Runtime() = default;

std::shared_ptr<Runtime> Runtime::default_runtime() {
  static std::mutex mu;
  static std::shared_ptr<Runtime> instance;
  std::lock_guard lk(mu);
  if (!instance) instance = std::make_shared<Runtime>(RuntimeOptions{.home_dir = "", .exclusive = true});
  return instance;
}

const std::string& Runtime::home() const { return impl_->home(); }

std::shared_ptr<Box> Runtime::create(const BoxOptions& opts, const std::string& name) {
  return impl_->create(opts, name);
}
std::shared_ptr<Box> Runtime::create_to_start(const BoxOptions& opts, const std::string& name) {
  return impl_->create_to_start(opts, name);
}
std::shared_ptr<Box> Runtime::attach(const std::string& id) { return impl_->attach(id); }
std::pair<std::shared_ptr<Box>, bool> Runtime::get_or_create(const BoxOptions& opts, const std::string& name) {
  return impl_->get_or_create(opts, name);
}
std::shared_ptr<Box> Runtime::get(const std::string& id_or_name) { return impl_->get(id_or_name); }
Error Runtime::no_such_box(const std::string& id_or_name) { return impl_->no_such_box(id_or_name); }
BoxInfo Runtime::get_info(const std::string& id_or_name) { return impl_->get_info(id_or_name); }
std::vector<BoxInfo> Runtime::list_info() { return impl_->list_info(); }
void Runtime::remove(const std::string& id_or_name, bool force) { impl_->remove(id_or_name, force); }
void Runtime::prepare_remove(const std::string& id, bool force) { impl_->prepare_remove(id, force); }
void Runtime::shutdown(std::optional<double> timeout_secs) { impl_->shutdown(timeout_secs); }

std::shared_ptr<Box> Runtime::clone_box(Box& source, const std::string& name, bool detach) {
  return impl_->clone_box(local(source), name, detach);
}
std::string Runtime::export_box(Box& box, const std::string& dest_dir) {
  return impl_->export_box(local(box), dest_dir);
}
std::shared_ptr<Box> Runtime::import_box(const std::string& path, const std::string& name, bool detach) {
  return impl_->import_box(path, name, detach);
}

HostInfo Runtime::host_info() { return impl_->host_info(); }
RuntimeMetrics Runtime::metrics() { return impl_->metrics(); }

PullResult Runtime::pull_image(const std::string& reference) { return impl_->pull_image(reference); }
std::vector<ImageInfo> Runtime::list_images() { return impl_->list_images(); }
std::vector<std::string> Runtime::remove_image(const std::string& reference_or_id) {
  return impl_->remove_image(reference_or_id);
}
uint64_t Runtime::prune_images(bool all) { return impl_->prune_images(all); }
void Runtime::set_pull_observer(std::function<void(const std::string&, const std::vector<LayerProgress>&)> on_manifest,
                                std::function<void(const LayerProgress&)> on_progress) {
  impl_->set_pull_observer(std::move(on_manifest), std::move(on_progress));
}
const std::vector<ImageRegistry>& Runtime::image_registries() const { return impl_->image_registries(); }
void Runtime::set_warning_sink(std::function<void(const std::string&)> sink) {
  impl_->set_warning_sink(std::move(sink));
}

void zero_wal_index_instead_of_truncating() { store::zero_wal_index_instead_of_truncating(); }

}  // namespace boxlite
