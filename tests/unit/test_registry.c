/*
 * test_registry - the coordinator's registry of pods and listeners at
 * fleet size: lookups by key while its buckets grow past their first
 * size, and after removals; one endpoint, one listener, however the
 * endpoint is written and by whichever form; the cap on dp_size; when a
 * shard joined a model's query route, kept across rebuilds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "assigner_int.h"
#include "clock.h"
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
	kvc_reg_result res = {.existed = true};
	char err[512];
	assert_int_equal(kvc_reg_add(r, &p, &res, err, sizeof(err)), KVI_OK);
	assert_false(res.existed);
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
	char name[64], err[512];
	for (int k = 0; k < PODS; k += 997) {
		kvc_pod p = pod_of(k, name, "10.255.0.1", 6000);
		kvc_reg_result res;
		assert_int_equal(kvc_reg_add(r, &p, &res, err, sizeof(err)),
				 KVI_EEXIST);
		assert_int_equal(res.why, KVC_REG_KEY);
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

/* add_named adds pod name at ip:port with dp ranks; returns what
 * kvc_reg_add did, res the rest. */
static kvi_err
add_named(kvc_registry *r, const char *name, const char *ip, uint32_t port,
	  uint32_t dp, kvc_reg_result *res, char *err)
{
	kvc_pod p = {.source = KVC_SOURCE_FILE,
		     .name = (char *)name,
		     .instance_id = kvc_instance_id(name),
		     .model = "m",
		     .block_size = 16,
		     .ip = (char *)ip,
		     .zmq_port = port,
		     .dp_size = dp};
	return kvc_reg_add(r, &p, res, err, 512);
}

/* add_group registers a pod of ranks start..start+dp-1 of a
 * data-parallel group over several pods, on one host's base port. */
static kvi_err
add_group(kvc_registry *r, const char *name, uint32_t port, uint32_t start,
	  uint32_t dp, kvc_reg_result *res, char *err)
{
	kvc_pod p = {.source = KVC_SOURCE_FILE,
		     .name = (char *)name,
		     .instance_id = kvc_instance_id(name),
		     .model = "m",
		     .block_size = 16,
		     .ip = "10.0.9.1",
		     .zmq_port = port,
		     .dp_size = dp,
		     .dp_start_rank = start};
	return kvc_reg_add(r, &p, res, err, 512);
}

/* add_rank registers rank 0 of instance id at endpoint, over HTTP. */
static kvi_err
add_rank(kvc_registry *r, uint64_t id, const char *endpoint,
	 kvc_reg_result *res, char *err)
{
	kvc_pod p = {.source = KVC_SOURCE_HTTP,
		     .instance_id = id,
		     .model = "m",
		     .block_size = 16,
		     .endpoint = (char *)endpoint,
		     .dp_size = 1};
	return kvc_reg_add(r, &p, res, err, 512);
}

/* taken checks a refusal for an endpoint that holder has. */
static void
taken(kvi_err rv, const kvc_reg_result *res, const char *err,
      const char *holder)
{
	assert_int_equal(rv, KVI_EEXIST);
	assert_int_equal(res->why, KVC_REG_ENDPOINT);
	assert_string_equal(res->holder, holder);
	assert_non_null(strstr(err, holder));
	assert_non_null(strstr(err, "one endpoint is one listener"));
}

