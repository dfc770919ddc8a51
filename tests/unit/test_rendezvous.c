/*
 * test_rendezvous.c - listener -> shard assignment: adding a shard moves
 * about a quarter of 1,000 keys from 3 shards, all of them to the new
 * shard; removing one moves only its keys; the map is even, the same when
 * recomputed and the same as the picks recorded once (so the same after a
 * restart and on every coordinator); pins win over hashing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <xxhash.h>

#include "rendezvous.h"

#define N_KEYS 1000

static const char *const shards[] = {"shard-0", "shard-1", "shard-2",
				     "shard-3"};

static char keys[N_KEYS][32];

static int
setup(void **state)
{
	(void)state;
	for (int i = 0; i < N_KEYS; i++) {
		snprintf(keys[i], sizeof(keys[i]), "sim/pod-%d#%d", i / 2,
			 i % 2);
	}
	return 0;
}

static void
map_keys(size_t n_shards, const bool *eligible, size_t *out)
{
	for (int i = 0; i < N_KEYS; i++) {
		out[i] =
		    kvc_rdv_pick_index(shards, n_shards, eligible, keys[i]);
		assert_true(out[i] < n_shards);
		assert_true(eligible == NULL || eligible[out[i]]);
	}
}

static void
test_add_shard_moves_a_quarter_to_it(void **state)
{
	(void)state;
	size_t before[N_KEYS], after[N_KEYS];
	map_keys(3, NULL, before);
	map_keys(4, NULL, after);
	int moved = 0;
	for (int i = 0; i < N_KEYS; i++) {
		if (before[i] != after[i]) {
			moved++;
			assert_int_equal(after[i], 3); /* only to the new one */
		}
	}
	printf("adding shard-3 moved %d of %d keys\n", moved, N_KEYS);
	assert_true(moved >= N_KEYS * 20 / 100 && moved <= N_KEYS * 30 / 100);
}

static void
test_remove_shard_moves_only_its_keys(void **state)
{
	(void)state;
	size_t all[N_KEYS], masked[N_KEYS], shorter[N_KEYS];
	map_keys(4, NULL, all);
	/* shard-1 excluded by the mask, or gone from the list */
	bool eligible[] = {true, false, true, true};
	map_keys(4, eligible, masked);
	const char *const rest[] = {"shard-0", "shard-2", "shard-3"};
	for (int i = 0; i < N_KEYS; i++) {
		shorter[i] = kvc_rdv_pick_index(rest, 3, NULL, keys[i]);
	}
	int moved = 0;
	for (int i = 0; i < N_KEYS; i++) {
		if (all[i] != 1) {
			assert_int_equal(masked[i], all[i]);
		} else {
			moved++;
			assert_int_not_equal(masked[i], 1);
		}
		assert_string_equal(rest[shorter[i]], shards[masked[i]]);
	}
	assert_true(moved > 0);
}

static void
test_distribution_is_even(void **state)
{
	(void)state;
	size_t map[N_KEYS];
	map_keys(3, NULL, map);
	int count[3] = {0};
	for (int i = 0; i < N_KEYS; i++) {
		count[map[i]]++;
	}
	printf("3 shards: %d %d %d\n", count[0], count[1], count[2]);
	for (int s = 0; s < 3; s++) {
		/* within 20% of 1000/3 */
		assert_true(count[s] * 3 * 10 >= N_KEYS * 8);
		assert_true(count[s] * 3 * 10 <= N_KEYS * 12);
	}
}

static void
test_map_is_stable(void **state)
{
	(void)state;
	size_t a[N_KEYS], b[N_KEYS];
	map_keys(4, NULL, a);
	map_keys(4, NULL, b);
	assert_memory_equal(a, b, sizeof(a));
	/* The order of the shard list does not matter either. */
	const char *const reversed[] = {"shard-3", "shard-2", "shard-1",
					"shard-0"};
	for (int i = 0; i < N_KEYS; i++) {
		assert_string_equal(kvc_rdv_pick(reversed, 4, NULL, keys[i]),
				    shards[a[i]]);
	}
	/* Picks recorded once: they depend on nothing but ids and keys, so
	 * they hold across restarts, hosts and coordinator replicas. A
	 * change here reassigns listeners fleet-wide: it needs a migration,
	 * not a new table. */
	static const struct {
		const char *key;
		const char *of3, *of4;
	} recorded[] = {
	    {"sim/pod-0#0", "shard-1", "shard-1"},
	    {"sim/pod-0#1", "shard-2", "shard-2"},
	    {"sim/pod-1#1", "shard-1", "shard-3"},
	    {"sim/pod-2#0", "shard-0", "shard-0"},
	    {"sim/pod-5#0", "shard-2", "shard-3"},
	    {"default/vllm-7f9c#3", "shard-2", "shard-2"},
	    {"1234567#0", "shard-2", "shard-2"},
	    {"", "shard-2", "shard-3"},
	};
	for (size_t i = 0; i < sizeof(recorded) / sizeof(recorded[0]); i++) {
		assert_string_equal(
		    kvc_rdv_pick(shards, 3, NULL, recorded[i].key),
		    recorded[i].of3);
		assert_string_equal(
		    kvc_rdv_pick(shards, 4, NULL, recorded[i].key),
		    recorded[i].of4);
	}
	/* the weight is XXH3_64 of id, NUL, key */
	assert_true(kvc_rdv_weight("shard-0", "sim/pod-0#0") ==
		    UINT64_C(0x57d6dde04fe8eb0c));
	assert_true(kvc_rdv_weight("shard-0", "sim/pod-0#0") ==
		    XXH3_64bits("shard-0\0sim/pod-0#0", 19));
	/* the separator keeps ("ab","c") and ("a","bc") apart */
	assert_true(kvc_rdv_weight("ab", "c") != kvc_rdv_weight("a", "bc"));
}

