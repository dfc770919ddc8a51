/*
 * test_cstore.c - the coordinator's LMDB store: pods, pins, run-time
 * shards and drains come back after close and reopen, puts replace,
 * deletes delete; the pod record decoder rejects every truncation and
 * malformation as corruption; a flipped byte on disk, a garbage file and
 * a newer format are clear errors; the map grows when full.
 */
#include <fcntl.h>
#include <lmdb.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>

#include "alloc.h"
#include "cstore.h"
#include "lmdb_util.h"

static char dir[256];

static int
setup(void **state)
{
	(void)state;
	char base[200];
	snprintf(base, sizeof(base), "%s/kvi-cstore-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	assert_non_null(mkdtemp(base));
	/* a directory that does not exist yet, two levels down */
	snprintf(dir, sizeof(dir), "%s/a/b", base);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	char cmd[600];
	*strstr(dir, "/a/b") = '\0';
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static kvc_cstore *
open_store(void)
{
	kvc_cstore *s = NULL;
	char err[256] = "";
	kvi_err rv = kvc_cstore_open(dir, &s, err, sizeof(err));
	if (rv != KVI_OK) {
		fail_msg("open: %s: %s", kvi_strerror(rv), err);
	}
	return s;
}

/* The pods of the round trip: two named, one per-rank registration. */
static void
make_pods(kvc_pod p[3])
{
	memset(p, 0, 3 * sizeof(*p));
	p[0] = (kvc_pod){.source = KVC_SOURCE_HTTP,
			 .name = "ns/pod-a",
			 .instance_id = kvc_instance_id("ns/pod-a"),
			 .model = "llama",
			 .block_size = 16,
			 .ip = "10.0.0.5",
			 .zmq_port = 5557,
			 .has_recover_port = true,
			 .recover_port = 8100,
			 .dp_size = 4};
	p[1] = (kvc_pod){.source = KVC_SOURCE_HTTP,
			 .name = "ns/pod-b",
			 .instance_id = kvc_instance_id("ns/pod-b"),
			 .model = "qwen",
			 .block_size = 32,
			 .ip = "fd00::7",
			 .zmq_port = 6000,
			 .has_replay_port = true,
			 .replay_port = 7000,
			 .has_metrics_port = true,
			 .metrics_port = 8000,
			 .dp_size = 1,
			 .dp_start_rank = 3};
	p[2] = (kvc_pod){.source = KVC_SOURCE_HTTP,
			 .instance_id = 7,
			 .model = "llama",
			 .block_size = 16,
			 .rank = 65535,
			 .endpoint = "tcp://10.0.0.9:5557",
			 .recover_endpoint = "http://10.0.0.9:8100"};
}

/* What a listing saw, as text. */
typedef struct seen {
	char text[4096];
	size_t len;
	kvc_pod pods[8];
	size_t n_pods;
	int stop_after;
} seen;

static void seen_add(seen *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
seen_add(seen *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	s->len += (size_t)vsnprintf(s->text + s->len, sizeof(s->text) - s->len,
				    fmt, ap);
	va_end(ap);
}

static kvi_err
on_pod(void *arg, const char *key, const kvc_pod *pod)
{
	seen *s = arg;
	seen_add(s, "%s ", key);
	assert_true(s->n_pods < 8);
	kvc_pod_copy(&s->pods[s->n_pods++], pod);
	return --s->stop_after == 0 ? KVI_EAGAIN : KVI_OK;
}

static kvi_err
on_pair(void *arg, const char *key, const char *value)
{
	seen_add(arg, "%s=%s ", key, value);
	return KVI_OK;
}

static kvi_err
on_key(void *arg, const char *key)
{
	seen_add(arg, "%s ", key);
	return KVI_OK;
}

static void
seen_fini(seen *s)
{
	for (size_t i = 0; i < s->n_pods; i++) {
		kvc_pod_fini(&s->pods[i]);
	}
	memset(s, 0, sizeof(*s));
}

static void
list_all(kvc_cstore *s, seen *pods, seen *pins, seen *shards, seen *drains)
{
	memset(pods, 0, sizeof(*pods));
	memset(pins, 0, sizeof(*pins));
	memset(shards, 0, sizeof(*shards));
	memset(drains, 0, sizeof(*drains));
	assert_int_equal(kvc_cstore_pod_list(s, on_pod, pods, NULL, 0), KVI_OK);
	assert_int_equal(kvc_cstore_pin_list(s, on_pair, pins, NULL, 0),
			 KVI_OK);
	assert_int_equal(kvc_cstore_shard_list(s, on_pair, shards, NULL, 0),
			 KVI_OK);
	assert_int_equal(kvc_cstore_drain_list(s, on_key, drains, NULL, 0),
			 KVI_OK);
}

static void
test_round_trip_and_delete(void **state)
{
	(void)state;
	kvc_pod p[3];
	make_pods(p);
	kvc_cstore *s = open_store();
	for (int i = 2; i >= 0; i--) {
		assert_int_equal(kvc_cstore_pod_put(s, &p[i], NULL, 0), KVI_OK);
	}
	assert_int_equal(
	    kvc_cstore_pin_put(s, "ns/pod-a#1", "shard-2", NULL, 0), KVI_OK);
	assert_int_equal(kvc_cstore_pin_put(s, "7#65535", "shard-0", NULL, 0),
			 KVI_OK);
	/* a second put replaces */
	assert_int_equal(
	    kvc_cstore_pin_put(s, "ns/pod-a#1", "shard-3", NULL, 0), KVI_OK);
	assert_int_equal(
	    kvc_cstore_shard_put(s, "shard-3", "tcp://10.0.1.3:7100", NULL, 0),
	    KVI_OK);
	assert_int_equal(
	    kvc_cstore_shard_put(s, "shard-4", "ipc:///run/kvi/4", NULL, 0),
	    KVI_OK);
	assert_int_equal(kvc_cstore_drain_put(s, "shard-1", NULL, 0), KVI_OK);
	assert_int_equal(kvc_cstore_drain_put(s, "shard-2", NULL, 0), KVI_OK);
	kvc_cstore_close(s);

	s = open_store();
	seen pods, pins, shards, drains;
	list_all(s, &pods, &pins, &shards, &drains);
	/* key order: "7#65535" < "ns/pod-a" < "ns/pod-b" */
	assert_string_equal(pods.text, "7#65535 ns/pod-a ns/pod-b ");
	assert_true(kvc_pod_equal(&pods.pods[0], &p[2]));
	assert_true(kvc_pod_equal(&pods.pods[1], &p[0]));
	assert_true(kvc_pod_equal(&pods.pods[2], &p[1]));
	assert_int_equal(pods.pods[1].source, KVC_SOURCE_HTTP);
	assert_null(pods.pods[0].name);
	assert_null(pods.pods[0].replay_endpoint);
	assert_string_equal(pins.text, "7#65535=shard-0 ns/pod-a#1=shard-3 ");
	assert_string_equal(shards.text, "shard-3=tcp://10.0.1.3:7100 "
					 "shard-4=ipc:///run/kvi/4 ");
	assert_string_equal(drains.text, "shard-1 shard-2 ");
	seen_fini(&pods);

	/* a callback error stops the listing and is returned */
	pods.stop_after = 2;
	assert_int_equal(kvc_cstore_pod_list(s, on_pod, &pods, NULL, 0),
			 KVI_EAGAIN);
	assert_int_equal(pods.n_pods, 2);
	seen_fini(&pods);

	/* deletes; deleting what is not there is KVI_ENOENT */
	char key[64];
	assert_string_equal(kvc_pod_key(&p[2], key, sizeof(key)), "7#65535");
	char small[7];
	assert_null(kvc_pod_key(&p[2], small, sizeof(small)));
	assert_int_equal(kvc_cstore_pod_delete(s, key, NULL, 0), KVI_OK);
	assert_int_equal(kvc_cstore_pod_delete(s, "ns/pod-b", NULL, 0), KVI_OK);
	char err[128];
	assert_int_equal(kvc_cstore_pod_delete(s, key, err, sizeof(err)),
			 KVI_ENOENT);
	assert_non_null(strstr(err, "7#65535"));
	assert_int_equal(kvc_cstore_pin_delete(s, "7#65535", NULL, 0), KVI_OK);
	assert_int_equal(kvc_cstore_pin_delete(s, "7#65535", NULL, 0),
			 KVI_ENOENT);
	assert_int_equal(kvc_cstore_shard_delete(s, "shard-3", NULL, 0),
			 KVI_OK);
	assert_int_equal(kvc_cstore_drain_delete(s, "shard-1", NULL, 0),
			 KVI_OK);
	assert_int_equal(kvc_cstore_drain_delete(s, "shard-9", NULL, 0),
			 KVI_ENOENT);
	kvc_cstore_close(s);

	s = open_store();
	list_all(s, &pods, &pins, &shards, &drains);
	assert_string_equal(pods.text, "ns/pod-a ");
	assert_true(kvc_pod_equal(&pods.pods[0], &p[0]));
	assert_string_equal(pins.text, "ns/pod-a#1=shard-3 ");
	assert_string_equal(shards.text, "shard-4=ipc:///run/kvi/4 ");
	assert_string_equal(drains.text, "shard-2 ");
	seen_fini(&pods);
	kvc_cstore_close(s);
}

static void
test_invalid_arguments(void **state)
{
	(void)state;
	kvc_cstore *s = open_store();
	char long_key[KVC_CSTORE_KEY_MAX + 2];
	memset(long_key, 'k', sizeof(long_key) - 1);
	long_key[sizeof(long_key) - 1] = '\0';
	char err[128];
	assert_int_equal(kvc_cstore_pin_put(s, "", "shard-0", err, sizeof(err)),
			 KVI_EINVAL);
	assert_non_null(strstr(err, "listener key"));
	assert_int_equal(kvc_cstore_pin_put(s, long_key, "shard-0", NULL, 0),
			 KVI_EINVAL);
	assert_int_equal(kvc_cstore_pin_put(s, "k#0", NULL, NULL, 0),
			 KVI_EINVAL);
	assert_int_equal(kvc_cstore_shard_put(s, "shard-5", "", NULL, 0),
			 KVI_EINVAL);
	assert_int_equal(kvc_cstore_drain_put(s, long_key, NULL, 0),
			 KVI_EINVAL);
	assert_int_equal(kvc_cstore_pod_delete(s, NULL, NULL, 0), KVI_EINVAL);
	kvc_pod p[3];
	make_pods(p);
	p[0].name = long_key;
	assert_int_equal(kvc_cstore_pod_put(s, &p[0], NULL, 0), KVI_EINVAL);
	char *huge = kvi_malloc(KVC_CSTORE_STR_MAX + 2);
	memset(huge, 'm', KVC_CSTORE_STR_MAX + 1);
	huge[KVC_CSTORE_STR_MAX + 1] = '\0';
	p[1].model = huge;
	assert_int_equal(kvc_cstore_pod_put(s, &p[1], NULL, 0), KVI_EINVAL);
	kvi_free(huge);
	seen pods, pins, shards, drains;
	list_all(s, &pods, &pins, &shards, &drains);
	assert_string_equal(pods.text, "");
	assert_string_equal(pins.text, "");
	kvc_cstore_close(s);
}

/* reseal recomputes the checksum of a pod record after an edit. */
static void
reseal(uint8_t *v, size_t len)
{
	uint32_t h = XXH32(v + 4, len - 4, 0);
	for (int i = 0; i < 4; i++) {
		v[i] = (uint8_t)(h >> (8 * i));
	}
}

static kvi_err
decode(const uint8_t *v, size_t len)
{
	kvc_pod p = {0};
	char err[128] = "";
	kvi_err rv = kvc_pod_decode(v, len, &p, err, sizeof(err));
	if (rv == KVI_OK) {
		kvc_pod_fini(&p);
	} else {
		assert_true(err[0] != '\0');
	}
	return rv;
}

static void
test_pod_record_malformed(void **state)
{
	(void)state;
	kvc_pod p[3];
	make_pods(p);
	for (int k = 0; k < 3; k++) {
		size_t len;
		uint8_t *v = kvc_pod_encode(&p[k], &len);
		assert_non_null(v);
		kvc_pod back;
		assert_int_equal(kvc_pod_decode(v, len, &back, NULL, 0),
				 KVI_OK);
		assert_true(kvc_pod_equal(&back, &p[k]));
		kvc_pod_fini(&back);
		uint8_t *w = kvi_malloc(len + 1);
		for (size_t n = 0; n < len; n++) {
			/* every truncation, with and without a valid sum */
			memcpy(w, v, n);
			assert_int_equal(decode(w, n), KVI_ECORRUPT);
			if (n >= 4) {
				reseal(w, n);
				assert_int_equal(decode(w, n), KVI_ECORRUPT);
			}
			/* every flipped byte */
			memcpy(w, v, len);
			w[n] ^= 0x40;
			assert_int_equal(decode(w, len), KVI_ECORRUPT);
		}
		/* a byte too many */
		memcpy(w, v, len);
		w[len] = 0;
		reseal(w, len + 1);
		assert_int_equal(decode(w, len + 1), KVI_ECORRUPT);
		/* another record version, a bad source, unknown flags */
		memcpy(w, v, len);
		w[4] = 2;
		reseal(w, len);
		assert_int_equal(decode(w, len), KVI_EVERSION);
		memcpy(w, v, len);
		w[5] = 9;
		reseal(w, len);
		assert_int_equal(decode(w, len), KVI_ECORRUPT);
		memcpy(w, v, len);
		w[6] |= 0x80;
		reseal(w, len);
		assert_int_equal(decode(w, len), KVI_ECORRUPT);
		/* a NUL inside a string: the model's first byte */
		size_t at = 4 + 3 + 8 + 24 + 4 +
			    (p[k].name ? strlen(p[k].name) : 0) + 4;
		memcpy(w, v, len);
		assert_int_equal(w[at], (uint8_t)p[k].model[0]);
		w[at] = 0;
		reseal(w, len);
		assert_int_equal(decode(w, len), KVI_ECORRUPT);
		/* a string length past the end */
		memcpy(w, v, len);
		w[at - 4 + 3] = 0x7f;
		reseal(w, len);
		assert_int_equal(decode(w, len), KVI_ECORRUPT);
		kvi_free(w);
		kvi_free(v);
	}
}

/* corrupt_value flips the first byte of pattern in data.mdb. */
static void
corrupt_value(const char *pattern)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	uint8_t *buf = kvi_malloc((size_t)st.st_size);
	assert_int_equal(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
	size_t plen = strlen(pattern), at = 0;
	for (; at + plen <= (size_t)st.st_size; at++) {
		if (memcmp(buf + at, pattern, plen) == 0) {
			break;
		}
	}
	assert_true(at + plen <= (size_t)st.st_size);
	buf[at] ^= 0xff;
	assert_int_equal(pwrite(fd, buf + at, 1, (off_t)at), 1);
	kvi_free(buf);
	close(fd);
}

static void
test_corruption_is_reported(void **state)
{
	(void)state;
	kvc_pod p[3];
	make_pods(p);
	p[1].model = "model-to-corrupt";
	kvc_cstore *s = open_store();
	assert_int_equal(kvc_cstore_pod_put(s, &p[0], NULL, 0), KVI_OK);
	assert_int_equal(kvc_cstore_pod_put(s, &p[1], NULL, 0), KVI_OK);
	assert_int_equal(kvc_cstore_shard_put(s, "shard-7",
					      "tcp://endpoint-to-corrupt:1",
					      NULL, 0),
			 KVI_OK);
	kvc_cstore_close(s);
	corrupt_value("model-to-corrupt");
	corrupt_value("endpoint-to-corrupt");
	s = open_store();
	seen got = {0};
	char err[256];
	assert_int_equal(kvc_cstore_pod_list(s, on_pod, &got, err, sizeof(err)),
			 KVI_ECORRUPT);
	assert_non_null(strstr(err, "ns/pod-b"));
	assert_string_equal(got.text, "ns/pod-a "); /* the good one came */
	seen_fini(&got);
	assert_int_equal(
	    kvc_cstore_shard_list(s, on_pair, &got, err, sizeof(err)),
	    KVI_ECORRUPT);
	assert_non_null(strstr(err, "shard-7"));
	/* the bad value can be replaced or deleted */
	assert_int_equal(kvc_cstore_pod_delete(s, "ns/pod-b", NULL, 0), KVI_OK);
	memset(&got, 0, sizeof(got));
	assert_int_equal(kvc_cstore_pod_list(s, on_pod, &got, NULL, 0), KVI_OK);
	assert_string_equal(got.text, "ns/pod-a ");
	seen_fini(&got);
	kvc_cstore_close(s);

	/* a file that is not LMDB at all */
	char path[512];
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	FILE *f = fopen(path, "w");
	for (int i = 0; i < 20000; i++) {
		fputs("garbage ", f);
	}
	fclose(f);
	assert_int_equal(kvc_cstore_open(dir, &s, err, sizeof(err)),
			 KVI_ECORRUPT);
	/* quarantine moves it aside; a fresh store opens empty */
	char moved[600];
	assert_int_equal(kvi_store_quarantine(dir, moved, sizeof(moved)),
			 KVI_OK);
	struct stat st;
	assert_int_equal(stat(moved, &st), 0);
	s = open_store();
	seen pods, pins, shards, drains;
	list_all(s, &pods, &pins, &shards, &drains);
	assert_string_equal(pods.text, "");
	assert_string_equal(shards.text, "");
	kvc_cstore_close(s);
}

/* A file cut short is refused before LMDB reads past its end (it was a
 * SIGBUS). */
static void
test_cut_short_is_reported(void **state)
{
	(void)state;
	kvc_cstore *s = open_store();
	char key[64];
	for (int i = 0; i < 400; i++) {
		snprintf(key, sizeof(key), "ns/pod-%d#0", i);
		assert_int_equal(kvc_cstore_pin_put(s, key, "shard-0", NULL, 0),
				 KVI_OK);
	}
	kvc_cstore_close(s);
	char path[512], err[256] = "";
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	long page = sysconf(_SC_PAGESIZE);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_true(st.st_size > 4 * page);
	assert_int_equal(truncate(path, 3 * page), 0);
	s = NULL;
	assert_int_equal(kvc_cstore_open(dir, &s, err, sizeof(err)),
			 KVI_ECORRUPT);
	assert_null(s);
	assert_non_null(strstr(err, "cut short"));
}

static void
test_newer_format_is_refused(void **state)
{
	(void)state;
	kvc_cstore_close(open_store());
	/* what a later version would write */
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi meta;
	assert_int_equal(mdb_env_create(&env), 0);
	assert_int_equal(mdb_env_set_maxdbs(env, 8), 0);
	assert_int_equal(mdb_env_open(env, dir, 0, 0644), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, "meta", 0, &meta), 0);
	uint8_t two[4] = {2, 0, 0, 0};
	MDB_val k = {6, "format"}, v = {4, two};
	assert_int_equal(mdb_put(txn, meta, &k, &v, 0), 0);
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
	kvc_cstore *s = NULL;
	char err[128];
	assert_int_equal(kvc_cstore_open(dir, &s, err, sizeof(err)),
			 KVI_EVERSION);
	assert_null(s);
	assert_non_null(strstr(err, "newer"));
}

static void
test_map_grows(void **state)
{
	(void)state;
	kvc_cstore *s = open_store();
	/* 900 pods of ~20 KiB: more than the initial 16 MiB map */
	char *big = kvi_malloc(KVC_CSTORE_STR_MAX + 1);
	memset(big, 'x', KVC_CSTORE_STR_MAX);
	big[KVC_CSTORE_STR_MAX] = '\0';
	kvc_pod p = {.source = KVC_SOURCE_HTTP,
		     .model = big,
		     .ip = big,
		     .endpoint = big,
		     .replay_endpoint = big,
		     .recover_endpoint = big};
	for (int i = 0; i < 900; i++) {
		char name[32];
		snprintf(name, sizeof(name), "ns/pod-%04d", i);
		p.name = name;
		char err[128] = "";
		kvi_err rv = kvc_cstore_pod_put(s, &p, err, sizeof(err));
		if (rv != KVI_OK) {
			fail_msg("put %d: %s", i, err);
		}
	}
	kvc_cstore_close(s);
	char path[512];
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_true(st.st_size > (16 << 20));
	s = open_store();
	seen got = {0};
	got.stop_after = 8; /* stop listing early: it is long */
	assert_int_equal(kvc_cstore_pod_list(s, on_pod, &got, NULL, 0),
			 KVI_EAGAIN);
	assert_int_equal(got.n_pods, 8);
	assert_string_equal(got.pods[7].name, "ns/pod-0007");
	assert_int_equal(strlen(got.pods[7].recover_endpoint),
			 KVC_CSTORE_STR_MAX);
	seen_fini(&got);
	kvc_cstore_close(s);
	kvi_free(big);
}

/* Pods stored together: all in one transaction, or none when one is
 * refused. */
static void
test_pods_put_together(void **state)
{
	(void)state;
	kvc_pod p[3];
	make_pods(p);
	kvc_cstore *s = open_store();
	char *huge = kvi_malloc(KVC_CSTORE_STR_MAX + 2);
	memset(huge, 'm', KVC_CSTORE_STR_MAX + 1);
	huge[KVC_CSTORE_STR_MAX + 1] = '\0';
	kvc_pod bad = p[1];
	bad.model = huge;
	const kvc_pod *with_bad[3] = {&p[0], &bad, &p[2]};
	char err[256] = "";
	assert_int_equal(kvc_cstore_pods_put(s, with_bad, 3, err, sizeof(err)),
			 KVI_EINVAL);
	assert_non_null(strstr(err, "ns/pod-b"));
	seen pods, pins, shards, drains;
	list_all(s, &pods, &pins, &shards, &drains);
	assert_string_equal(pods.text, ""); /* none of them */
	seen_fini(&pods);

	const kvc_pod *all[3] = {&p[0], &p[1], &p[2]};
	assert_int_equal(kvc_cstore_pods_put(s, all, 3, NULL, 0), KVI_OK);
	kvc_cstore_close(s);
	s = open_store();
	list_all(s, &pods, &pins, &shards, &drains);
	assert_string_equal(pods.text, "7#65535 ns/pod-a ns/pod-b ");
	assert_true(kvc_pod_equal(&pods.pods[1], &p[0]));
	seen_fini(&pods);
	kvi_free(huge);
	kvc_cstore_close(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_round_trip_and_delete, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_pods_put_together, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_invalid_arguments, setup,
					    teardown),
	    cmocka_unit_test(test_pod_record_malformed),
	    cmocka_unit_test_setup_teardown(test_corruption_is_reported, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_cut_short_is_reported, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_newer_format_is_refused, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_map_grows, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
