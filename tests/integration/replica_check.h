/*
 * replica_check.h - several coordinator replicas over the same shards and
 * engines, electing a leader with a Lease of the test API server
 * (tests/kubeapi), with short durations (lease 3 s, renew deadline 2 s,
 * retry 0.5 s), for test_coord_replicas and test_coord_replicas_state.
 *
 * The discovery file is the simulator's layout, written by the test with
 * fewer pods than the simulator runs, so that a pod can appear.
 */
#ifndef KVI_TESTS_REPLICA_CHECK_H
#define KVI_TESTS_REPLICA_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coord_check.h"
#include "kvt_kubeapi.h"

#define PODS      4 /* the simulator's: the file lists FILE_PODS at first, */
#define FILE_PODS 2 /* then one more; the last pod registers over HTTP */
#define DP        2
#define NTOK      64
#define LEASE_MS  3000
#define RETRY_MS  500
#define MAX_REPS  3

typedef struct replica {
	kvt_proc *proc;
	int port;
	char base[64];
	char *log, *store;
	char identity[16];
} replica;

typedef struct world {
	cluster c;
	kvt_kube kube;
	bool kube_started;
	char *dfile;
	replica r[MAX_REPS];
	int n;
	const char *extra[8]; /* more flags of every replica */
} world;

/* write_dfile writes the layout with its first pods pods. */
void write_dfile(world *w, int pods);

/* rep_start starts replica i (again, with the same identity and store,
 * when it ran before) on a port of the kernel's choice, which it reads
 * from the replica's log into r->port and r->base, and waits until it
 * answers /health. */
void rep_start(world *w, int i);

/* world_led starts the test API server, the simulator, two shards and
 * replicas replicas, with the first FILE_PODS pods in the file, waits for
 * a leader and for those pods to be active, and returns the leader.
 * world_led_with gives every replica the extra flags too (up to 7,
 * NULL-terminated; they must outlive the world). */
int world_led(world *w, int replicas);
int world_led_with(world *w, int replicas, const char *const *extra);

/* world_halt stops what runs and returns a replica that exited with an
 * error (a leak under ASan), or -1. Safe to call twice. */
int world_halt(world *w);

/* world_stop is world_halt at the end of a test: a replica that did not
 * exit cleanly fails it. */
void world_stop(world *w);

/* rep_kill kills replica i with SIGKILL. */
void rep_kill(world *w, int i);

/* on points the cluster's HTTP helpers at replica i. */
cluster *on(world *w, int i);

/* leader returns the replica every live one names as leader, at the URL
 * it serves on, the one that says it leads, waiting up to ms; -1 when
 * there is none. */
int leader(world *w, int ms);

/* tokens writes the NTOK tokens of rank idx's prompt of round round. */
void tokens(uint32_t *t, int idx, int round);

/* matched returns the tokens replica i's /query of t matched on rank
 * idx. */
long matched(world *w, int i, const uint32_t *t, int idx);

/* prefill_and_check prefills a prompt on each rank idx[0..n) and waits
 * until every live replica finds each on its rank alone. */
void prefill_and_check(world *w, const int *idx, int n, int round);

/* reg_body writes the /register body of the simulator's pod. */
void reg_body(world *w, int pod, char *body, size_t len);

/* by_hash_is_query checks that replica i's /query_by_hash of rank idx's
 * prompt (round 1) scores as its /query does, on that rank alone. */
void by_hash_is_query(world *w, int i, int idx);

/* shard_of returns the shard index owning rank idx per replica i. */
int shard_of(world *w, int i, int idx);

/* move_to moves rank idx to shard-`to` over replica i's admin API (which
 * pins it there). */
void move_to(world *w, int i, int idx, int to);

/* wait_shard waits until replica i sees rank idx active on shard-`to`. */
void wait_shard(world *w, int i, int idx, int to);

/* workers_has says whether replica i's /workers lists pod name. */
bool workers_has(world *w, int i, const char *name);

/* cmocka's setup and teardown: a world, halted after a failure. */
int rep_setup(void **state);
int rep_teardown(void **state);

#endif /* KVI_TESTS_REPLICA_CHECK_H */
