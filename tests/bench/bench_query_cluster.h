/*
 * bench_query_cluster.h - the kvindex cluster bench_query and
 * bench_coord measure.
 *
 * kvindex-sim with --pods P of DP=2 (2P listeners) serving the
 * conversation trace (blocks_per_id blocks of block_size tokens per hash
 * id) in a loop, each rank caching its share of the wanted entries plus a
 * quarter; two kvindex-shard processes (--no-sync), listening on
 * tcp://127.0.0.1:PORT or on ipc://DIR/shard-N.ipc; kvindex-coordinator
 * with http_threads loop threads, reading the simulator's layout as its
 * discovery file. Once the coordinator is ready the load runs until the
 * shards hold the wanted (block, listener) entries, then it is paused and
 * the shards are given up to a minute to apply every batch the fleet
 * published (each listener's last_seq in GET /workers equal to its rank's
 * seq in the simulator's status). Logs and data go under dir.
 *
 * The binaries' paths come from CMake (KVI_SIM_BIN, KVI_SHARD_BIN,
 * KVI_COORD_BIN). A bq_cluster is used by one thread.
 */
#ifndef KVI_TESTS_BENCH_QUERY_CLUSTER_H
#define KVI_TESTS_BENCH_QUERY_CLUSTER_H

#include <stdbool.h>
#include <sys/types.h>

#include "error.h"
#include "kvitest.h"

typedef struct bq_cluster_config {
	int pods;
	double entries;
	int http_threads;
	bool ipc; /* shards listen on ipc:// instead of tcp:// */
	const char *trace;
	int block_size, blocks_per_id;
	int fill_timeout_s;
	const char *const *coord_args; /* more coordinator flags, or NULL */
} bq_cluster_config;

typedef struct bq_cluster {
	kvt_sim sim;
	bool sim_up;
	kvt_proc *shard[2];
	kvt_proc *coord;
	int port; /* the coordinator's HTTP port */
	double entries;
	double fill_seconds;
} bq_cluster;

/* bq_cluster_start starts and fills the cluster. Returns KVI_EIO when a
 * process does not start or exits, KVI_ETIMEDOUT when the coordinator is
 * not ready or the fill does not finish in time; the cluster is then
 * stopped. */
kvi_err bq_cluster_start(const bq_cluster_config *cfg, const char *dir,
			 bq_cluster *c);

/* bq_cluster_stop stops every process of c. Idempotent. */
void bq_cluster_stop(bq_cluster *c);

/* bq_cluster_pids writes the coordinator's and both shards' pids. */
void bq_cluster_pids(const bq_cluster *c, pid_t out[3]);

#endif /* KVI_TESTS_BENCH_QUERY_CLUSTER_H */
