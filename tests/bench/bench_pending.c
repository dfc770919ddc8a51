/*
 * bench_pending.c - what pending entries cost the shard, per block: making
 * routed requests pending, a query's walk along them, and the sweep that
 * ends them once expired (shard/pending/pending.h), at the size a busy
 * shard holds.
 *
 * --requests routed requests of --blocks fresh blocks each, spread over
 * --listeners listeners, are made pending; then, --rounds times: as many
 * again (the previous round's have expired by then), a walk along each
 * of them, and a sweep of the round before (half of what is there). The
 * best round is printed, in nanoseconds per block (per entry for the
 * sweep); then a last sweep of everything at once, as after a burst.
 *
 *   bench_pending [--requests 500] [--blocks 1000] [--listeners 40]
 *                 [--rounds 6]
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc.h"
#include "clock.h"
#include "pending.h"

static uint64_t rng = 88172645463325252ull;

static uint64_t
next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double
min_of(double a, double b)
{
	return a < b ? a : b;
}

int
main(int argc, char **argv)
{
	long requests = 500, blocks = 1000, listeners = 40, rounds = 6;
	static const struct option opts[] = {
	    {"requests", required_argument, NULL, 'r'},
	    {"blocks", required_argument, NULL, 'b'},
	    {"listeners", required_argument, NULL, 'l'},
	    {"rounds", required_argument, NULL, 'n'},
	    {NULL, 0, NULL, 0},
	};
	int o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		long v = optarg != NULL ? atol(optarg) : 0;
		switch (o) {
		case 'r':
			requests = v;
			break;
		case 'b':
			blocks = v;
			break;
		case 'l':
			listeners = v;
			break;
		case 'n':
			rounds = v;
			break;
		default:
			fprintf(stderr, "usage: bench_pending [--requests N] "
					"[--blocks N] [--listeners N] "
					"[--rounds N]\n");
			return 2;
		}
	}
	if (requests < 1 || blocks < 1 || listeners < 1 || rounds < 1) {
		fprintf(stderr, "bench_pending: every figure must be >= 1\n");
		return 2;
	}
	size_t per = (size_t)requests * (size_t)blocks;
	/* room for two rounds at once: the bounds never evict */
	kvd_pending *p = kvd_pending_alloc(
	    &(kvd_config){.max_entries = 4 * per, .max_per_listener = 4 * per});
	uint64_t *seq = kvi_calloc(2 * per, sizeof(*seq));
	for (size_t i = 0; i < 2 * per; i++) {
		seq[i] = next();
	}
	const uint32_t ttl = 1000;
	int64_t now = 1000;
	for (long r = 0; r < requests; r++) {
		kvd_add(p, (uint32_t)(r % listeners), seq + (size_t)r * blocks,
			(size_t)blocks, now, ttl);
	}
	double best_add = 1e30, best_walk = 1e30, best_sweep = 1e30;
	size_t walked = 0;
	for (long round = 0; round < rounds; round++) {
		const uint64_t *s = seq + (round % 2 == 0 ? per : 0);
		now += 2 * ttl;
		double t0 = kvi_now_s();
		for (long r = 0; r < requests; r++) {
			kvd_add(p, (uint32_t)(r % listeners),
				s + (size_t)r * blocks, (size_t)blocks, now,
				ttl);
		}
		double t1 = kvi_now_s();
		kvd_read_begin(p);
		for (long r = 0; r < requests; r++) {
			walked += kvd_extend(p, (uint32_t)(r % listeners),
					     s + (size_t)r * blocks, 0,
					     (size_t)blocks, now);
		}
		kvd_read_end(p);
		double t2 = kvi_now_s();
		size_t swept = kvd_sweep(p, now);
		double t3 = kvi_now_s();
		best_add = min_of(best_add, (t1 - t0) / (double)per);
		best_walk = min_of(best_walk, (t2 - t1) / (double)per);
		if (swept > 0) {
			best_sweep =
			    min_of(best_sweep, (t3 - t2) / (double)swept);
		}
	}
	/* then everything at once, as after a burst */
	now += 2 * ttl;
	double t4 = kvi_now_s();
	size_t all = kvd_sweep(p, now);
	double sweep_all = all > 0 ? (kvi_now_s() - t4) / (double)all : 0;
	if (walked != (size_t)rounds * per) {
		fprintf(stderr, "bench_pending: walked %zu blocks, not %zu\n",
			walked, (size_t)rounds * per);
		return 1;
	}
	printf("bench_pending: %ld requests of %ld blocks over %ld listeners "
	       "(%zu entries live at the peak), best of %ld rounds\n",
	       requests, blocks, listeners, 2 * per, rounds);
	printf("add    %7.1f ns/block\n", best_add * 1e9);
	printf("walk   %7.1f ns/block\n", best_walk * 1e9);
	printf("sweep  %7.1f ns/entry (half of the entries expired)\n",
	       best_sweep < 1e30 ? best_sweep * 1e9 : 0.0);
	printf("sweep  %7.1f ns/entry (all of them, %zu)\n", sweep_all * 1e9,
	       all);
	kvi_free(seq);
	kvd_pending_free(p);
	return 0;
}
