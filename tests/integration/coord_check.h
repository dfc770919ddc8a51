/*
 * coord_check.h - cmocka checks for tests that run a whole cluster: the
 * engine simulator, real kvindex-shard processes and a real
 * kvindex-coordinator, all on loopback with ephemeral ports.
 *
 * The coordinator is given the shards as --shards shard-0=...,shard-1=...,
 * a query deadline of 2 s (a test of the deadline gives its own) and,
 * unless told otherwise, the simulator's layout file as its
 * --discovery-file. Tests talk to it over HTTP, to the shards over nng
 * (shard_check.h) and to the simulator over its control API, and compare
 * the coordinator's answers with a brute-force scan of the simulator's
 * ground truth.
 *
 * Helpers fail the running test on transport errors. Single-threaded.
 */
#ifndef KVI_TESTS_COORD_CHECK_H
#define KVI_TESTS_COORD_CHECK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shard_check.h"

#define CLU_MAX_SHARDS 4
#define CLU_WAIT_MS    30000

typedef struct cluster {
	kvt_sim sim;
	bool sim_started;
	shardproc shards[CLU_MAX_SHARDS];
	int n_shards;
	char *dir; /* coordinator: data/, coord.log */
	char *data_dir;
	char *log_path;
	int port;      /* HTTP, as bound at the coordinator's last start */
	char base[64]; /* "http://127.0.0.1:port" */
	kvt_proc *coord;
	const char *coord_extra[32];
	bool with_file;
} cluster;

/* clu_sim starts the simulator with --block-size 16 and the extra flags. */
void clu_sim(cluster *c, const char *const *extra);

/* clu_shards starts n shards (shard_check.h), ids shard-0..n-1. */
void clu_shards(cluster *c, int n);
/* clu_shards_with does the same with extra flags (NULL-terminated). */
void clu_shards_with(cluster *c, int n, const char *const *extra);

/* clu_coord starts the coordinator with the extra flags (NULL-terminated,
 * copied), the simulator's layout as discovery file when with_file, and
 * waits until /health answers. */
void clu_coord(cluster *c, bool with_file, const char *const *extra);

/* clu_coord_restart stops the coordinator (SIGTERM) and starts it again
 * with the same flags and directory (its HTTP port is chosen anew: port
 * and base change). */
void clu_coord_restart(cluster *c);

/* clu_coord_kill9 kills the coordinator with SIGKILL (and reaps it);
 * clu_coord_relaunch starts it again as it was, and waits for /health. */
void clu_coord_kill9(cluster *c);
void clu_coord_relaunch(cluster *c);

/* clu_cleanup stops everything and removes the directories. */
void clu_cleanup(cluster *c);

/* cmocka setup and teardown of a test that gets a zeroed cluster in
 * *state and has it cleaned up afterwards, however it ended. */
int clu_test_setup(void **state);
int clu_test_teardown(void **state);

/* clu_sigstop stops process pid (SIGSTOP) and waits until every one of
 * its threads is stopped: kill() returns before a busy process has. */
void clu_sigstop(pid_t pid);

/* clu_get / clu_post return the parsed JSON body (NULL if not JSON) and
 * write the status. The caller json_decref()s the result. */
json_t *clu_get(cluster *c, const char *path, long *status);
json_t *clu_post(cluster *c, const char *path, const char *body, long *status);

/* clu_post_raw returns the whole response (kvt_http_resp_fini). */
void clu_post_raw(cluster *c, const char *path, const char *body,
		  kvt_http_resp *out);

/* clu_wait_active waits until /workers lists exactly n listeners, all
 * active; fails the test with the last /workers otherwise. */
void clu_wait_active(cluster *c, int n, int timeout_ms);

/* clu_listener returns /workers' listener object of (pod name, rank) in
 * *workers (the caller frees *workers) or NULL. */
json_t *clu_listener(cluster *c, const char *pod, int rank, json_t **workers);

/* clu_shard_of returns the shard /workers says owns rank `rank` of
 * sim/pod-`pod`. */
shardproc *clu_shard_of(cluster *c, int pod, int rank);

/* clu_score returns what the /query answer ans scores for rank idx of
 * the simulator (dp ranks a pod), in tokens; 0 when it names none. */
long clu_score(const json_t *ans, int idx, int dp);

/* clu_rank_on returns the first of the simulator's ranks (0..ranks, dp a
 * pod) that shard k owns, or -1. */
