/*
 * test_image.c - the index image (shard/index/index_image.c): an index saved
 * and loaded into another with the same listeners holds the same entries, on
 * the same tiers, and goes on changing like the original; an image of
 * another stamp, damaged, cut short or of other listeners is refused,
 * saying which, and leaves the index as it was; listeners made since the
 * image was written are taken empty when the caller says so.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "index.h"
#include "index_ents_fixture.h"
#include "xorshift.h"

#define N_LIS  40
#define GONE   5 /* a listener removed before the save: a gap in the ids */
#define N_SEQS 4000

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t seqs[N_SEQS];
static const char stamp[] = "store-state-1";

static void
add_listeners(kvx_index *idx, uint32_t skip)
{
	for (uint32_t lid = 0; lid < N_LIS; lid++) {
		if (lid == skip) {
			continue;
		}
		char key[32];
		snprintf(key, sizeof(key), "ns/pod-%u#0", lid);
		assert_int_equal(
		    kvx_listener_add(idx, lid, key, "pod", lid, 0,
				     lid < 30 ? "model-a" : "model-b",
				     lid < 30 ? 16 : 32),
		    KVI_OK);
	}
}

/* mutate makes n random changes: stores from a shared set of sequence
 * hashes (so lists of many holders form), moves, hashes that share a
 * reference's prefix, two external hashes of one sequence hash, key 0,
 * removals and clears. */
static void
mutate(kvx_index *idx, int n)
{
	for (int i = 0; i < n; i++) {
		uint32_t lid = (uint32_t)(xorshift64(&rng) % N_LIS);
		if (lid == GONE) {
			continue;
		}
		uint64_t r = xorshift64(&rng);
		uint64_t ext = r % 3000;
		uint64_t seq = seqs[(r >> 20) % N_SEQS];
		kvi_tier tier = (kvi_tier)((r >> 40) % 3);
		kvx_write_begin(idx, lid);
		switch ((r >> 44) % 16) {
		case 0:
			kvx_remove(idx, lid, ext, tier);
			break;
		case 1:
			seq ^= 1; /* the same 29-bit prefix as seq */
			kvx_store(idx, lid, ext, seq, tier);
			break;
		case 2:
			kvx_store(idx, lid, ext + 5000, seq, tier); /* alias */
			kvx_store(idx, lid, ext, seq, tier);
			break;
		case 3:
			if ((r >> 48) % 64 == 0) {
				kvx_clear(idx, lid);
			}
			break;
		default:
			kvx_store(idx, lid, ext, seq, tier);
		}
		kvx_write_end(idx, lid);
	}
}

/* assert_same_entries checks that a and b hold the same entries,
 * listener by listener (of a's listeners), and the same totals of
 * entries and sequence hashes. */
static void
assert_same_entries(kvx_index *a, kvx_index *b)
{
	for (uint32_t lid = 0; lid < N_LIS; lid++) {
		if (lid == GONE) {
			continue;
		}
		ents x = ents_of(a, lid), y = ents_of(b, lid);
		assert_int_equal(x.n, y.n);
		for (size_t i = 0; i < x.n; i++) {
			assert_int_equal(x.v[i].ext, y.v[i].ext);
			assert_int_equal(x.v[i].seq, y.v[i].seq);
			assert_int_equal(x.v[i].tiers, y.v[i].tiers);
		}
		assert_int_equal(kvx_listener_entries(a, lid),
				 kvx_listener_entries(b, lid));
		free(x.v);
		free(y.v);
	}
	kvx_stats sa, sb;
	kvx_index_stats(a, &sa);
	kvx_index_stats(b, &sb);
	assert_int_equal(sa.entries, sb.entries);
	assert_int_equal(sa.seq_hashes, sb.seq_hashes);
}

/* assert_same checks that a and b hold the same entries and listeners. */
static void
assert_same(kvx_index *a, kvx_index *b)
{
	assert_same_entries(a, b);
	kvx_stats sa, sb;
	kvx_index_stats(a, &sa);
	kvx_index_stats(b, &sb);
	assert_int_equal(sa.listeners, sb.listeners);
}

static kvx_index *
original(void)
{
	for (int i = 0; i < N_SEQS; i++) {
		seqs[i] = xorshift64(&rng) & ~(uint64_t)1;
	}
	seqs[0] = 0; /* key 0 lives outside the slot arrays */
	kvx_index *idx = kvx_index_alloc();
	add_listeners(idx, N_LIS);
	mutate(idx, 60000);
	/* one listener whose map is mapped from the kernel (table.h) */
	kvx_write_begin(idx, 0);
	for (uint64_t i = 0; i < 30000; i++) {
		kvx_store(idx, 0, 100000 + i, xorshift64(&rng), KVI_TIER_GPU);
	}
	kvx_write_end(idx, 0);
	kvx_listener_remove(idx, GONE);
	kvx_stats st;
	kvx_index_stats(idx, &st);
	assert_true(st.entries > 40000);
	return idx;
}

