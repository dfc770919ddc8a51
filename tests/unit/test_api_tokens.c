/*
 * test_api_tokens.c - the token_ids reader (coordinator/api/api_tokens.h)
 * against a plain one-byte-at-a-time reader of the same grammar, at every
 * instruction-set level this processor has (plain C, SSE2, AVX2, AVX-512).
 *
 * A reader that declines must hand back the ids before the last comma it
 * read, and where the rest starts (check_prefix).
 *
 * Every array is copied into a buffer of exactly its length, so that a
 * read past the body's end is caught under ASan; arrays are placed at
 * every offset across two 64-byte blocks, so that ids, commas and the
 * closing bracket fall on every side of a block edge and in the copied
 * tail.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"
#include "api_tokens.h"

#define MAX_IDS 4096

static bool
ref_ws(char ch)
{
	return ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t';
}

/* ref_read is the grammar of api_tokens.h one byte at a time; the result
 * is what kvc_tokens_read must give. */
static bool
ref_read(const char *p, const char *end, size_t max, uint32_t *ids, size_t *n,
	 size_t *used)
{
	const char *start = p;
	size_t k = 0;
	for (;;) {
		while (p < end && ref_ws(*p)) {
			p++;
		}
		const char *d = p;
		uint64_t v = 0;
		while (p < end && *p >= '0' && *p <= '9' && p - d <= 10) {
			v = v * 10 + (uint64_t)(*p++ - '0');
		}
		size_t nd = (size_t)(p - d);
		if (nd == 0 || nd > 10 || v > UINT32_MAX ||
		    (nd > 1 && *d == '0') || k == max) {
			return false;
		}
		ids[k++] = (uint32_t)v;
		while (p < end && ref_ws(*p)) {
			p++;
		}
		if (p < end && *p == ',') {
			p++;
			continue;
		}
		if (p < end && *p == ']') {
			*n = k;
			*used = (size_t)(p + 1 - start);
			return true;
		}
		return false;
	}
}

/* check_prefix checks what a reader hands back when it declines: ids
 * [0..n) are those of the text from p up to after, which is p or just past
 * a comma, each "id ," as the grammar has them. */
static void
check_prefix(const char *p, const char *end, const uint32_t *ids, size_t n,
	     const char *after)
{
	assert_true(after >= p && after <= end);
	assert_true(after == p || after[-1] == ',');
	assert_true((ids == NULL) == (n == 0));
	size_t k = 0;
	while (p < after) {
		while (p < after && ref_ws(*p)) {
			p++;
		}
		uint64_t v = 0;
		const char *d = p;
		while (p < after && *p >= '0' && *p <= '9' && p - d <= 10) {
			v = v * 10 + (uint64_t)(*p++ - '0');
		}
		assert_true(p > d && p - d <= 10 && v <= UINT32_MAX &&
			    (p - d == 1 || *d != '0'));
		while (p < after && ref_ws(*p)) {
			p++;
		}
		assert_true(p < after);
		assert_int_equal(*p++, ',');
		assert_true(k < n);
		assert_int_equal(ids[k++], v);
	}
	assert_int_equal(k, n);
}

/* check runs both readers on text placed after `pad` spaces, in a buffer
 * of exactly that length, and compares them with ref_read. */
static void
check(const char *text, size_t len, size_t pad, size_t max)
{
	char *buf = kvi_malloc(pad + len + 1); /* +1: malloc(0) */
	memset(buf, ' ', pad);
	memcpy(buf + pad, text, len);
	const char *end = buf + pad + len;
	static uint32_t want[MAX_IDS];
	size_t want_n = 0, want_used = 0;
	bool want_ok = ref_read(buf, end, max, want, &want_n, &want_used);
	for (int r = -1; r < KVC_TOKENS_LEVELS; r++) {
		uint32_t *ids = NULL;
		size_t n = 0;
		const char *after = NULL;
		bool ok;
		if (r < 0) {
			ok = kvc_tokens_read(buf, end, max, &ids, &n, &after);
		} else if (kvc_tokens_supported((kvc_tokens_level)r)) {
			ok = kvc_tokens_read_as((kvc_tokens_level)r, buf, end,
						max, &ids, &n, &after);
		} else {
			continue;
		}
		if (ok != want_ok) {
			fail_msg("level %d: %s for \"%.*s\" at pad %zu", r,
				 ok ? "accepted" : "declined", (int)len, text,
				 pad);
		}
		if (ok) {
			assert_int_equal(n, want_n);
			assert_memory_equal(ids, want, n * sizeof(*ids));
			assert_ptr_equal(after, buf + want_used);
		} else {
			check_prefix(buf, end, ids, n, after);
		}
		kvi_free(ids);
	}
	kvi_free(buf);
}

