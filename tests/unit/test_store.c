/*
 * test_store.c - the LMDB store: what is committed is what loads, in
 * order; snapshots hide older records; the log is truncated; the map
 * grows; a full map and corrupt files are clear errors, and so is a file
 * cut short (which LMDB would read past its end, a SIGBUS).
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "lmdb_util.h"
#include "oplog.h"
#include "store.h"

static char dir[256];

static int
setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "%s/kvi-store-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	assert_non_null(mkdtemp(dir));
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'.corrupt-*", dir, dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

/* What a load saw, as a text log: easy to compare whole. */
typedef struct seen {
	char text[8192];
	size_t len;
	uint64_t entries;
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
on_listener(void *arg, uint32_t lid, const void *val, size_t len)
{
	seen_add(arg, "L%u=%.*s ", lid, (int)len, (const char *)val);
	return KVI_OK;
}

static kvi_err
on_snapshot(void *arg, uint32_t lid, const kvs_mark *mark, uint64_t lsn,
	    uint64_t n)
{
	(void)lsn;
	assert_int_equal(mark->has_fp, mark->has_wm);
	assert_true(!mark->has_fp || mark->fp == mark->wm * 5);
	seen_add(arg, "S%u wm=%lld n=%llu ", lid,
		 mark->has_wm ? (long long)mark->wm : -1LL,
		 (unsigned long long)n);
	return KVI_OK;
}

static kvi_err
on_entries(void *arg, uint32_t lid, const uint8_t *e, size_t n)
{
	seen *s = arg;
	for (size_t i = 0; i < n; i++) {
		uint64_t ext, seq;
		uint8_t tiers;
		kvs_entry_get(e + i * KVS_ENTRY_SIZE, &ext, &seq, &tiers);
		assert_true(seq == ext * 3 && tiers == 1);
		(void)lid;
	}
	s->entries += n;
	return KVI_OK;
}

static kvi_err
on_record(void *arg, uint32_t lid, uint64_t lsn, const void *payload,
	  size_t len)
{
	(void)lsn;
	kvo_iter it;
	kvs_mark mark;
	assert_int_equal(kvo_iter_init(&it, payload, len, &mark), KVI_OK);
	assert_true(mark.has_fp && mark.fp == mark.wm * 5);
	seen_add(arg, "R%u wm=%lld", lid,
		 mark.has_wm ? (long long)mark.wm : -1LL);
	kvo_op op;
	kvi_err rv;
	while ((rv = kvo_iter_next(&it, &op)) == KVI_OK) {
		seen_add(arg,
			 op.kind == KVO_STORE    ? ",s%llu"
			 : op.kind == KVO_REMOVE ? ",r%llu"
						 : ",c%llu",
			 (unsigned long long)op.ext);
	}
	assert_int_equal(rv, KVI_ENOENT);
	seen_add(arg, " ");
	return KVI_OK;
}

static const kvs_load_cb load_cb = {
    .listener = on_listener,
    .snapshot = on_snapshot,
    .entries = on_entries,
    .record = on_record,
};

static kvs_store *
open_store(size_t map, size_t max)
{
	kvs_store_opts o = {
	    .dir = dir, .map_size = map, .max_map_size = max, .no_sync = true};
	kvs_store *s = NULL;
	char err[256];
	kvi_err rv = kvs_store_open(&o, &s, err, sizeof(err));
	if (rv != KVI_OK) {
		fail_msg("open: %s", err);
	}
	return s;
}

static void
load(kvs_store *s, seen *out)
{
	memset(out, 0, sizeof(*out));
	kvs_load_cb cb = load_cb;
	cb.arg = out;
	char err[256];
	kvi_err rv = kvs_store_load(s, &cb, err, sizeof(err));
	if (rv != KVI_OK) {
		fail_msg("load: %s", err);
	}
}

static void
commit_record(kvs_store *s, uint32_t lid, uint64_t wm, uint64_t ext)
{
	kvo_rec r;
	kvo_rec_init(&r);
	kvo_rec_store(&r, ext, ext * 3, 0);
	kvo_rec_finish(&r, &(kvs_mark){true, true, wm, wm * 5});
	kvs_rec rec = {lid, r.buf, r.len};
	kvs_commit c = {.recs = &rec, .n_recs = 1};
	assert_int_equal(kvs_store_commit(s, &c, NULL, 0), KVI_OK);
	kvo_rec_fini(&r);
}

static uint8_t *
make_entries(size_t n)
{
	uint8_t *e = malloc(n * KVS_ENTRY_SIZE + 1);
	for (size_t i = 0; i < n; i++) {
		kvs_entry_put(e + i * KVS_ENTRY_SIZE, i, i * 3, 1);
	}
	return e;
}

static void
test_commit_reopen_load(void **state)
{
	(void)state;
	kvs_store *s = open_store(0, 0);
	kvs_put puts[2] = {{0, "a", 1}, {1, "b", 1}};
	kvs_snap snaps[2] = {{.lid = 0}, {.lid = 1}};
	kvs_commit c = {
	    .puts = puts, .n_puts = 2, .snaps = snaps, .n_snaps = 2};
	assert_int_equal(kvs_store_commit(s, &c, NULL, 0), KVI_OK);
	commit_record(s, 0, 1, 10);
	commit_record(s, 1, 5, 20);
	commit_record(s, 0, 2, 11);
	/* listener 1 snapshots 10,000 entries: its record 20 is covered */
	uint8_t *e = make_entries(10000);
	kvs_snap sn = {
	    .lid = 1, .mark = {true, true, 5, 5 * 5}, .entries = e, .n = 10000};
	c = (kvs_commit){.snaps = &sn, .n_snaps = 1};
	assert_int_equal(kvs_store_commit(s, &c, NULL, 0), KVI_OK);
	free(e);
	commit_record(s, 1, 6, 21);
	kvs_store_close(s);

	s = open_store(0, 0);
	seen got;
	load(s, &got);
	assert_string_equal(got.text, "L0=a L1=b S0 wm=-1 n=0 S1 wm=5 n=10000 "
				      "R0 wm=1,s10 R0 wm=2,s11 R1 wm=6,s21 ");
	assert_int_equal(got.entries, 10000);
	kvs_store_close(s);
}

/* A listener assigned and filled within one group commit: its snapshot
 * (the state it was assigned with) and its first record share the
 * commit, and the record applies on top of the snapshot, never under it,
 * nor is it truncated as covered. */
static void
test_snapshot_and_record_in_one_commit(void **state)
{
	(void)state;
	kvs_store *s = open_store(0, 0);
	kvo_rec r;
	kvo_rec_init(&r);
	kvo_rec_store(&r, 7, 7 * 3, 0);
	kvo_rec_store(&r, 8, 8 * 3, 0);
	kvo_rec_finish(&r, &(kvs_mark){true, true, 4, 4 * 5});
	kvs_put put = {0, "a", 1};
	kvs_snap sn = {.lid = 0};
	kvs_rec rec = {0, r.buf, r.len};
	kvs_commit c = {.puts = &put,
			.n_puts = 1,
			.snaps = &sn,
			.n_snaps = 1,
			.recs = &rec,
			.n_recs = 1};
	assert_int_equal(kvs_store_commit(s, &c, NULL, 0), KVI_OK);
	kvo_rec_fini(&r);
	kvs_store_stats st;
	kvs_store_stats_get(s, &st);
	assert_int_equal(st.log_records, 1);
	uint32_t oldest;
	uint64_t need;
	assert_true(kvs_store_oldest(s, &oldest, &need));
	assert_int_equal(oldest, 0);
	kvs_store_close(s);
	s = open_store(0, 0);
	seen got;
	load(s, &got);
	assert_string_equal(got.text, "L0=a S0 wm=-1 n=0 R0 wm=4,s7,s8 ");
	kvs_store_close(s);
}

static void
test_truncation_and_delete(void **state)
{
	(void)state;
	kvs_store *s = open_store(0, 0);
	kvs_put puts[2] = {{0, "a", 1}, {1, "b", 1}};
	kvs_snap snaps[2] = {{.lid = 0}, {.lid = 1}};
	kvs_commit c = {
	    .puts = puts, .n_puts = 2, .snaps = snaps, .n_snaps = 2};
	assert_int_equal(kvs_store_commit(s, &c, NULL, 0), KVI_OK);
	for (uint64_t i = 0; i < 100; i++) {
		commit_record(s, (uint32_t)(i % 2), i, i);
	}
	kvs_store_stats st;
	kvs_store_stats_get(s, &st);
	assert_int_equal(st.log_records, 100);
	/* listener 0 snapshots: listener 1 still needs the log from its
	 * first record on, the second one */
	kvs_snap sn0 = {.lid = 0, .mark = {true, true, 98, 98 * 5}};
	c = (kvs_commit){.snaps = &sn0, .n_snaps = 1};
	assert_int_equal(kvs_store_commit(s, &c, NULL, 0), KVI_OK);
	kvs_store_stats_get(s, &st);
	assert_int_equal(st.log_records, 99);
	uint32_t oldest;
	uint64_t need;
	assert_true(kvs_store_oldest(s, &oldest, &need));
	assert_int_equal(oldest, 1);
	/* listener 1 is deleted: nothing needs the old log any more */
	kvs_put del = {1, NULL, 0};
	c = (kvs_commit){.puts = &del, .n_puts = 1};
	assert_int_equal(kvs_store_commit(s, &c, NULL, 0), KVI_OK);
	kvs_store_stats_get(s, &st);
	assert_int_equal(st.log_records, 0);
	assert_int_equal(st.truncated, 100);
	assert_false(kvs_store_oldest(s, &oldest, &need));
	commit_record(s, 0, 99, 500);
	kvs_store_close(s);
	s = open_store(0, 0);
	seen got;
	load(s, &got);
	assert_string_equal(got.text, "L0=a S0 wm=98 n=0 R0 wm=99,s500 ");
	/* a reused listener id starts from its new empty snapshot */
	kvs_put again = {1, "c", 1};
	kvs_snap fresh = {.lid = 1};
	c = (kvs_commit){
	    .puts = &again, .n_puts = 1, .snaps = &fresh, .n_snaps = 1};
	assert_int_equal(kvs_store_commit(s, &c, NULL, 0), KVI_OK);
	load(s, &got);
	assert_string_equal(
	    got.text, "L0=a L1=c S0 wm=98 n=0 S1 wm=-1 n=0 R0 wm=99,s500 ");
	kvs_store_close(s);
}

static void
test_map_grows_then_full(void **state)
{
	(void)state;
	/* 1 MiB map, 8 MiB limit: a 3 MiB snapshot needs growth, 20 MiB
	 * cannot fit and must change nothing. */
	kvs_store *s = open_store(1 << 20, 8 << 20);
	kvs_put put = {0, "a", 1};
	size_t n = (3 << 20) / KVS_ENTRY_SIZE;
	uint8_t *e = make_entries(n);
	kvs_snap sn = {
	    .lid = 0, .mark = {true, true, 1, 1 * 5}, .entries = e, .n = n};
	kvs_commit c = {.puts = &put, .n_puts = 1, .snaps = &sn, .n_snaps = 1};
	char err[256];
	assert_int_equal(kvs_store_commit(s, &c, err, sizeof(err)), KVI_OK);
	free(e);
	kvs_store_stats st;
	kvs_store_stats_get(s, &st);
	assert_true(st.map_growths >= 2);
	n = (20 << 20) / KVS_ENTRY_SIZE;
	e = make_entries(n);
	sn = (kvs_snap){
	    .lid = 0, .mark = {true, true, 2, 2 * 5}, .entries = e, .n = n};
	c = (kvs_commit){.snaps = &sn, .n_snaps = 1};
	assert_int_equal(kvs_store_commit(s, &c, err, sizeof(err)), KVI_EFULL);
	assert_non_null(strstr(err, "full"));
	free(e);
	/* still usable, and still holding the first snapshot */
	commit_record(s, 0, 3, 7);
	seen got;
	load(s, &got);
	assert_true(got.entries == (3 << 20) / KVS_ENTRY_SIZE);
	assert_non_null(strstr(got.text, "S0 wm=1 "));
	assert_non_null(strstr(got.text, "R0 wm=3,s7 "));
	kvs_store_close(s);
}

static void
corrupt_byte_at(const char *pattern, size_t plen)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	struct stat st;
	fstat(fd, &st);
	uint8_t *buf = malloc((size_t)st.st_size);
	assert_int_equal(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
	size_t at = 0;
	for (; at + plen <= (size_t)st.st_size; at++) {
		if (memcmp(buf + at, pattern, plen) == 0) {
			break;
		}
	}
	assert_true(at + plen <= (size_t)st.st_size);
	buf[at] ^= 0xff;
	assert_int_equal(pwrite(fd, buf + at, 1, (off_t)at), 1);
	free(buf);
	close(fd);
}

static void
test_corruption_is_reported(void **state)
{
	(void)state;
	kvs_store *s = open_store(0, 0);
	kvs_put put = {0, "listener-zero", 13};
	kvs_snap sn = {.lid = 0};
	kvs_commit c = {.puts = &put, .n_puts = 1, .snaps = &sn, .n_snaps = 1};
	assert_int_equal(kvs_store_commit(s, &c, NULL, 0), KVI_OK);
	commit_record(s, 0, 1, 0x4242424242424242ull);
	kvs_store_close(s);
	/* a flipped byte inside a record: the checksum catches it */
	corrupt_byte_at("BBBBBBBB", 8);
	s = open_store(0, 0);
	kvs_load_cb cb = load_cb;
	seen got = {0};
	cb.arg = &got;
	char err[256];
	assert_int_equal(kvs_store_load(s, &cb, err, sizeof(err)),
			 KVI_ECORRUPT);
	assert_non_null(strstr(err, "log record"));
	kvs_store_close(s);
	/* a file that is not LMDB at all */
	char path[512];
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	FILE *f = fopen(path, "w");
	for (int i = 0; i < 20000; i++) {
		fputs("garbage ", f);
	}
	fclose(f);
	kvs_store_opts o = {.dir = dir, .no_sync = true};
	assert_int_equal(kvs_store_open(&o, &s, err, sizeof(err)),
			 KVI_ECORRUPT);
	/* quarantine moves it aside; a fresh store opens empty */
	char moved[600];
	assert_int_equal(kvi_store_quarantine(dir, moved, sizeof(moved)),
			 KVI_OK);
	struct stat st;
	assert_int_equal(stat(moved, &st), 0);
	s = open_store(0, 0);
	load(s, &got);
	assert_string_equal(got.text, "");
	kvs_store_close(s);
}

/* cut_open cuts data.mdb to bytes and checks that opening it is
 * KVI_ECORRUPT saying so, before LMDB reads past the end. */
static void
cut_open(long bytes)
{
	char path[512], err[256] = "", want[64];
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	assert_int_equal(truncate(path, bytes), 0);
	kvs_store_opts o = {.dir = dir, .no_sync = true};
	kvs_store *s = NULL;
	assert_int_equal(kvs_store_open(&o, &s, err, sizeof(err)),
			 KVI_ECORRUPT);
	assert_null(s);
	assert_non_null(strstr(err, "cut short"));
	snprintf(want, sizeof(want), "data.mdb is %ld bytes,", bytes);
	assert_non_null(strstr(err, want));
}

static void
test_cut_short_is_reported(void **state)
{
	(void)state;
	kvs_store *s = open_store(0, 0);
	uint8_t *e = make_entries(20000);
	kvs_put put = {7, "spec", 4};
	kvs_snap sn = {.lid = 7, .entries = e, .n = 20000};
	kvs_commit c = {.puts = &put, .n_puts = 1, .snaps = &sn, .n_snaps = 1};
	assert_int_equal(kvs_store_commit(s, &c, NULL, 0), KVI_OK);
	commit_record(s, 7, 1, 42);
	free(e);
	kvs_store_close(s);
	char path[700];
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	long page = sysconf(_SC_PAGESIZE);
	assert_true(st.st_size > 8 * page);
	/* one page short, half, the meta pages and one more */
	cut_open((long)st.st_size - page);
	cut_open((long)st.st_size / 2);
	cut_open(3 * page);
	/* twice in one second: two places, neither replaced */
	char moved[600], moved2[600];
	assert_int_equal(kvi_store_quarantine(dir, moved, sizeof(moved)),
			 KVI_OK);
	kvs_store_close(open_store(0, 0));
	assert_int_equal(kvi_store_quarantine(dir, moved2, sizeof(moved2)),
			 KVI_OK);
	assert_string_not_equal(moved, moved2);
	snprintf(path, sizeof(path), "%s/data.mdb", moved);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 3 * page);
	/* cut to nothing, LMDB takes it for a new store */
	s = open_store(0, 0);
	kvs_store_close(s);
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	assert_int_equal(truncate(path, 0), 0);
	assert_true(kvi_mdb_file_empty(dir));
	s = open_store(0, 0);
	seen got;
	load(s, &got);
	assert_string_equal(got.text, "");
	kvs_store_close(s);
	assert_false(kvi_mdb_file_empty(dir));
}

