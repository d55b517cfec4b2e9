"""Running a training run on a Ray cluster (`cluster.backend: ray`). Nothing here is imported by
the local backend; every module imports ray itself."""