static int
saved(kvx_index *idx)
{
	FILE *f = tmpfile();
	assert_non_null(f);
	int fd = dup(fileno(f));
	fclose(f);
	char err[256];
	assert_int_equal(
	    kvx_image_save(idx, fd, stamp, sizeof(stamp), err, sizeof(err)),
	    KVI_OK);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

static kvx_index *
empty_copy(void)
{
	kvx_index *idx = kvx_index_alloc();
	add_listeners(idx, GONE);
	return idx;
}

static void
test_round_trip(void **state)
{
	(void)state;
	kvx_index *a = original();
	int fd = saved(a);
	char err[256];
	assert_int_equal(
	    kvx_image_check(fd, stamp, sizeof(stamp), err, sizeof(err)),
	    KVI_OK);
	kvx_index *b = empty_copy();
	assert_int_equal(kvx_image_load(b, fd, stamp, sizeof(stamp), NULL, 0,
					err, sizeof(err)),
			 KVI_OK);
	assert_same(a, b);
	/* the loaded tables are tables: they grow, shrink and move alike */
	uint64_t keep = rng;
	mutate(a, 40000);
	rng = keep;
	mutate(b, 40000);
	assert_same(a, b);
	close(fd);
	kvx_index_free(a);
	kvx_index_free(b);
}

/* assert_refused checks that idx refuses the image fd with want and a
 * reason holding why, and holds nothing after. */
static void
assert_refused(kvx_index *idx, int fd, const void *st, size_t len, kvi_err want,
	       const char *why)
{
	char err[256] = "";
	lseek(fd, 0, SEEK_SET);
	assert_int_equal(
	    kvx_image_load(idx, fd, st, len, NULL, 0, err, sizeof(err)), want);
	if (strstr(err, why) == NULL) {
		fail_msg("refused for \"%s\", not \"%s\"", err, why);
	}
	kvx_stats s;
	kvx_index_stats(idx, &s);
	assert_int_equal(s.entries, 0);
	assert_int_equal(s.seq_hashes, 0);
}

/* flip changes the byte at off of the file fd (again: back). */
static void
flip(int fd, off_t off)
{
	uint8_t byte;
	assert_int_equal(pread(fd, &byte, 1, off), 1);
	byte ^= 0x40;
	assert_int_equal(pwrite(fd, &byte, 1, off), 1);
}

static void
test_refused(void **state)
{
	(void)state;
	kvx_index *a = original();
	int fd = saved(a);
	kvx_index *b = empty_copy();
	char err[256];

	/* another state of the store */
	static const char other[] = "store-state-2";
	assert_int_equal(
	    kvx_image_check(fd, other, sizeof(other), err, sizeof(err)),
	    KVI_ENOENT);
	assert_non_null(strstr(err, "stale"));
	assert_refused(b, fd, other, sizeof(other), KVI_ENOENT, "stale");

	/* one byte changed deep in the bodies: found by the digest, after
	 * the tables were read into b */
	off_t size = lseek(fd, 0, SEEK_END);
	flip(fd, size / 2);
	assert_refused(b, fd, stamp, sizeof(stamp), KVI_ECORRUPT,
		       "bad checksum");
	flip(fd, size / 2);

	/* one byte changed in the stamp: damage, not another state */
	flip(fd, 40);
	assert_int_equal(
	    kvx_image_check(fd, stamp, sizeof(stamp), err, sizeof(err)),
	    KVI_ECORRUPT);
	assert_refused(b, fd, stamp, sizeof(stamp), KVI_ECORRUPT,
		       "bad checksum: the header");
	flip(fd, 40);

	/* one byte changed in the directory: it names other listeners,
	 * and the digest says why */
	flip(fd, 100);
	assert_refused(b, fd, stamp, sizeof(stamp), KVI_ECORRUPT,
		       "bad checksum: the body");
	flip(fd, 100);

	/* another version; not an image at all */
	uint32_t v = 1;
	assert_int_equal(pwrite(fd, &v, 4, 8), 4);
	assert_refused(b, fd, stamp, sizeof(stamp), KVI_ECORRUPT,
		       "version 1, and this build reads version 2");
	v = 2;
	assert_int_equal(pwrite(fd, &v, 4, 8), 4);
	flip(fd, 0);
	assert_refused(b, fd, stamp, sizeof(stamp), KVI_ECORRUPT,
		       "not an index image");
	flip(fd, 0);

	/* other listeners: one more than the image has; the image is
	 * whole */
	kvx_index *c = kvx_index_alloc();
	add_listeners(c, N_LIS);
	assert_refused(c, fd, stamp, sizeof(stamp), KVI_ECORRUPT,
		       "another set of listeners");

	/* longer, cut short */
	assert_int_equal(ftruncate(fd, size + 1), 0);
	assert_refused(b, fd, stamp, sizeof(stamp), KVI_ECORRUPT, "too long");
	assert_int_equal(ftruncate(fd, size - 100), 0);
	assert_refused(b, fd, stamp, sizeof(stamp), KVI_ECORRUPT, "cut short");
	assert_int_equal(ftruncate(fd, 50), 0);
	assert_refused(b, fd, stamp, sizeof(stamp), KVI_ECORRUPT, "cut short");
	assert_int_equal(ftruncate(fd, 10), 0);
	assert_refused(b, fd, stamp, sizeof(stamp), KVI_ECORRUPT, "cut short");

	/* b still takes a good image after all of that */
	close(fd);
	fd = saved(a);
	assert_int_equal(kvx_image_load(b, fd, stamp, sizeof(stamp), NULL, 0,
					err, sizeof(err)),
			 KVI_OK);
	assert_same(a, b);
	/* and not a second time: it holds entries now */
	lseek(fd, 0, SEEK_SET);
	assert_int_equal(kvx_image_load(b, fd, stamp, sizeof(stamp), NULL, 0,
					err, sizeof(err)),
			 KVI_EINVAL);
	close(fd);
	kvx_index_free(a);
	kvx_index_free(b);
	kvx_index_free(c);
}

/* An index with listeners the image lacks - one of a model it has, one of
 * a model of its own - takes it when the caller names them fresh: they
 * stay empty, and everything else is the image's. Named otherwise, or not
 * named, they refuse it. The header gives back the stamp it holds. */
static void
test_fresh_listeners(void **state)
{
	(void)state;
	kvx_index *a = original();
	int fd = saved(a);
	char err[256], got[KVX_IMAGE_STAMP_MAX];
	size_t got_len = 0;
	assert_int_equal(kvx_image_stamp(fd, got, &got_len, err, sizeof(err)),
			 KVI_OK);
	assert_int_equal(got_len, sizeof(stamp));
	assert_memory_equal(got, stamp, sizeof(stamp));

	kvx_index *b = kvx_index_alloc();
	add_listeners(b, N_LIS); /* GONE too: of model-a */
	assert_int_equal(
	    kvx_listener_add(b, N_LIS, "ns/new#0", "pod", 99, 0, "model-c", 64),
	    KVI_OK);
	bool fresh[N_LIS + 1] = {0};
	fresh[N_LIS] = true;
	/* GONE is not named: refused, b left empty */
	lseek(fd, 0, SEEK_SET);
	assert_int_equal(kvx_image_load(b, fd, stamp, sizeof(stamp), fresh,
					N_LIS + 1, err, sizeof(err)),
			 KVI_ECORRUPT);
	assert_non_null(strstr(err, "another set of listeners"));
	kvx_stats s;
	kvx_index_stats(b, &s);
	assert_int_equal(s.entries, 0);
	/* both named */
	fresh[GONE] = true;
	lseek(fd, 0, SEEK_SET);
	assert_int_equal(kvx_image_load(b, fd, stamp, sizeof(stamp), fresh,
					N_LIS + 1, err, sizeof(err)),
			 KVI_OK);
	assert_same_entries(a, b);
	assert_int_equal(kvx_listener_entries(b, GONE), 0);
	assert_int_equal(kvx_listener_entries(b, N_LIS), 0);
	/* the fresh ones fill like any other */
	kvx_write_begin(b, GONE);
	kvx_store(b, GONE, 1, seqs[1], KVI_TIER_GPU);
	kvx_write_end(b, GONE);
	kvx_write_begin(b, N_LIS);
	kvx_store(b, N_LIS, 1, seqs[1], KVI_TIER_CPU);
	kvx_write_end(b, N_LIS);
	assert_int_equal(kvx_listener_entries(b, GONE), 1);
	assert_int_equal(kvx_listener_entries(b, N_LIS), 1);
	close(fd);
	kvx_index_free(a);
	kvx_index_free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_refused),
	    cmocka_unit_test(test_fresh_listeners),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
