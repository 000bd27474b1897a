#include "comm/mpi_progress.h"

#include <dlfcn.h>
#include <mpi.h>

#include <algorithm>
#include <array>

namespace mpitron::comm {

namespace {

// The boolean or integer control variable `name`, or false when it does not exist or has
// another type.
bool read_flag(const char* name) {
  int index = 0;
  if (MPI_T_cvar_get_index(name, &index) != MPI_SUCCESS) return false;
  std::array<char, 256> text{};
  int text_length = static_cast<int>(text.size());
  std::array<char, 1024> description{};
  int description_length = static_cast<int>(description.size());
  int verbosity = 0, binding = 0, scope = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_T_enum enumtype = MPI_T_ENUM_NULL;
  if (MPI_T_cvar_get_info(index, text.data(), &text_length, &verbosity, &type, &enumtype,
                          description.data(), &description_length, &binding,
                          &scope) != MPI_SUCCESS ||
      (type != MPI_C_BOOL && type != MPI_INT && type != MPI_UNSIGNED)) {
    return false;
  }
  MPI_T_cvar_handle handle = MPI_T_CVAR_HANDLE_NULL;
  int count = 0;
  if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) != MPI_SUCCESS) return false;
  alignas(8) std::array<unsigned char, 16> value{};  // large enough for any of the three types
  const bool read = count == 1 && MPI_T_cvar_read(handle, value.data()) == MPI_SUCCESS;
  MPI_T_cvar_handle_free(&handle);
  return read && std::any_of(value.begin(), value.end(), [](unsigned char b) { return b != 0; });
}

// Open MPI's own copy of the setting, where the library exports it (libmpi's
// ompi_mpi_yield_when_idle, the storage its MPI_T control variable reads, final once MPI_Init has
// applied the automatic setting of an oversubscribed node), or nullptr.
const bool* open_mpi_setting() {
#if defined(OPEN_MPI)
  int initialized = 0;
  if (MPI_Initialized(&initialized) != MPI_SUCCESS || !initialized) return nullptr;
  return static_cast<const bool*>(dlsym(RTLD_DEFAULT, "ompi_mpi_yield_when_idle"));
#else
  return nullptr;
#endif
}

bool query() {
  if (const bool* setting = open_mpi_setting()) return *setting;
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return false;
  const bool yields = read_flag("mpi_yield_when_idle");
  MPI_T_finalize();
  return yields;
}

}  // namespace

bool mpi_yields_when_idle() {
  static const bool yields = query();
  return yields;
}

}  // namespace mpitron::comm
