/*
 * osu-compat/compute.h: the compute phase osu_iallreduce puts between starting the
 * allreduce and waiting for it, as OMB's: a small floating-point kernel run again and
 * again until its own run time reaches the target, and, with -t, that time split into
 * equal parts with one MPI_Test after each.
 */
#ifndef OSUC_COMPUTE_H
#define OSUC_COMPUTE_H

#include <mpi.h>

/* Computes for about seconds (probes = 0), or for seconds / probes then MPI_Test on
 * *req, probes times. Returns the seconds spent in MPI_Test. */
double osuc_compute(double seconds, int probes, MPI_Request *req);

#endif
