#include "engine/engine.hpp"

#include "engine/jail/jail_engine.hpp"
#include "engine/vm/vm_engine.hpp"

namespace boxlite::engine {

std::unique_ptr<Engine> make_engine(const ShimSpec& spec, jail::Zygote zygote) {
  switch (spec.engine()) {
    case EngineKind::Vm:
      zygote.release();  // a VM box has no init of ours
      return vm::make_vm_engine(spec);
    case EngineKind::Jail: return jail::make_jail_engine(spec, std::move(zygote));
  }
  return vm::make_vm_engine(spec);
}

std::unique_ptr<Engine> make_engine(EngineKind kind, const std::string& box_id) {
  ShimSpec spec;
  spec.set_engine(kind);
  spec.box_id = box_id;
  return make_engine(spec);
}

}  // namespace boxlite::engine
