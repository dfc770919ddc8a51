/*
 * test_registry - the coordinator's registry of pods and listeners at
 * fleet size: lookups by key while its buckets grow past their first
 * size, and after removals.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "assigner_int.h"
#include "pod.h"
#include "registry.h"

/* 10,000 pods of DP 2: 20,000 listeners, past two doublings of the 4,096
 * first buckets (at 8,192 and 16,384 listeners). */
#define PODS 10000
#define DP   2

static void
pod_name(char *buf, size_t len, int k)
{
	snprintf(buf, len, "fleet/pod-%d", k);
}

/* pod_of is pod k of the fleet, named in name, at ip. */
static kvc_pod
pod_of(int k, char name[64], char *ip, uint32_t zmq_port)
{
	pod_name(name, 64, k);
	return (kvc_pod){.source = KVC_SOURCE_HTTP,
			 .name = name,
			 .instance_id = kvc_instance_id(name),
			 .model = "m",
			 .block_size = 16,
			 .ip = ip,
			 .zmq_port = zmq_port,
			 .dp_size = DP};
}

static void
add_pod(kvc_registry *r, int k)
{
	char name[64], ip[32];
	snprintf(ip, sizeof(ip), "10.%d.%d.%d", k >> 16, (k >> 8) & 255,
		 k & 255);
	kvc_pod p = pod_of(k, name, ip, 5557);
	bool existed = true;
	char err[256];
	assert_int_equal(kvc_reg_add(r, &p, &existed, err, sizeof(err)),
			 KVI_OK);
	assert_false(existed);
}

static bool
has_rank(kvc_registry *r, int k, int rank)
{
	char key[80];
	snprintf(key, sizeof(key), "fleet/pod-%d#%d", k, rank);
	return kvc_reg_has(r, key);
}

static void
test_fleet_keys(void **state)
{
	(void)state;
	kvc_registry *r = kvc_reg_alloc();
	for (int k = 0; k < PODS; k++) {
		add_pod(r, k);
		/* every listener so far is found, across each growth */
		if (k == 4095 || k == 4096 || k == 8191 || k == 8192) {
			for (int j = 0; j <= k; j++) {
				assert_true(has_rank(r, j, 0));
				assert_true(has_rank(r, j, DP - 1));
			}
		}
	}
	size_t n;
	kvc_lview *v = kvc_reg_listeners(r, &n);
	assert_int_equal(n, PODS * DP);
	kvc_lviews_free(v, n);
	assert_false(has_rank(r, PODS, 0));
	assert_false(has_rank(r, 0, DP));

	/* a second registration of a rank is refused, found by key */
	char name[64], err[256];
	for (int k = 0; k < PODS; k += 997) {
		kvc_pod p = pod_of(k, name, "10.255.0.1", 6000);
		bool existed;
		assert_int_equal(kvc_reg_add(r, &p, &existed, err, sizeof(err)),
				 KVI_EEXIST);
	}

	/* the odd pods leave: only theirs go */
	for (int k = 1; k < PODS; k += 2) {
		pod_name(name, sizeof(name), k);
		char **keys, **shards;
		size_t nk;
		assert_int_equal(
		    kvc_reg_remove(r, name, 0, -1, &keys, &shards, &nk),
		    KVI_OK);
		assert_int_equal(nk, DP);
		kvc_strv_free(keys, nk);
		kvc_strv_free(shards, nk);
	}
	for (int k = 0; k < PODS; k++) {
		for (int rank = 0; rank < DP; rank++) {
			assert_int_equal(has_rank(r, k, rank), k % 2 == 0);
		}
	}
	v = kvc_reg_listeners(r, &n);
	assert_int_equal(n, PODS / 2 * DP);
	kvc_lviews_free(v, n);
	kvc_reg_free(r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fleet_keys),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
