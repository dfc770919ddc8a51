/*
 * test_coord_faults.c - fault injection, short form (fault_run.h): twelve
 * seeded random rounds of kills, failovers, registrations racing the
 * engines' history and engine restarts, with the listeners compared with
 * their ranks' truth every fourth round and at the end. No phantom, and
 * no loss on a listener not marked incomplete.
 *
 * The seed is printed; KVI_FAULT_SEED replays one. bench_faults runs the
 * same for minutes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>

#include "fault_run.h"

static void
test_faults(void **state)
{
	cluster *c = *state;
	const char *env = getenv("KVI_FAULT_SEED");
	fault_opts o = {
	    .seed = env != NULL ? (unsigned)strtoul(env, NULL, 10)
				: (unsigned)time(NULL),
	    .rounds = 12,
	    .check_every = 4,
	};
	print_message("fault seed %u (KVI_FAULT_SEED=%u replays it)\n", o.seed,
		      o.seed);
	fault_result r;
	fault_run(c, &o, &r);
	fault_print(&o, &r);
	assert_int_equal(r.phantom, 0);
	assert_int_equal(r.lost, r.lost_marked);
	assert_true(r.listeners_checked > 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_faults, clu_test_setup,
					    clu_test_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
