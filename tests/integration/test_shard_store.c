/*
 * test_shard_store.c - a shard whose store fails: a full map is a clear
 * error and a metric, queries go on, ingest waits for the store, and
 * nothing is lost (a restart with room catches up from the committed
 * watermarks); a corrupt file is moved
 * aside, the shard starts empty and serving, and rebuilds what it is
 * assigned again from the engines. So is a file cut short (to half, to
 * three pages), which used to kill the shard by SIGBUS at every start;
 * with --fail-on-corrupt the shard exits saying why instead, and a file
 * cut to nothing starts empty saying so. A store whose listener record
 * does not load is moved aside with a reason that names it, on one line.
 * A damaged index image is refused with the reason it is refused for, and
 * so is one the store is not at nor past; one the store moved past is
 * used, with what was committed since replayed onto it.
 */
#include <glob.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "shard_check.h"

#define TRACE KVI_DATA_DIR "/traces/conversation_trace.jsonl"

static kvt_sim sim;
static shardproc shard;
static const int ranks[] = {0, 1};

static void
sim_post(const char *path, const char *body)
{
	json_t *j = json_loads(body, 0, NULL);
	kvt_http_resp r;
	assert_int_equal(kvt_sim_call(&sim, "POST", path, j, &r), KVI_OK);
	assert_int_equal(r.status, 200);
	kvt_http_resp_fini(&r);
	json_decref(j);
}

static void
sim_start(const char *cache_blocks)
{
	const char *argv[] = {
	    "--pods", "1",    "--dp",           "2",          "--trace",  TRACE,
	    "--rate", "1000", "--cache-blocks", cache_blocks, "--paused", NULL};
	assert_int_equal(kvt_sim_start(KVI_SIM_BIN, argv, 10000, &sim), KVI_OK);
}

static int
teardown(void **state)
{
	(void)state;
	shc_cleanup(&shard);
	kvt_sim_stop(&sim, NULL);
	return 0;
}

static void
test_map_full_loses_nothing(void **state)
{
	(void)state;
	/* the state (two ranks of up to 65,536 blocks) outgrows a 1 MB
	 * map, whatever the log truncation does */
	sim_start("65536");
	static const char *small[] = {"--map-size-mb", "1", "--max-map-size-mb",
				      "1", NULL};
	shc_start(&shard, small);
	shc_assign(&shard, &sim, 0, true, true, 0);
	shc_assign(&shard, &sim, 1, true, true, 0);
	sim_post("/resume", "{}");
	kvt_sleep_ms(4000);
	sim_post("/pause", "{}");
	/* the store is full: a clear error, a metric, retries */
	assert_true(
	    shc_wait_metric(&shard, "kvindex_store_failing", 1, 10000) == 1);
	assert_true(shc_metric(&shard, "kvindex_store_commit_errors_total") >=
		    1);
	/* Queries are still answered, from memory; ingest waits for the
	 * store rather than run ahead of it. */
	assert_true(shc_metric(&shard, "kvindex_shard_entries") > 0);
	Kvindex__Response *resp;
	char key[64];
	shc_key(&sim, 0, key, sizeof(key));
	Kvindex__ListenerStatus *st = shc_status(&shard, key, &resp);
	assert_non_null(st);
	assert_true(st->blocks > 0);
	kvindex__response__free_unpacked(resp, NULL);
	/* stopping does not hang on the failing store */
	assert_int_equal(shc_stop(&shard), 0);
	size_t len;
	char *log = kvt_file_read(shard.log_path, &len);
	assert_non_null(strstr(log, "event=store_commit_failed"));
	assert_non_null(strstr(log, "error=\"resource full\""));
	free(log);
	/* Restarted with room: what was committed loads, the rest comes
	 * back from the engines. */
	static const char *roomy[] = {NULL};
	shard.extra = roomy;
	shc_restart(&shard);
	shc_wait_truth(&shard, &sim, ranks, 2, SHC_WAIT_MS);
	assert_true(shc_wait_metric(&shard, "kvindex_store_failing", 0, 5000) ==
		    0);
	assert_int_equal(shc_stop(&shard), 0);
}

