/*
 * bench_fleet.h - what bench_fleet's parts share: the fleet being
 * registered, and the simulated engines beside it whose prompt the query
 * figures match (bench_fleet_sim.c).
 */
#ifndef KVI_TESTS_BENCH_FLEET_H
#define KVI_TESTS_BENCH_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "bench_fleet_cpu.h"
#include "kvitest.h"

#define TENTHS 10
/* Simulated engines beside the fleet: 4 pods of DP 2 whose 8 ranks all
 * hold one 100-block prompt (tokens from MATCH_BASE on), for queries that
 * match 8 listeners; the fleet's queries (tokens from NONE_BASE) match
 * none. */
#define SIM_PODS   4
#define SIM_RANKS  (2 * SIM_PODS)
#define MATCH_BASE 500000
#define NONE_BASE  1000
#define PROMPT     1600 /* tokens: 100 blocks of 16 */

typedef struct fleet {
	int pods, clients;
	bool sync;
	int idle_wait;
	const char *reconnect_max;
	const char *probe_rate;
	const char *plot;
	const char *file; /* --source file: the discovery file */
	kvt_sim sim;      /* the simulated engines */
	int extra_pods;   /* pods beside the fleet's: the simulator's */
	char base[64];
	_Atomic int next;
	double *took;    /* seconds each registration took, by pod */
	double *done_at; /* when it was answered, from t0 */
	_Atomic int failed;
	double t0;
	int first;             /* pods registered before the clients start */
	pid_t pids[BFC_PROCS]; /* shard-0, shard-1, the coordinator */
	char metrics[2][32];   /* the shards' /metrics addresses */
} fleet;

/* bf_now_s returns kvt_now_ms() in seconds. */
double bf_now_s(void);
int bf_cmp_double(const void *a, const void *b);
/* bf_metric reads one unlabelled sample of the coordinator's /metrics at
 * base (-1: absent). */
double bf_metric(const char *base, const char *name);
/* bf_wait_assigned waits (a minute at most) until the coordinator has n
 * of the fleet's pods (and the simulator's) and every listener assigned;
 * the seconds it took, or -1. */
double bf_wait_assigned(const fleet *f, int n);

/* bench_fleet_sim.c */

/* bf_sim_join starts the simulated engines, registers their pods and
 * prefills every rank with the prompt from MATCH_BASE on, and waits until
 * a query of it names all 8 listeners; false when that fails. */
bool bf_sim_join(fleet *f);
/* bf_query_cost times QUERIES 100-block queries of model m for the prompt
 * from base on, one after the other, into p50 and p99 (ms); false when
 * one failed or an answer did not name `want` listeners. */
#define QUERIES 500
bool bf_query_cost(const fleet *f, int base, size_t want, double *p50,
		   double *p99);

#endif /* KVI_TESTS_BENCH_FLEET_H */
