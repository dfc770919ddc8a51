/*
 * test_ctl_input.c - kvindexctl's parsers (tools/ctl/ctl_input.h): block
 * hashes as a JSON array of numbers or strings, one a line or separated
 * by commas, every u64 exact and nothing past it; the elements of a JSON
 * array found in its text, strings, escapes and nesting included, and
 * texts that are not one array refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"
#include "ctl_input.h"

/* t_hashes parses text, which must give the n hashes of want. */
static void
t_hashes(const char *text, const uint64_t *want, size_t n)
{
	uint64_t *h = NULL;
	size_t got = 0;
	char err[128];
	assert_int_equal(
	    ctl_hashes_parse(text, strlen(text), &h, &got, err, sizeof(err)),
	    KVI_OK);
	assert_int_equal(got, n);
	assert_memory_equal(h, want, n * sizeof(*h));
	kvi_free(h);
}

/* t_hashes_refused parses text, which must be refused with rv and err. */
static void
t_hashes_refused(const char *text, kvi_err rv, const char *msg)
{
	uint64_t *h = NULL;
	size_t n = 7;
	char err[128] = "";
	assert_int_equal(
	    ctl_hashes_parse(text, strlen(text), &h, &n, err, sizeof(err)), rv);
	assert_string_equal(err, msg);
	assert_null(h);
	assert_int_equal(n, 7); /* out parameters untouched */
}

static void
test_hashes(void **state)
{
	(void)state;
	static const uint64_t three[] = {1, 18446744073709551615u, 0};
	t_hashes("[1, 18446744073709551615, 0]", three, 3);
	t_hashes("[\"1\",\"18446744073709551615\",\"0\"]\n", three, 3);
	t_hashes("1\n18446744073709551615\r\n0\n", three, 3);
	t_hashes("  1,18446744073709551615 ,\t0", three, 3);
	t_hashes_refused("[1, 18446744073709551616]", KVI_EINVAL,
			 "hash 1: 18446744073709551616 is not a u64");
	t_hashes_refused("[-1]", KVI_EINVAL, "hash 0: -1 is not a u64");
	t_hashes_refused("1 2.5", KVI_EINVAL, "hash 1: 2.5 is not a u64");
	t_hashes_refused("[]", KVI_ENOENT, "no block hash");
	t_hashes_refused("", KVI_ENOENT, "no block hash");
}

/* t_items splits text and compares each element with want (n of them). */
static void
t_items(const char *text, const char *const *want, size_t n)
{
	ctl_span *s = NULL;
	size_t got = 99;
	char err[128];
	assert_int_equal(
	    ctl_json_items(text, strlen(text), &s, &got, err, sizeof(err)),
	    KVI_OK);
	assert_int_equal(got, n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(s[i].len, strlen(want[i]));
		assert_memory_equal(text + s[i].off, want[i], s[i].len);
	}
	kvi_free(s);
}

static void
t_items_refused(const char *text)
{
	ctl_span *s = NULL;
	size_t n = 99;
	char err[128] = "";
	assert_int_equal(
	    ctl_json_items(text, strlen(text), &s, &n, err, sizeof(err)),
	    KVI_EPROTO);
	assert_true(err[0] != '\0');
	assert_null(s);
	assert_int_equal(n, 99);
}

static void
test_json_items(void **state)
{
	(void)state;
	t_items("[]", NULL, 0);
	t_items(" [ ] \n", NULL, 0);
	t_items("[1,\"a\",null]", (const char *const[]){"1", "\"a\"", "null"},
		3);
	/* separators inside strings and nesting belong to the element */
	t_items("[ {\"a\": [1, 2], \"b\": \"],\\\"[\"} ,\n[[], {}] ]\n",
		(const char *const[]){"{\"a\": [1, 2], \"b\": \"],\\\"[\"}",
				      "[[], {}]"},
		2);
	t_items("[\"\\\\\", 2]", (const char *const[]){"\"\\\\\"", "2"}, 2);
	t_items_refused("");
	t_items_refused("{\"a\": 1}");
	t_items_refused("[1, 2");
	t_items_refused("[\"a]");
	t_items_refused("[\"a\\"); /* a backslash ends the text */
	t_items_refused("[1] [2]");
	t_items_refused("[1, , 2]");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hashes),
	    cmocka_unit_test(test_json_items),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