/* What a load that names lsns saw; skip is a listener whose snapshot
 * entries are declined. */
typedef struct seen_lsn {
	seen s;
	uint32_t skip;
} seen_lsn;

static kvi_err
on_snapshot_lsn(void *arg, uint32_t lid, const kvs_mark *mark, uint64_t lsn,
		uint64_t n)
{
	(void)mark;
	(void)n;
	seen_lsn *sl = arg;
	seen_add(&sl->s, "S%u@%llu ", lid, (unsigned long long)lsn);
	return lid == sl->skip ? KVI_ENOENT : KVI_OK;
}

static kvi_err
on_entries_lsn(void *arg, uint32_t lid, const uint8_t *e, size_t n)
{
	seen_lsn *sl = arg;
	(void)e;
	seen_add(&sl->s, "E%u+%zu ", lid, n);
	return KVI_OK;
}

static kvi_err
on_record_lsn(void *arg, uint32_t lid, uint64_t lsn, const void *payload,
	      size_t len)
{
	(void)payload;
	(void)len;
	seen_add(&((seen_lsn *)arg)->s, "R%u@%llu ", lid,
		 (unsigned long long)lsn);
	return KVI_OK;
}

static void
load_lsn(kvs_store *s, uint32_t skip, const char *want)
{
	seen_lsn got = {.skip = skip};
	kvs_load_cb cb = {.arg = &got,
			  .listener = on_listener,
			  .snapshot = on_snapshot_lsn,
			  .entries = on_entries_lsn,
			  .record = on_record_lsn};
	char err[256];
	assert_int_equal(kvs_store_load(s, &cb, err, sizeof(err)), KVI_OK);
	assert_string_equal(got.s.text, want);
}