static void
test_one_endpoint_one_listener(void **state)
{
	(void)state;
	kvc_registry *r = kvc_reg_alloc();
	kvc_reg_result res;
	char err[512];
	assert_int_equal(add_named(r, "ns/a", "10.0.0.5", 5557, 2, &res, err),
			 KVI_OK);
	/* the same pod again: nothing to refuse */
	assert_int_equal(add_named(r, "ns/a", "10.0.0.5", 5557, 2, &res, err),
			 KVI_OK);
	assert_true(res.existed);
	/* another name on rank 1's port, a range that overlaps rank 1 */
	taken(add_named(r, "ns/b", "10.0.0.5", 5558, 1, &res, err), &res, err,
	      "ns/a#1");
	taken(add_named(r, "ns/b", "10.0.0.5", 5556, 2, &res, err), &res, err,
	      "ns/a#0");
	assert_non_null(strstr(err, "rank 1"));
	assert_string_equal(res.endpoint, "10.0.0.5:5557");
	/* the per-rank form, and other spellings of the address */
	taken(add_rank(r, 7, "tcp://10.0.0.5:5557", &res, err), &res, err,
	      "ns/a#0");
	taken(add_rank(r, 7, "tcp://[::ffff:10.0.0.5]:5558", &res, err), &res,
	      err, "ns/a#1");
	taken(add_rank(r, 7, "tcp://eth0;10.0.0.5:5557", &res, err), &res, err,
	      "ns/a#0");
	/* a name: localhost is 127.0.0.1, in any case, with a final dot */
	assert_int_equal(add_named(r, "ns/c", "127.0.0.1", 6000, 1, &res, err),
			 KVI_OK);
	taken(add_named(r, "ns/d", "localhost", 6000, 1, &res, err), &res, err,
	      "ns/c#0");
	taken(add_rank(r, 8, "tcp://LocalHost.:6000", &res, err), &res, err,
	      "ns/c#0");
	taken(add_rank(r, 8, "tcp://127.1:6000", &res, err), &res, err,
	      "ns/c#0");
	taken(add_rank(r, 8, "tcp://0.0.0.0:6000", &res, err), &res, err,
	      "ns/c#0");
	/* IPv6 literals, and ipc paths */
	assert_int_equal(add_rank(r, 9, "tcp://[::1]:7000", &res, err), KVI_OK);
	taken(add_named(r, "ns/e", "0:0:0:0:0:0:0:1", 7000, 1, &res, err), &res,
	      err, "9#0");
	taken(add_named(r, "ns/e", "[::1]", 6999, 2, &res, err), &res, err,
	      "9#0");
	assert_int_equal(add_rank(r, 10, "ipc:///run/e.sock", &res, err),
			 KVI_OK);
	taken(add_rank(r, 11, "ipc:///run/e.sock", &res, err), &res, err,
	      "10#0");
	/* other ports and other hosts are other listeners */
	assert_int_equal(add_named(r, "ns/f", "10.0.0.5", 5559, 1, &res, err),
			 KVI_OK);
	assert_int_equal(add_named(r, "ns/g", "10.0.0.6", 5557, 2, &res, err),
			 KVI_OK);
	assert_int_equal(add_rank(r, 12, "tcp://127.0.0.2:6000", &res, err),
			 KVI_OK);
	/* a removal frees the endpoint */
	char **keys, **shards;
	size_t nk;
	assert_int_equal(kvc_reg_remove(r, "ns/a", 0, -1, &keys, &shards, &nk),
			 KVI_OK);
	kvc_strv_free(keys, nk);
	kvc_strv_free(shards, nk);
	assert_int_equal(add_named(r, "ns/b", "10.0.0.5", 5556, 2, &res, err),
			 KVI_OK);
	assert_int_equal(add_rank(r, 7, "tcp://10.0.0.5:5558", &res, err),
			 KVI_OK);
	assert_int_equal(kvc_reg_remove(r, NULL, 7, 0, &keys, &shards, &nk),
			 KVI_OK);
	kvc_strv_free(keys, nk);
	kvc_strv_free(shards, nk);
	taken(add_named(r, "ns/h", "10.0.0.5", 5557, 1, &res, err), &res, err,
	      "ns/b#1");
	assert_int_equal(add_named(r, "ns/h", "10.0.0.5", 5558, 1, &res, err),
			 KVI_OK);
	kvc_reg_free(r);
}

/* Pods of one data-parallel group on one host, each on the ports of its
 * global ranks: the same base port is no clash, a rank's port is. */