static void
test_no_eligible_shard_and_ties(void **state)
{
	(void)state;
	bool none[] = {false, false, false, false};
	assert_int_equal(kvc_rdv_pick_index(shards, 4, none, "k"),
			 KVC_RDV_NONE);
	assert_null(kvc_rdv_pick(shards, 4, none, "k"));
	assert_null(kvc_rdv_pick(shards, 0, NULL, "k"));
	/* an id listed twice ties with itself: the first eligible wins */
	const char *const twice[] = {"shard-9", "shard-9"};
	assert_int_equal(kvc_rdv_pick_index(twice, 2, NULL, "k"), 0);
	bool second[] = {false, true};
	assert_int_equal(kvc_rdv_pick_index(twice, 2, second, "k"), 1);
}

static void
test_pins_win(void **state)
{
	(void)state;
	kvc_rdv_pins *pins = kvc_rdv_pins_alloc();
	size_t map[N_KEYS];
	map_keys(4, NULL, map);
	/* pin every 10th key to the shard after its hashed one */
	for (int i = 0; i < N_KEYS; i += 10) {
		kvc_rdv_pins_set(pins, keys[i], "shard-9");
		kvc_rdv_pins_set(pins, keys[i], shards[(map[i] + 1) % 4]);
	}
	assert_int_equal(kvc_rdv_pins_count(pins), N_KEYS / 10);
	for (int i = 0; i < N_KEYS; i++) {
		bool pinned;
		size_t got =
		    kvc_rdv_assign(pins, shards, 4, NULL, keys[i], &pinned);
		assert_int_equal(pinned, i % 10 == 0);
		assert_int_equal(got, i % 10 == 0 ? (map[i] + 1) % 4 : map[i]);
	}
	/* a pin to an ineligible or unknown shard falls back to hashing */
	bool eligible[] = {true, true, true, true};
	eligible[(map[0] + 1) % 4] = false;
	bool pinned = true;
	size_t got =
	    kvc_rdv_assign(pins, shards, 4, eligible, keys[0], &pinned);
	assert_false(pinned);
	assert_int_equal(got, kvc_rdv_pick_index(shards, 4, eligible, keys[0]));
	kvc_rdv_pins_set(pins, keys[0], "shard-gone");
	assert_int_equal(kvc_rdv_assign(pins, shards, 4, NULL, keys[0], NULL),
			 map[0]);
	/* unset */
	assert_string_equal(kvc_rdv_pins_get(pins, keys[0]), "shard-gone");
	assert_true(kvc_rdv_pins_unset(pins, keys[0]));
	assert_false(kvc_rdv_pins_unset(pins, keys[0]));
	assert_null(kvc_rdv_pins_get(pins, keys[0]));
	assert_int_equal(kvc_rdv_pins_count(pins), N_KEYS / 10 - 1);
	for (int i = 10; i < N_KEYS; i += 10) {
		assert_true(kvc_rdv_pins_unset(pins, keys[i]));
	}
	assert_int_equal(kvc_rdv_pins_count(pins), 0);
	assert_int_equal(kvc_rdv_assign(pins, shards, 4, NULL, keys[10], NULL),
			 map[10]);
	kvc_rdv_pins_free(pins);
	kvc_rdv_pins_free(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_add_shard_moves_a_quarter_to_it),
	    cmocka_unit_test(test_remove_shard_moves_only_its_keys),
	    cmocka_unit_test(test_distribution_is_even),
	    cmocka_unit_test(test_map_is_stable),
	    cmocka_unit_test(test_no_eligible_shard_and_ties),
	    cmocka_unit_test(test_pins_win),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