int clu_rank_on(cluster *c, int k, int ranks, int dp);

/* clu_admin sends an admin request (body may be NULL), checks that a
 * refusal says why, and returns the status; *out (may be NULL) gets the
 * parsed body, which the caller json_decref()s. */
long clu_admin(cluster *c, const char *method, const char *path,
	       const char *body, json_t **out);

/* clu_shard_status_is says whether /admin/shards gives shard id status
 * (NULL: lists it at all). */
bool clu_shard_status_is(cluster *c, const char *id, const char *status);

/* clu_moves_busy counts the moves /admin/moves lists as not done, and
 * gives the list as JSON text in *dump (may be NULL; free()). */
size_t clu_moves_busy(cluster *c, char **dump);

/* clu_wait_converged waits until a dry-run rebalance lists no move,
 * /admin/moves lists none in flight (an old owner releasing included),
 * and /workers lists n listeners, all active. */
void clu_wait_converged(cluster *c, int n);

/* clu_metric reads one sample of the coordinator's /metrics (-1:
 * absent). */
double clu_metric(cluster *c, const char *sample);

/* clu_owner_map returns /workers as {"pod#rank": "shard"} (json_decref). */
json_t *clu_owner_map(cluster *c);

/* clu_sim_load_done says whether the simulator's load has finished (arg:
 * the cluster), for kvt_wait_until. */
bool clu_sim_load_done(void *arg);

/* clu_sim_post posts to the simulator's control API; fails unless 200. */
json_t *clu_sim_post(cluster *c, const char *path, const char *body);

/* clu_prefill runs a request of the given tokens on (pod, rank). */
void clu_prefill(cluster *c, int pod, int rank, const uint32_t *tokens,
		 size_t n);

/* clu_instance_id returns the instance id of the simulator's pod p. */
uint64_t clu_instance_id(int pod);

/* clu_tokens_seeded writes n pseudo-random token ids, the same for the
 * same seed, different for another; clu_tokens_text returns tokens as a
 * JSON array's text (free()). */
void clu_tokens_seeded(uint32_t *t, size_t n, uint32_t seed);
char *clu_tokens_text(const uint32_t *tokens, size_t n);

/* clu_worker returns the entry of an answer's workers for (sim/pod-pod,
 * dp_rank rank), borrowed from ans, or NULL (coord_truth.c). */
json_t *clu_worker(const json_t *ans, int pod, int rank);

/* clu_query_packed posts a /query for tokens in the packed form
 * (docs/api.md#compact-request-bodies), with params after model_name
 * (e.g. "top_k=2"; NULL: none), and returns the answer's text (kvi_free),
 * failing the test unless it is a 200. */
char *clu_query_packed(cluster *c, const uint32_t *tokens, size_t n,
		       const char *params);

/* clu_query posts a /query for tokens (with extra JSON fields, e.g.
 * "\"dp_rank\": 1", or NULL) and returns the answer; fails unless 200. */
json_t *clu_query(cluster *c, const uint32_t *tokens, size_t n,
		  const char *extra);

/* One listener's expected match, computed from the simulator's truth. */
typedef struct clu_expect {
	int pod, rank;
	uint32_t gpu, cpu, disk, longest; /* blocks */
} clu_expect;

/* Ground truth of every rank at one instant: seq hash -> tier bits. */
typedef struct clu_truth clu_truth;

/* clu_truth_get reads /truth of every rank of the simulator. */
clu_truth *clu_truth_get(cluster *c);
void clu_truth_free(clu_truth *t);

/* clu_truth_match writes into out (room for every rank) the listeners
 * with a match for the sequence hashes seq[0..n), as the index scores
 * them, and returns how many. */
int clu_truth_match(const clu_truth *t, const uint64_t *seq, size_t n,
		    clu_expect *out);

/* clu_seq_hashes hashes tokens (block size 16, default seed) into seq
 * hashes; returns the number of blocks. */
size_t clu_seq_hashes(const uint32_t *tokens, size_t n, uint64_t *out);

/* clu_check_answer compares a /query answer with the expected matches
 * (tokens = blocks * 16); on a difference it writes it to why. */
bool clu_check_answer(const json_t *ans, const clu_expect *exp, int n_exp,
		      char *why, size_t len);

#endif /* KVI_TESTS_COORD_CHECK_H */