static void
test_corrupt_store_is_quarantined(void **state)
{
	(void)state;
	sim_start("4096");
	shc_start(&shard, NULL);
	shc_assign(&shard, &sim, 0, true, true, 0);
	shc_assign(&shard, &sim, 1, true, true, 0);
	sim_post("/resume", "{}");
	kvt_sleep_ms(800);
	sim_post("/pause", "{}");
	shc_wait_truth(&shard, &sim, ranks, 2, SHC_WAIT_MS);
	assert_int_equal(shc_stop(&shard), 0);
	char path[512];
	snprintf(path, sizeof(path), "%s/data.mdb", shard.data_dir);
	FILE *f = fopen(path, "w");
	for (int i = 0; i < 50000; i++) {
		fputs("not lmdb", f);
	}
	fclose(f);
	shc_restart(&shard);
	/* moved aside, started empty, serving, and saying so */
	char pattern[512];
	snprintf(pattern, sizeof(pattern), "%s.corrupt-*", shard.data_dir);
	glob_t g;
	assert_int_equal(glob(pattern, 0, NULL, &g), 0);
	assert_int_equal(g.gl_pathc, 1);
	globfree(&g);
	assert_true(shc_metric(&shard, "kvindex_store_quarantined") == 1);
	Kvindex__Response *resp;
	char key[64];
	shc_key(&sim, 0, key, sizeof(key));
	assert_null(shc_status(&shard, key, &resp));
	kvindex__response__free_unpacked(resp, NULL);
	/* assigned again, the ranks are rebuilt from the engines */
	shc_assign(&shard, &sim, 0, true, true, 0);
	shc_assign(&shard, &sim, 1, true, true, 0);
	shc_wait_truth(&shard, &sim, ranks, 2, SHC_WAIT_MS);
	assert_int_equal(shc_stop(&shard), 0);
}

/* store_fill assigns both ranks, lets the engines run a moment, waits
 * until the shard holds their truth, and stops it cleanly. */
static void
store_fill(void)
{
	shc_assign(&shard, &sim, 0, true, true, 0);
	shc_assign(&shard, &sim, 1, true, true, 0);
	sim_post("/resume", "{}");
	kvt_sleep_ms(800);
	sim_post("/pause", "{}");
	shc_wait_truth(&shard, &sim, ranks, 2, SHC_WAIT_MS);
	assert_int_equal(shc_stop(&shard), 0);
}

/* store_cut cuts the stopped shard's data.mdb to bytes (-1: half of it)
 * and returns the size it had. */
static long
store_cut(long bytes)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/data.mdb", shard.data_dir);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(truncate(path, bytes < 0 ? st.st_size / 2 : bytes), 0);
	return (long)st.st_size;
}

static size_t
quarantined_dirs(void)
{
	char pattern[512];
	snprintf(pattern, sizeof(pattern), "%s.corrupt-*", shard.data_dir);
	glob_t g;
	size_t n = glob(pattern, 0, NULL, &g) == 0 ? g.gl_pathc : 0;
	globfree(&g);
	return n;
}

/* log_since returns the shard's log past byte from (free()). */
static char *
log_since(long from)
{
	size_t len;
	char *log = kvt_file_read(shard.log_path, &len);
	assert_non_null(log);
	assert_true((size_t)from <= len);
	memmove(log, log + from, len - (size_t)from + 1);
	return log;
}

/* restart_quarantined restarts the shard on a store cut to bytes and
 * checks it was moved aside (the n-th time) with the reason logged, and
 * that the shard serves, empty, then rebuilds both ranks. */
static void
restart_quarantined(long bytes, size_t n)
{
	long had = store_cut(bytes);
	assert_true(had >= 16 * 4096); /* more than the pages kept */
	long from = kvt_file_size(shard.log_path);
	shc_restart(&shard);
	assert_int_equal(quarantined_dirs(), n);
	assert_true(shc_metric(&shard, "kvindex_store_quarantined") == 1);
	char *log = log_since(from);
	const char *q = strstr(log, "event=store_quarantined");
	assert_non_null(q);
	/* the reason names the sizes: the file's and LMDB's */
	const char *why = strstr(log, "event=store_open_failed");
	assert_non_null(why);
	assert_true(why < q);
	assert_non_null(strstr(why, "cut short"));
	char size[64];
	snprintf(size, sizeof(size), "data.mdb is %ld bytes",
		 bytes < 0 ? had / 2 : bytes);
	assert_non_null(strstr(why, size));
	free(log);
	Kvindex__Response *resp;
	char key[64];
	shc_key(&sim, 0, key, sizeof(key));
	assert_null(shc_status(&shard, key, &resp));
	kvindex__response__free_unpacked(resp, NULL);
	store_fill();
}

