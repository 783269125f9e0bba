// The MPI communicators of a Cluster, for the files of src/dist that call MPI. Internal to
// the module: nothing outside it includes <mpi.h>.
#pragma once

#include <mpi.h>

#include "dist/cluster.h"

namespace pagoda {

struct Cluster::Handles {
  MPI_Comm world = MPI_COMM_NULL;  // a duplicate of MPI_COMM_WORLD, errors returned
  MPI_Comm stage = MPI_COMM_NULL;  // this rank's tensor-parallel group, ranked by tensor rank
};

}  // namespace pagoda
