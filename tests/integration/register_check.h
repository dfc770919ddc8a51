/*
 * register_check.h - what the tests of registration over HTTP
 * (test_coord_register.c, test_coord_register_shard_down.c) share, on top
 * of coord_check.h.
 *
 * Bodies for POST /register of the simulator's pods, the coordinator's
 * answers and its /workers, what each shard owns (asked over nng) compared
 * with what /workers says, and /query answers awaited until a prefill shows
 * up on one (instance, rank). Tokens are NTOK long, four blocks of 16.
 * Helpers fail the running test through cmocka. Single-threaded.
 */
#ifndef KVI_TESTS_REGISTER_CHECK_H
#define KVI_TESTS_REGISTER_CHECK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coord_check.h"

#define NTOK 64 /* four blocks */

/* make_tokens writes NTOK tokens into t, different for each seed. */
void make_tokens(uint32_t *t, uint32_t seed);

/* dump returns j as compact JSON for a message, in a static buffer valid
 * until the next call. */
char *dump(const json_t *j);

/* post_expect posts body to path and fails unless the status is want;
 * returns the JSON answer (the caller frees it). */
json_t *post_expect(cluster *c, const char *path, const char *body, long want);

/* error_has checks that the answer is {"error": "..."} naming word. */
void error_has(const json_t *j, const char *word);

/* pod_body writes the per-pod /register body of the simulator's pod p
 * under name, with the ports of pod port_pod. */
void pod_body(cluster *c, char *buf, size_t len, const char *name, int port_pod,
	      int block_size);

/* pod_name writes "sim/pod-<p>". */
void pod_name(int p, char *buf, size_t len);

/* workers returns /workers (the caller frees it). */
json_t *workers(cluster *c);

/* pod_id writes the instance id of the simulator's pod p, in decimal. */
void pod_id(int p, char *buf, size_t len);

/* shard_keys returns {key: state} of every listener shard s owns, asked
 * over nng. */
json_t *shard_keys(shardproc *s);

/* owned_by_any says whether a live shard owns key. */
bool owned_by_any(cluster *c, const char *key, int *which);

/* wait_owners waits until every shard owns exactly what /workers
 * attributes to it, and every listener has a shard when all_assigned. */
void wait_owners(cluster *c, bool all_assigned);

/* match_of returns the /query worker entry of (instance id, rank). */
const json_t *match_of(const json_t *ans, const char *id, int rank);

/* wait_match waits until /query for tokens matches every block on
 * (instance id, rank), names it best and matches nothing else; returns
 * the answer. */
json_t *wait_match(cluster *c, const uint32_t *tokens, const char *id,
		   int rank);

/* n_workers returns how many instances /workers lists. */
int n_workers(cluster *c);

#endif /* KVI_TESTS_REGISTER_CHECK_H */