static void
test_truncated_store_is_quarantined(void **state)
{
	(void)state;
	sim_start("4096");
	shc_start(&shard, NULL);
	store_fill();
	restart_quarantined(-1, 1);
	restart_quarantined(3 * 4096, 2);
	/* --fail-on-corrupt: the shard exits with the reason, by itself
	 * (not by a signal), and leaves the store where it is */
	long had = store_cut(-1);
	long from = kvt_file_size(shard.log_path);
	static const char *strict[] = {"--fail-on-corrupt", NULL};
	int status = shc_run_to_exit(&shard, strict, SHC_WAIT_MS);
	assert_true(status > 0 && status < 128);
	char *log = log_since(from);
	assert_non_null(strstr(log, "cut short"));
	assert_null(strstr(log, "event=store_quarantined"));
	free(log);
	assert_int_equal(quarantined_dirs(), 2);
	char path[512];
	snprintf(path, sizeof(path), "%s/data.mdb", shard.data_dir);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, had / 2);
	/* cut to nothing: LMDB would take it for a new store; the shard
	 * starts empty and says so */
	store_cut(0);
	from = kvt_file_size(shard.log_path);
	shc_restart(&shard);
	log = log_since(from);
	const char *empty = strstr(log, "event=store_empty");
	assert_non_null(empty);
	assert_non_null(strstr(empty, "0 bytes"));
	free(log);
	assert_int_equal(quarantined_dirs(), 2);
	assert_true(shc_metric(&shard, "kvindex_store_quarantined") == 0);
	assert_true(shc_metric(&shard, "kvindex_shard_entries") == 0);
	assert_int_equal(shc_stop(&shard), 0);
}

/* file_patch replaces every occurrence of from in the file at path with
 * to (as long), and returns how many it replaced. */
static int
file_patch(const char *path, const void *from, const void *to, size_t n)
{
	size_t len;
	char *buf = kvt_file_read(path, &len);
	assert_non_null(buf);
	int found = 0;
	for (size_t i = 0; i + n <= len; i++) {
		if (memcmp(buf + i, from, n) == 0) {
			memcpy(buf + i, to, n);
			found++;
		}
	}
	FILE *f = fopen(path, "r+b");
	assert_non_null(f);
	assert_int_equal(fwrite(buf, 1, len, f), len);
	fclose(f);
	free(buf);
	return found;
}

/* one_line_each checks that every line of log starts as a log line does,
 * and holds no byte outside printable ASCII. */
static void
one_line_each(const char *log)
{
	for (const char *p = log; *p != '\0';) {
		const char *end = strchr(p, '\n');
		assert_non_null(end);
		if (strncmp(p, "ts=", 3) != 0) {
			fail_msg("not a log line: %.*s", (int)(end - p), p);
		}
		for (const char *c = p; c < end; c++) {
			if ((unsigned char)*c < 0x20 ||
			    (unsigned char)*c > 0x7e) {
				fail_msg("byte 0x%02x in %.*s",
					 (unsigned char)*c, (int)(end - p), p);
			}
		}
		p = end + 1;
	}
}

static void
test_unloadable_listener_is_named(void **state)
{
	(void)state;
	sim_start("4096");
	shc_start(&shard, NULL);
	store_fill();
	/* the first listener's record no longer decodes: its key's length
	 * runs past the record */
	char path[512];
	snprintf(path, sizeof(path), "%s/data.mdb", shard.data_dir);
	assert_true(file_patch(path, "\x0a\x0bsim/pod-0#0",
			       "\x0a\x7fsim/pod-0#0", 13) >= 1);
	long from = kvt_file_size(shard.log_path);
	shc_restart(&shard);
	assert_int_equal(quarantined_dirs(), 1);
	char *log = log_since(from);
	one_line_each(log);
	const char *why = strstr(log, "event=store_open_failed");
	assert_non_null(why);
	const char *msg = strstr(why, "msg=\"listener 0: ");
	assert_non_null(msg);
	assert_true(msg < strchr(why, '\n'));
	free(log);
	store_fill();
}