/* Loads name each snapshot's and record's lsn, a caller may decline one
 * listener's snapshot entries, and a stamp says which snapshots and
 * records came after it: those at or past its lsn. */
static void
test_load_lsns(void **state)
{
	(void)state;
	kvs_store *s = open_store(0, 0);
	uint8_t *e = make_entries(5000);
	kvs_put puts[2] = {{0, "a", 1}, {1, "b", 1}};
	kvs_snap snaps[2] = {{.lid = 0, .entries = e, .n = 5000}, {.lid = 1}};
	kvs_commit c = {
	    .puts = puts, .n_puts = 2, .snaps = snaps, .n_snaps = 2};
	assert_int_equal(kvs_store_commit(s, &c, NULL, 0), KVI_OK);
	commit_record(s, 0, 1, 10); /* lsn 0 */
	kvs_stamp then, now;
	kvs_store_stamp(s, &then);
	assert_int_equal(kvs_stamp_lsn(&then), 1);
	commit_record(s, 1, 5, 20); /* lsn 1, covered by the snapshot next */
	kvs_snap sn = {
	    .lid = 1, .mark = {true, true, 5, 5 * 5}, .entries = e, .n = 3};
	c = (kvs_commit){.snaps = &sn, .n_snaps = 1};
	assert_int_equal(kvs_store_commit(s, &c, NULL, 0), KVI_OK);
	commit_record(s, 1, 6, 21); /* lsn 2 */
	commit_record(s, 0, 2, 11); /* lsn 3 */
	kvs_store_stamp(s, &now);
	assert_true(kvs_stamp_before(&then, &now));
	assert_false(kvs_stamp_before(&now, &then));
	assert_false(kvs_stamp_before(&now, &now));
	kvs_stamp other = now;
	other.v[1]++; /* another file */
	assert_false(kvs_stamp_before(&then, &other));

	/* listener 0's 5,000 entries come in two chunks */
	load_lsn(s, UINT32_MAX,
		 "L0=a L1=b S0@0 E0+4096 E0+904 S1@2 E1+3 R0@0 R1@2 R0@3 ");
	load_lsn(s, 0, "L0=a L1=b S0@0 S1@2 E1+3 R0@0 R1@2 R0@3 ");
	load_lsn(s, 1, "L0=a L1=b S0@0 E0+4096 E0+904 S1@2 R0@0 R1@2 R0@3 ");
	free(e);
	kvs_store_close(s);
}

