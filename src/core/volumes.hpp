// Volumes: validation of the documented forms and their mapping to VolumeSpec.
// The engines' side (virtio-9p, bind mounts) is in engine/; docs/storage.md.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "boxlite/options.hpp"

namespace boxlite {

// Checks one volume; throws Error(InvalidArgument) with the documented messages
// ("Invalid mount path '...' (must be absolute)", "(cannot mount to system
// directory)", ...). The host path must exist and be a directory.
void validate_volume(const VolumeSpec& v);

// Checks a box's volumes: each one, and no two on the same guest path.
void validate_volumes(const std::vector<VolumeSpec>& volumes);

// The CLI form host:guest[:ro|:rw].
VolumeSpec parse_volume_flag(const std::string& flag);

// The SDK forms as JSON (REST, C API, bindings): an array [host, guest] or
// [host, guest, read_only] (a bool), or an object {host|host_path, guest|guest_path,
// read_only|ro}. Errors carry the documented messages ("volumes tuples must be
// (host, guest[, read_only])", "volume dict missing host/host_path",
// "argument 'volumes': 'str' object cannot be cast as 'bool'").
VolumeSpec volume_from_json(const nlohmann::json& j);

}  // namespace boxlite