static void
check_all_pads(const char *text, size_t max)
{
	for (size_t pad = 0; pad < 140; pad++) {
		check(text, strlen(text), pad, max);
	}
}

static void
test_accepts(void **state)
{
	(void)state;
	static const char *const ok[] = {
	    "0]",
	    "7]",
	    "4294967295]",
	    "1000000000]",
	    "0,0,0]",
	    "1,2,3]}",
	    "12345678, 123456789, 1234567]",
	    "  1 ,\t2\r\n,\n3  ] , \"x\": 1}",
	    "100000, 100001, 100002, 100003, 100004, 100005, 100006]",
	    "1,22,333,4444,55555,666666,7777777,88888888,999999999]",
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		check_all_pads(ok[i], MAX_IDS);
	}
}

static void
test_declines(void **state)
{
	(void)state;
	static const char *const bad[] = {
	    "",       "]",        " ]",          "1",           "1, 2",
	    "1,]",    ",1]",      "1,,2]",       "1 2]",        "01]",
	    "00]",    "1,01]",    "1, 007]",     "-1]",         "1.0]",
	    "1e5]",   "1E5]",     "4294967296]", "9999999999]", "12345678901]",
	    "1,2\0]", "1,\"2\"]", "1;2]",        "1,2}",        "1\v,2]",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		check_all_pads(bad[i], MAX_IDS);
	}
	/* a NUL inside: strlen would stop there */
	for (size_t pad = 0; pad < 140; pad++) {
		check("1,2\0,3]", 7, pad, MAX_IDS);
	}
}

static void
test_max(void **state)
{
	(void)state;
	char text[4 * 100 + 2];
	size_t len = 0;
	for (int i = 0; i < 100; i++) {
		len += (size_t)snprintf(text + len, sizeof(text) - len, "%s%d",
					i ? "," : "", i % 10);
	}
	text[len++] = ']';
	text[len] = '\0';
	for (size_t pad = 0; pad < 70; pad++) {
		check(text, len, pad, 100);
		check(text, len, pad, 99);
		check(text, len, pad, 1);
		check(text, len, pad, 0);
	}
}

/* test_random compares the readers with ref_read on random arrays: ids of
 * 1 to 11 digits (some with a leading zero, some past UINT32_MAX), random
 * white space, and now and then one byte broken. */
static void
test_random(void **state)
{
	(void)state;
	static const char *const seps[] = {",", ", ", " , ", ",\n", "\t,\r\n"};
	unsigned seed = 12345;
	char *text = kvi_malloc(64 * 1024);
	for (int round = 0; round < 3000; round++) {
		size_t len = 0, n = 1 + (size_t)(rand_r(&seed) % 300);
		for (size_t i = 0; i < n; i++) {
			if (i > 0) {
				const char *s = seps[rand_r(&seed) % 5];
				memcpy(text + len, s, strlen(s));
				len += strlen(s);
			}
			int digits = 1 + rand_r(&seed) % 11;
			if (rand_r(&seed) % 4 != 0) {
				digits = 1 + rand_r(&seed) % 6;
			}
			for (int d = 0; d < digits; d++) {
				int lo = d == 0 && digits > 1 &&
					 rand_r(&seed) % 50 != 0;
				text[len++] = (char)('0' + lo +
						     rand_r(&seed) % (10 - lo));
			}
		}
		text[len++] = ']';
		if (rand_r(&seed) % 8 == 0) {
			static const char junk[] = "-.e ,]x0\"";
			text[rand_r(&seed) % len] =
			    junk[rand_r(&seed) % (sizeof(junk) - 1)];
		}
		check(text, len, (size_t)(rand_r(&seed) % 130), MAX_IDS);
	}
	kvi_free(text);
}

int
main(void)
{
	for (int l = 0; l < KVC_TOKENS_LEVELS; l++) {
		printf("level %d: %s\n", l,
		       kvc_tokens_supported((kvc_tokens_level)l) ? "tested"
								 : "absent");
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_accepts),
	    cmocka_unit_test(test_declines),
	    cmocka_unit_test(test_max),
	    cmocka_unit_test(test_random),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