/* The log record codec with cache groups: a tier byte's group, a GROUP
 * op, and what is refused. */
static void
test_oplog_groups(void **state)
{
	(void)state;
	kvo_rec r;
	kvo_rec_init(&r);
	kvo_rec_store(&r, 11, 33, kvo_tier_group(1, 5));
	kvo_rec_remove(&r, 12, kvo_tier_group(2, 31));
	kvo_rec_group(&r, 5, 1, 2, 64);
	kvo_rec_store(&r, 13, 39, 0);
	kvo_rec_clear(&r);
	kvs_mark m = {.has_wm = true, .wm = 9};
	kvo_rec_finish(&r, &m);
	kvo_iter it;
	kvs_mark got;
	kvo_op op;
	assert_int_equal(kvo_iter_init(&it, r.buf, r.len, &got), KVI_OK);
	assert_int_equal(kvo_iter_next(&it, &op), KVI_OK);
	assert_int_equal(op.kind, KVO_STORE);
	assert_int_equal(op.tier, 1);
	assert_int_equal(op.group, 5);
	assert_int_equal(op.seq, 33);
	assert_int_equal(kvo_iter_next(&it, &op), KVI_OK);
	assert_int_equal(op.kind, KVO_REMOVE);
	assert_int_equal(op.tier, 2);
	assert_int_equal(op.group, 31);
	assert_int_equal(kvo_iter_next(&it, &op), KVI_OK);
	assert_int_equal(op.kind, KVO_GROUP);
	assert_int_equal(op.group, 5);
	assert_int_equal(op.spec_kind, 1);
	assert_int_equal(op.ratio, 2);
	assert_int_equal(op.window, 64);
	assert_int_equal(kvo_iter_next(&it, &op), KVI_OK);
	assert_int_equal(op.group, 0); /* a record from before groups */
	assert_int_equal(kvo_iter_next(&it, &op), KVI_OK);
	assert_int_equal(op.kind, KVO_CLEAR);
	assert_int_equal(kvo_iter_next(&it, &op), KVI_ENOENT);

	/* a tier past disk, a group past 31, a ratio of 0, cut short */
	uint8_t *last = r.buf + KVO_HEADER_SIZE + 17;
	*last = kvo_tier_group(3, 5);
	assert_int_equal(kvo_iter_init(&it, r.buf, r.len, &got), KVI_OK);
	assert_int_equal(kvo_iter_next(&it, &op), KVI_ECORRUPT);
	*last = kvo_tier_group(1, 5);
	uint8_t *grp = r.buf + KVO_HEADER_SIZE + 18 + 10;
	assert_int_equal(grp[0], KVO_GROUP);
	grp[1] = 32;
	assert_int_equal(kvo_iter_init(&it, r.buf, r.len, &got), KVI_OK);
	assert_int_equal(kvo_iter_next(&it, &op), KVI_OK);
	assert_int_equal(kvo_iter_next(&it, &op), KVI_OK);
	assert_int_equal(kvo_iter_next(&it, &op), KVI_ECORRUPT);
	grp[1] = 5;
	memset(grp + 3, 0, 4);
	assert_int_equal(kvo_iter_init(&it, r.buf, r.len, &got), KVI_OK);
	assert_int_equal(kvo_iter_next(&it, &op), KVI_OK);
	assert_int_equal(kvo_iter_next(&it, &op), KVI_OK);
	assert_int_equal(kvo_iter_next(&it, &op), KVI_ECORRUPT);
	assert_int_equal(
	    kvo_iter_init(&it, r.buf, KVO_HEADER_SIZE + 18 + 15, &got), KVI_OK);
	assert_int_equal(kvo_iter_next(&it, &op), KVI_OK);
	assert_int_equal(kvo_iter_next(&it, &op), KVI_OK);
	assert_int_equal(kvo_iter_next(&it, &op), KVI_ECORRUPT);
	kvo_rec_fini(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_oplog_groups),
	    cmocka_unit_test_setup_teardown(test_commit_reopen_load, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(
		test_snapshot_and_record_in_one_commit, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_truncation_and_delete, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_map_grows_then_full, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_cut_short_is_reported, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_corruption_is_reported, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_load_lsns, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
