// What the MPI library does by itself while a rank waits on it (communication layer internal).
#pragma once

namespace mpitron::comm {

/// True when the MPI library gives up the CPU (sched_yield) in every progress call that finds
/// nothing to do: Open MPI's `mpi_yield_when_idle`, which it also turns on by itself when a node
/// runs more ranks than it has cores (`--oversubscribe`). Read once: after MPI_Init under Open
/// MPI from the library's own variable (ompi_mpi_yield_when_idle, looked up by dlsym; the
/// storage of its MPI_T control variable), otherwise through the MPI tool information interface
/// (MPI_T control variable "mpi_yield_when_idle"; MPI-3.0 section 14.3), which works before and
/// after MPI_Init but opens every component of the library to register their variables (0.21-
/// 0.27 s of wall time per rank with Open MPI 4.1). False when the library has no such variable
/// (MPICH) or MPI_T cannot be initialised. Never throws.
bool mpi_yields_when_idle();

}  // namespace mpitron::comm