static void
test_group_over_pods(void **state)
{
	(void)state;
	kvc_registry *r = kvc_reg_alloc();
	kvc_reg_result res;
	char err[512];
	assert_int_equal(add_group(r, "ns/g0", 5557, 0, 2, &res, err), KVI_OK);
	assert_int_equal(add_group(r, "ns/g1", 5557, 2, 2, &res, err), KVI_OK);
	assert_true(kvc_reg_has(r, "ns/g1#2"));
	assert_true(kvc_reg_has(r, "ns/g1#3"));
	assert_false(kvc_reg_has(r, "ns/g1#0"));
	/* a pod that says it starts at rank 1 overlaps g0's rank 1 */
	taken(add_group(r, "ns/g2", 5557, 1, 2, &res, err), &res, err,
	      "ns/g0#1");
	assert_string_equal(res.endpoint, "10.0.9.1:5558");
	kvc_reg_free(r);
}

static void
test_dp_size_cap(void **state)
{
	(void)state;
	kvc_registry *r = kvc_reg_alloc();
	kvc_reg_set_max_dp_size(r, 4);
	kvc_reg_result res;
	char err[512];
	assert_int_equal(add_named(r, "ns/a", "10.0.0.5", 5557, 5, &res, err),
			 KVI_ERANGE);
	assert_int_equal(res.why, KVC_REG_DP_SIZE);
	assert_non_null(strstr(err, "dp_size 5"));
	assert_non_null(strstr(err, "4"));
	assert_false(kvc_reg_has(r, "ns/a#0"));
	assert_int_equal(add_named(r, "ns/a", "10.0.0.5", 5557, 4, &res, err),
			 KVI_OK);
	assert_true(kvc_reg_has(r, "ns/a#3"));
	kvc_reg_free(r);
}

static void
nap_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0) {
	}
}

/* A shard keeps the time it joined a model's route while every rebuild
 * sees it; once one does not, it joins anew. */
static void
test_route_since(void **state)
{
	(void)state;
	kvc_registry *r = kvc_reg_alloc();
	add_pod(r, 0);
	assert_int_equal(kvc_reg_route_since(r, "m", "shard-0"), -1);
	int64_t t0 = kvi_now_ms();
	kvc_reg_set_owner(r, "fleet/pod-0#0", "shard-0", NULL);
	int64_t s0 = kvc_reg_route_since(r, "m", "shard-0");
	assert_true(s0 >= t0 && s0 <= kvi_now_ms());
	/* moving: the target joins, the owner keeps its time */
	nap_ms(20);
	kvc_reg_set_owner(r, "fleet/pod-0#0", "shard-0", "shard-1");
	int64_t s1 = kvc_reg_route_since(r, "m", "shard-1");
	assert_true(s1 >= s0 + 20);
	kvc_reg_routes_set(r, NULL, NULL, 0);
	assert_int_equal(kvc_reg_route_since(r, "m", "shard-0"), s0);
	assert_int_equal(kvc_reg_route_since(r, "m", "shard-1"), s1);
	/* shard-2 is in the route while it reports owning one */
	const char *models[] = {"m"}, *shards[] = {"shard-2"};
	kvc_reg_routes_set(r, models, shards, 1);
	int64_t s2 = kvc_reg_route_since(r, "m", "shard-2");
	assert_true(s2 >= s1);
	nap_ms(20);
	kvc_reg_routes_set(r, models, shards, 1);
	assert_int_equal(kvc_reg_route_since(r, "m", "shard-2"), s2);
	/* the move done: shard-0 and shard-2 leave, and come back anew */
	kvc_reg_set_owner(r, "fleet/pod-0#0", "shard-1", NULL);
	kvc_reg_routes_set(r, NULL, NULL, 0);
	assert_int_equal(kvc_reg_route_since(r, "m", "shard-0"), -1);
	assert_int_equal(kvc_reg_route_since(r, "m", "shard-2"), -1);
	assert_int_equal(kvc_reg_route_since(r, "m", "shard-1"), s1);
	nap_ms(20);
	kvc_reg_routes_set(r, models, shards, 1);
	assert_true(kvc_reg_route_since(r, "m", "shard-2") >= s2 + 20);
	assert_int_equal(kvc_reg_route_since(r, "other", "shard-1"), -1);
	kvc_reg_free(r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fleet_keys),
	    cmocka_unit_test(test_one_endpoint_one_listener),
	    cmocka_unit_test(test_group_over_pods),
	    cmocka_unit_test(test_dp_size_cap),
	    cmocka_unit_test(test_route_since),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
