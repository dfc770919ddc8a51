/*
 * bench_faults - fault injection, long form (tests/integration/
 * fault_run.h): seeded random kills of shards and the coordinator,
 * failovers, registrations racing the engines' history and engine
 * restarts, for minutes, with every listener compared with its rank's
 * truth every few rounds. Prints what it did and the lost, phantom and
 * marked counts; exits non-zero on a phantom or a loss on a listener not
 * marked incomplete.
 *
 *   bench_faults [--seconds S (300)] [--seed N] [--check-every K (4)]
 */
#include <getopt.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>

#include "fault_run.h"

static fault_opts opts = {.seconds = 300, .check_every = 4};

static void
run(void **state)
{
	fault_result r;
	fault_run(*state, &opts, &r);
	fault_print(&opts, &r);
	assert_int_equal(r.phantom, 0);
	assert_int_equal(r.lost, r.lost_marked);
}

int
main(int argc, char **argv)
{
	opts.seed = (unsigned)time(NULL);
	static const struct option longopts[] = {
	    {"seconds", required_argument, NULL, 's'},
	    {"seed", required_argument, NULL, 'r'},
	    {"check-every", required_argument, NULL, 'k'},
	    {NULL, 0, NULL, 0},
	};
	int ch;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			opts.seconds = atoi(optarg);
			break;
		case 'r':
			opts.seed = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'k':
			opts.check_every = atoi(optarg);
			break;
		default:
			fprintf(stderr, "see the comment at the top of "
					"bench_faults.c\n");
			return 2;
		}
	}
	if (opts.seconds <= 0 || opts.check_every <= 0) {
		fprintf(stderr,
			"--seconds and --check-every must be positive\n");
		return 2;
	}
	printf("seed=%u seconds=%d check_every=%d\n", opts.seed, opts.seconds,
	       opts.check_every);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(run, clu_test_setup,
					    clu_test_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
