/*
 * bench_fleet_kube.h - bench_fleet's pods in a test Kubernetes API server
 * (kvindex-kubeapi, tests/kubeapi), for --source kube: the coordinator
 * lists and watches them as it would a cluster's.
 *
 * Pod p is fleet/pod-p, as the other sources name it, with the same
 * address and port (nothing listens there), label app=engine and the
 * kvindex.io annotations for its model, DP size and block size.
 */
#ifndef KVI_TESTS_BENCH_FLEET_KUBE_H
#define KVI_TESTS_BENCH_FLEET_KUBE_H

#include <stdbool.h>

#include "kvt_kubeapi.h"

/* bfk_start starts the API server, without authentication. */
bool bfk_start(kvt_kube *k);

/* bfk_coord_args appends to av (from *ac on; room for BFK_COORD_ARGS) the
 * coordinator's flags to watch the fleet's pods on k. */
#define BFK_COORD_ARGS 6
void bfk_coord_args(const kvt_kube *k, const char **av, int *ac);

/* bfk_put creates pods [from, to), one PUT each; false on the first that
 * fails. */
bool bfk_put(const kvt_kube *k, int from, int to);

#endif /* KVI_TESTS_BENCH_FLEET_KUBE_H */