/* file_copy writes the bytes of from over to, in place. */
static void
file_copy(const char *from, const char *to)
{
	size_t len;
	char *bytes = kvt_file_read(from, &len);
	assert_non_null(bytes);
	FILE *f = fopen(to, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(bytes, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
	free(bytes);
}

/* image_damaged damages the image the last stop wrote (cut to bytes when
 * cut >= 0, the byte at flip xor 0x5a when flip >= 0), restarts, and
 * checks that the image is refused with a reason holding want, that the
 * index is rebuilt from the store and equals the engines. */
static void
image_damaged(long cut, long flip, const char *event, const char *want)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/index.image", shard.data_dir);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	if (flip >= 0) {
		FILE *f = fopen(path, "r+b");
		assert_non_null(f);
		assert_int_equal(fseek(f, flip, SEEK_SET), 0);
		int c = fgetc(f);
		assert_int_equal(fseek(f, flip, SEEK_SET), 0);
		fputc(c ^ 0x5a, f);
		fclose(f);
	}
	if (cut >= 0) {
		assert_int_equal(truncate(path, cut), 0);
	}
	long from = kvt_file_size(shard.log_path);
	shc_restart(&shard);
	char *log = log_since(from);
	char ev[64];
	snprintf(ev, sizeof(ev), "event=%s reason=\"", event);
	const char *line = strstr(log, ev);
	if (line == NULL || strstr(line, want) == NULL ||
	    strstr(line, want) > strchr(line, '\n')) {
		fail_msg("no %s saying %s in: %s", ev, want, log);
	}
	assert_non_null(strstr(log, "event=index_built"));
	assert_null(strstr(log, "event=image_loaded"));
	free(log);
	shc_wait_truth(&shard, &sim, ranks, 2, SHC_WAIT_MS);
	assert_int_equal(shc_stop(&shard), 0);
}

static void
test_damaged_image_says_why(void **state)
{
	(void)state;
	sim_start("4096");
	shc_start(&shard, NULL);
	store_fill();
	/* a byte of the stamp: damage, not a store that moved on */
	image_damaged(-1, 50, "image_refused", "bad checksum");
	/* a byte in the tables */
	image_damaged(-1, 200000, "image_refused", "bad checksum");
	/* cut short, in the tables and in the header */
	image_damaged(200000, -1, "image_refused", "cut short");
	image_damaged(20, -1, "image_refused", "cut short");
	/* another version */
	image_damaged(-1, 8, "image_refused", "version");
	/* not damage: the store moved on after the image was written, and
	 * the start replays onto it what was committed since */
	char store[512], kept[520];
	snprintf(store, sizeof(store), "%s/data.mdb", shard.data_dir);
	snprintf(kept, sizeof(kept), "%s.kept", store);
	file_copy(store, kept);
	shc_restart(&shard);
	sim_post("/resume", "{}");
	kvt_sleep_ms(300);
	sim_post("/pause", "{}");
	shc_wait_truth(&shard, &sim, ranks, 2, SHC_WAIT_MS);
	kvt_sleep_ms(200); /* the last group commit */
	shc_kill9(&shard);
	long from = kvt_file_size(shard.log_path);
	shc_restart(&shard);
	char *log = log_since(from);
	assert_non_null(strstr(log, "event=image_loaded"));
	assert_non_null(strstr(log, "event=tail_replayed"));
	assert_null(strstr(log, "event=index_built"));
	free(log);
	shc_wait_truth(&shard, &sim, ranks, 2, SHC_WAIT_MS);
	assert_int_equal(shc_stop(&shard), 0);
	/* nor is a store rolled back behind its image (a copy of it put
	 * back): the image is of a state it is not at nor past */
	file_copy(kept, store);
	image_damaged(-1, -1, "image_unused", "stale");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_map_full_loses_nothing, teardown),
	    cmocka_unit_test_teardown(test_corrupt_store_is_quarantined,
				      teardown),
	    cmocka_unit_test_teardown(test_truncated_store_is_quarantined,
				      teardown),
	    cmocka_unit_test_teardown(test_unloadable_listener_is_named,
				      teardown),
	    cmocka_unit_test_teardown(test_damaged_image_says_why, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
