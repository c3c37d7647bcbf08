// A kept box's row, copied into its directory (`record.json`) once the row is
// committed. The store is the box's record; the copy only tells a box whose row was
// lost with the database (replaced, truncated, deleted) from the debris of a create
// that died before its row, and lets the runtime record that box again instead of
// sweeping it as half-made (Runtime::sweep_half_made_boxes, docs/storage.md). An
// auto_remove box gets no copy: it is on its way out whenever its row is gone.
#pragma once

#include <string>

#include "store/store.hpp"

namespace boxlite::core {

inline constexpr const char* kRecordCopyFile = "record.json";

// Writes the copy of a kept box's row (nothing for an auto_remove one). Best effort:
// the box is recorded either way; without the copy a lost row means a swept box, as
// before the copy existed.
void keep_record_copy(const std::string& box_dir, const store::BoxRecord& r) noexcept;

// Removes the copy before the row goes, so that a removal interrupted between the
// two is finished by the sweep rather than undone by it.
void drop_record_copy(const std::string& box_dir) noexcept;

bool has_record_copy(const std::string& box_dir);

// The row as copied, made a stopped box's: nothing of the box runs when its row is
// recorded again (a box with a live shim is never swept). Throws Error (Storage) if
// the copy cannot be read or is not one.
store::BoxRecord read_record_copy(const std::string& box_dir);

}  // namespace boxlite::core
