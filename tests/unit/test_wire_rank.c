/*
 * test_wire_rank.c - reading a batch's data_parallel_rank without decoding
 * its events (wire.h's kvi_batch_rank): both envelopes, the rank's values
 * and what is not a batch.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "vectors.h"
#include "wire.h"

/* rank_of reads the rank of a hex batch with kvi_batch_rank. */
static kvi_err
rank_of(const char *hex, bool *has, uint16_t *rank)
{
	size_t len;
	uint8_t *buf = vectors_hex(hex, &len);
	kvi_err rv = kvi_batch_rank(buf, len, has, rank);
	free(buf);
	return rv;
}

static void
test_rank_alone(void **state)
{
	(void)state;
	bool has;
	uint16_t r;
	/* [1.0, [], 65535], [1.0, [], 7], [1.0, []], [1.0, [], nil] */
	assert_int_equal(rank_of("93cb3ff000000000000090cdffff", &has, &r),
			 KVI_OK);
	assert_true(has && r == 65535);
	assert_int_equal(rank_of("93cb3ff00000000000009007", &has, &r), KVI_OK);
	assert_true(has && r == 7);
	assert_int_equal(rank_of("92cb3ff000000000000090", &has, &r), KVI_OK);
	assert_false(has);
	assert_int_equal(rank_of("93cb3ff000000000000090c0", &has, &r), KVI_OK);
	assert_false(has);
	/* -1, 65536, "1" */
	assert_int_equal(rank_of("93cb3ff000000000000090ff", &has, &r),
			 KVI_ERANGE);
	assert_int_equal(rank_of("93cb3ff000000000000090ce00010000", &has, &r),
			 KVI_ERANGE);
	assert_int_equal(rank_of("93cb3ff000000000000090a131", &has, &r),
			 KVI_EPROTO);
	/* {"ts": 1, "events": [], "data_parallel_rank": 3}, and the rank
	 * first; a key that only starts like it is another key */
	assert_int_equal(
	    rank_of("83a2747301a66576656e747390b2646174615f706172616c6c656c5f"
		    "72616e6b03",
		    &has, &r),
	    KVI_OK);
	assert_true(has && r == 3);
	assert_int_equal(
	    rank_of("83b2646174615f706172616c6c656c5f72616e6b05a2747301a665"
		    "76656e747390",
		    &has, &r),
	    KVI_OK);
	assert_true(has && r == 5);
	assert_int_equal(rank_of("82a2747301a3646174610a", &has, &r), KVI_OK);
	assert_false(has);
	/* not a batch */
	assert_int_equal(rank_of("a131", &has, &r), KVI_EPROTO);
	assert_int_equal(rank_of("91c0", &has, &r), KVI_EPROTO);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rank_alone),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
