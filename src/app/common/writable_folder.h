// Whether a folder takes new files: checked by creating one, since access(W_OK) is always true
// for root, also where the file system refuses (sysfs, a read-only bind mount seen as writable).
#pragma once

#include <filesystem>
#include <string>

namespace mpitron::app {

/// "" when a file can be created in `folder` (an empty probe file, named for this process, is
/// created and removed), else the reason ("No such file or directory", "Permission denied",
/// ...). Never throws.
std::string folder_write_error(const std::filesystem::path& folder);

}  // namespace mpitron::app
