/*
 * fault_run.h - fault injection against a whole cluster, checked against
 * the engines' truth.
 *
 * A run starts the simulator (PODS pods of DP 2 serving the conversation
 * trace, with a CPU tier), two shards and a coordinator that learns its
 * pods only from POST /register, and then, round after round, with the
 * engines running, does one seeded random thing:
 *
 *   kill -9 a shard, the coordinator, or both, and restart them a random
 *   while later;
 *   kill -9 a shard and keep it down past the failover grace, so that its
 *   listeners are rebuilt on the other shard, then bring it back;
 *   register a pod not registered yet - its engine has history by then -
 *   or unregister one;
 *   restart an engine rank (seq back to 0, cache emptied), sometimes while
 *   the shard that owns it is down.
 *
 * Half the pods are registered with their replay socket and /kv_recover,
 * half without (vLLM's default: a gap there cannot be repaired). Every
 * few rounds the engines pause, each listener's rank publishes one more
 * batch (so that a listener behind an engine it cannot repair learns of
 * the gap), and every registered listener is compared, on the shard that
 * owns it, with its rank's truth: (block, tier) pairs lost and phantom,
 * and whether the listener is marked incomplete. A phantom, or a loss on
 * a listener not marked, fails the run.
 *
 * Helpers fail the running cmocka test. Single-threaded.
 */
#ifndef KVI_TESTS_FAULT_RUN_H
#define KVI_TESTS_FAULT_RUN_H

#include <stdbool.h>
#include <stddef.h>

#include "coord_check.h"

typedef struct fault_opts {
	unsigned seed;
	int rounds;      /* stop after this many rounds, */
	int seconds;     /* or this long (0: rounds only) */
	int check_every; /* rounds between comparisons with the truth */
} fault_opts;

/* What a run did and found. */
typedef struct fault_result {
	int rounds, checks;
	int kills_shard, kills_coord, kills_both, failovers;
	int registrations, unregistrations, engine_restarts;
	size_t listeners_checked; /* summed over the checks */
	size_t lost, phantom;     /* (block, tier) pairs, summed */
	size_t marked;            /* listeners marked incomplete, summed */
	size_t lost_marked;       /* of lost: on marked listeners */
} fault_result;

/* fault_run runs o's rounds on the zeroed cluster c (coord_check.h's
 * clu_test_setup) and writes what happened into out. It fails the test on
 * a phantom, a loss on a listener not marked incomplete, or a cluster that
 * does not settle. */
void fault_run(cluster *c, const fault_opts *o, fault_result *out);

/* fault_print prints out as one line of key=value figures. */
void fault_print(const fault_opts *o, const fault_result *r);

#endif /* KVI_TESTS_FAULT_RUN_H */
