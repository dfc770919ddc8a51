/*
 * test_api_jread.c - the one-pass reader of request bodies
 * (coordinator/api/api_jread.h) at its edges, through the parsers that
 * use it (api_query.h, api_json.h).
 *
 * A body that is not JSON is refused with jansson's own message, line,
 * column and byte, for every error jansson has (a table of bodies, each
 * compared with json_loadb's error on the same bytes): strings cut short,
 * control characters, bad escapes and surrogates, bytes that are not
 * UTF-8 (at a token, inside a string, just after a number), words that
 * are not true/false/null, nesting at and past 2048, keys twice (decoded,
 * in objects of many keys), a NUL in a key or a value, what may not
 * follow the top value. An integer beyond int64 is taken exactly, and
 * reported as jansson reports it when the body is refused for something
 * after it. Values are decoded exactly (escapes, surrogate pairs, -0,
 * u64 bounds). The 64-byte token reader hands the element reader the
 * array from its last comma: a wrong id anywhere in a long array is
 * named with its index. And the two places where the API now refuses what
 * it took before: a NUL byte just after a number, and an integer as an
 * mm_features identifier.
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
#include <jansson.h>

#include "alloc.h"
#include "api_json.h"
#include "api_query.h"

/* ---- helpers --------------------------------------------------------------
 */

/* jansson_says writes the message the API gave for a body jansson
 * refuses: its text and position, made ASCII as kvc_qerr_set makes it. */
static void
jansson_says(const char *body, size_t len, kvc_qerr *want)
{
	json_error_t je;
	json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (j != NULL) {
		fail_msg("jansson takes \"%.*s\"", (int)len, body);
	}
	kvc_qerr_set(want, KVI_EPROTO, 400,
		     "invalid JSON: %s at line %d, column %d (byte %d)",
		     je.text, je.line, je.column, je.position);
}

/* refused_as_jansson checks that /query and /register refuse body as
 * jansson does. */
static void
refused_as_jansson(const char *body, size_t len)
{
	kvc_qerr want = {0}, e = {0};
	jansson_says(body, len, &want);
	kvc_qreq q = {0};
	if (kvc_api_query_parse(body, len, 64, &q, &e) != KVI_EPROTO ||
	    strcmp(e.message, want.message) != 0) {
		fail_msg("\"%.*s\": \"%s\", jansson: \"%s\"", (int)len, body,
			 e.message, want.message);
	}
	kvc_pod p = {0};
	assert_int_equal(kvc_api_register_parse(body, len, 1, &p, &e),
			 KVI_EPROTO);
	assert_string_equal(e.message, want.message);
	kvc_qerr_fini(&e);
}

static kvc_qreq
query_ok(const char *body, size_t max)
{
	kvc_qreq q = {0};
	kvc_qerr e = {0};
	if (kvc_api_query_parse(body, strlen(body), max, &q, &e) != KVI_OK) {
		fail_msg("\"%s\": %s", body, e.message);
	}
	return q;
}

static void
query_fails(const char *body, size_t len, size_t max, kvi_err rv,
	    const char *msg)
{
	kvc_qreq q = {0};
	kvc_qerr e = {0};
	assert_int_equal(kvc_api_query_parse(body, len, max, &q, &e), rv);
	assert_string_equal(e.message, msg);
	assert_null(q.model);
	kvc_qerr_fini(&e);
}

/* ---- what jansson refuses -------------------------------------------------
 */

static void
test_syntax_errors(void **state)
{
	(void)state;
	static const char *const bodies[] = {
	    "",
	    "   ",
	    "x",
	    "\"m\"",
	    "7",
	    "{",
	    "[",
	    "{\"a\"",
	    "{\"a\":",
	    "{\"a\" 1}",
	    "{\"a\":1,}",
	    "{\"a\":1 \"b\":2}",
	    "[1,]",
	    "[1 2]",
	    "[1,",
	    "{} {}",
	    "{}x",
	    "{\"a\":tru}",
	    "{\"a\":nulll}",
	    "{\"a\":True}",
	    "{\"a\":@}",
	    "{\"a\":-}",
	    "{\"a\":-x}",
	    "{\"a\":01}",
	    "{\"a\":1.}",
	    "{\"a\":1.e5}",
	    "{\"a\":1e}",
	    "{\"a\":1e+}",
	    "{\"a\":.5}",
	    "{\"a\":+1}",
	    "{\"a\":1e400}",
	    "{\"a\":-1e400}",
	    "{\"a\":\"abc",
	    "{\"a\":\"abcdefghijklmnopqrstuvwxyz",
	    "{\"a\":\"a\nb\"}",
	    "{\"a\":\"a\tb\"}",
	    "{\"a\":\"\\x\"}",
	    "{\"a\":\"\\",
	    "{\"a\":\"\\u12\"}",
	    "{\"a\":\"\\u12",
	    "{\"a\":\"\\uD800\"}",
	    "{\"a\":\"\\uD800\\n\"}",
	    "{\"a\":\"\\uD800\\u0041\"}",
	    "{\"a\":\"\\uDC00\"}",
	    "{\"a\":\"\\u0000\"}",
	    "{\"a\\u0000\":1}",
	    "{\"a\":1,\n \"a\":2}",
	    "{\"a\":1, \"\\u0061\":2}",
	    "{\"x\":{\"a\":1, \"b\":{}, \"a\":2}}",
	    "\n\n  {\"a\":\n\t[1, 2,\n x]}",
	    /* bytes that are not UTF-8, or are */
	    "{\"a\":\xff}",
	    "{\"a\":\"\xc0\x80\"}",
	    "{\"a\":\"\xed\xa0\x80\"}",
	    "{\"a\":\"\xf4\x90\x80\x80\"}",
	    "{\"a\":\"\xe2\x82\"}",
	    "{\"a\":\"\xe2\x82",
	    "{\"a\":1\xe9}",
	    "{\"a\":tr\x80}",
	    "{\"a\":\"\\\xc3\xa9\"}",
	    "{\"\xc3\xa9\":1 \xc3\xa9}",
	    "{\"\xc3\xa9\xc3\xa9\":\n\"\xe2\x82\xac\", x}",
	};
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		refused_as_jansson(bodies[i], strlen(bodies[i]));
	}
	/* NUL bytes: a token of its own, in a string, after a backslash */
	static const struct {
		const char *b;
		size_t n;
	} nul[] = {
	    {"{\"a\":\0}", 7},          {"{\0}", 3},
	    {"{\"a\":\"x\0\"}", 10},    {"{\"a\":\"x\\\0\"}", 11},
	    {"{\"a\":\"\\u0\0\"}", 12},
	};
	for (size_t i = 0; i < sizeof(nul) / sizeof(nul[0]); i++) {
		refused_as_jansson(nul[i].b, nul[i].n);
	}
}

/* nested writes a body whose member x holds depth - 1 nested arrays (the
 * object is level 1), the innermost holding inner. */
static char *
nested(int depth, const char *inner)
{
	size_t n = 64 + 2 * (size_t)depth + strlen(inner);
	char *b = kvi_malloc(n);
	size_t o = (size_t)snprintf(b, n, "{\"token_ids\":[],\"x\":");
	for (int i = 1; i < depth; i++) {
		b[o++] = '[';
	}
	o += (size_t)snprintf(b + o, n - o, "%s", inner);
	for (int i = 1; i < depth; i++) {
		b[o++] = ']';
	}
	snprintf(b + o, n - o, ",\"model_name\":\"m\"}");
	return b;
}

static void
test_depth(void **state)
{
	(void)state;
	/* jansson counts every value: the arrays reach 2048 with nothing in
	 * the innermost, and a value there is one too deep */
	char *b = nested(2048, "");
	kvc_qreq q = query_ok(b, 8);
	kvc_qreq_fini(&q);
	kvi_free(b);
	b = nested(2048, "1");
	refused_as_jansson(b, strlen(b));
	kvi_free(b);
	b = nested(2049, "");
	refused_as_jansson(b, strlen(b));
	kvi_free(b);
	b = nested(3000, "{\"a\":1}");
	refused_as_jansson(b, strlen(b));
	kvi_free(b);
}

static void
test_many_keys(void **state)
{
	(void)state;
	/* past the reader's 16 inline keys: a table that grows */
	char b[4096];
	size_t o = (size_t)snprintf(b, sizeof(b), "{");
	for (int i = 0; i < 200; i++) {
		o +=
		    (size_t)snprintf(b + o, sizeof(b) - o, "\"k%d\":%d,", i, i);
	}
	snprintf(b + o, sizeof(b) - o,
		 "\"model_name\":\"m\",\"token_ids\":[]}");
	kvc_qreq q = query_ok(b, 8);
	kvc_qreq_fini(&q);
	snprintf(b + o, sizeof(b) - o,
		 "\"model_name\":\"m\",\"token_ids\":[],\"k\\u0031\":7}");
	refused_as_jansson(b, strlen(b));
	/* the same key in two objects is no duplicate */
	q = query_ok("{\"model_name\":\"m\",\"token_ids\":[],\"x\":[{\"a\":1},"
		     "{\"a\":2,\"b\":{\"a\":3}}],\"a\":4}",
		     8);
	kvc_qreq_fini(&q);
}

/* ---- integers beyond int64 ------------------------------------------------
 */

static void
test_big_integers(void **state)
{
	(void)state;
	/* taken exactly where a u64 goes, refused where it does not fit */
	kvc_qreq q = query_ok("{\"model_name\":\"m\",\"token_ids\":[],"
			      "\"instances\":[18446744073709551615,"
			      "9223372036854775808,9223372036854775807],"
			      "\"x\":[123456789012345678901234567890, "
			      "-99999999999999999999]}",
			      8);
	assert_int_equal(q.n_instances, 3);
	assert_true(q.instances[0] == UINT64_MAX);
	assert_true(q.instances[1] == UINT64_C(9223372036854775808));
	assert_true(q.instances[2] == INT64_MAX);
	kvc_qreq_fini(&q);
	/* the first one is jansson's error when the body fails after it */
	const char *b =
	    "{\"x\":[1, 18446744073709551616, -9223372036854775809],"
	    " \"y\": }";
	query_fails(b, strlen(b), 8, KVI_EPROTO,
		    "invalid JSON: too big integer near "
		    "'18446744073709551616' at line 1, column 29 (byte 29)");
	b = "{\"x\":[-9223372036854775809, 1], \"y\": \"\\u0000\"}";
	query_fails(b, strlen(b), 8, KVI_EPROTO,
		    "invalid JSON: too big negative integer near "
		    "'-9223372036854775809' at line 1, column 26 (byte 26)");
	/* too long to quote */
	b = "{\"x\":123456789012345678901,";
	query_fails(b, strlen(b), 8, KVI_EPROTO,
		    "invalid JSON: too big integer at line 1, column 26 "
		    "(byte 26)");
	/* as a key, or the top value: the integer is the error */
	b = "{12345678901234567890123: 1}";
	query_fails(b, strlen(b), 8, KVI_EPROTO,
		    "invalid JSON: too big integer at line 1, column 24 "
		    "(byte 24)");
	/* int64's bounds are integers, one past them is big */
	q = query_ok("{\"model_name\":\"m\",\"token_ids\":[],"
		     "\"instances\":[-0],\"x\":[-9223372036854775808]}",
		     8);
	assert_true(q.instances[0] == 0);
	kvc_qreq_fini(&q);
	b = "{\"model_name\":\"m\",\"token_ids\":[],"
	    "\"instances\":[-9223372036854775808]}";
	query_fails(b, strlen(b), 8, KVI_ERANGE,
		    "instances[0]: -9223372036854775808 is not a u64");
}

/* ---- values ---------------------------------------------------------------
 */

static void
test_strings_decoded(void **state)
{
	(void)state;
	kvc_qreq q = query_ok(
	    "{\"model_\\u006eame\":\"\\u006d\\\"\\\\\\/\\b\\f\\n\\r\\t\","
	    "\"token_ids\":[],\"lora_name\":\"\\ud83d\\ude00\\u00e9\","
	    "\"cache_salt\":\"\xe2\x82\xac\"}",
	    8);
	assert_string_equal(q.model, "m\"\\/\b\f\n\r\t");
	assert_string_equal(q.lora_name, "\xf0\x9f\x98\x80\xc3\xa9");
	assert_string_equal(q.cache_salt, "\xe2\x82\xac");
	kvc_qreq_fini(&q);
	/* a string in an error is quoted as jansson writes it: escaped,
	 * ASCII, cut */
	const char *b =
	    "{\"model_name\":\"m\",\"token_ids\":[],\"dp_rank\":\"\\u00e9\\n"
	    "\\ud83d\\ude00\"}";
	query_fails(
	    b, strlen(b), 8, KVI_EINVAL,
	    "dp_rank must be an integer, got \"\\u00E9\\n\\uD83D\\uDE00\"");
	b = "{\"model_name\":\"m\",\"token_ids\":[],\"top_k\":\"abcdefghijklmno"
	    "pqrstuvwxyz0123456789abcdefghijk\"}";
	query_fails(b, strlen(b), 8, KVI_EINVAL,
		    "top_k must be an integer, got \"abcdefghijklmnopqrstuvwxyz"
		    "0123456789abcdefghijk...");
	/* 48 characters with the quotes: whole */
	b = "{\"model_name\":\"m\",\"token_ids\":[],\"top_k\":\"abcdefghijklmno"
	    "pqrstuvwxyz0123456789abcdefghij\"}";
	query_fails(b, strlen(b), 8, KVI_EINVAL,
		    "top_k must be an integer, got \"abcdefghijklmnopqrstuvwxyz"
		    "0123456789abcdefghij\"");
	b = "{\"model_name\":\"m\",\"token_ids\":[],\"top_k\":0.1}";
	query_fails(b, strlen(b), 8, KVI_EINVAL,
		    "top_k must be an integer, got 0.10000000000000001");
	b = "{\"model_name\":\"m\",\"token_ids\":[],\"top_k\":15e-8}";
	query_fails(b, strlen(b), 8, KVI_EINVAL,
		    "top_k must be an integer, got 1.4999999999999999e-7");
	b = "{\"model_name\":\"m\",\"token_ids\":[],\"top_k\":1E20}";
	query_fails(b, strlen(b), 8, KVI_EINVAL,
		    "top_k must be an integer, got 1e20");
	/* a u64 given as a string may be escaped */
	q = query_ok("{\"model_name\":\"m\",\"token_ids\":[],"
		     "\"instances\":[\"\\u0031\\u0038\"]}",
		     8);
	assert_true(q.instances[0] == 18);
	kvc_qreq_fini(&q);
}

/* ---- token ids ------------------------------------------------------------
 */

/* tokens_body writes a /query body of n ids 100000.., with `bad` written
 * in place of id i. */
static char *
tokens_body(size_t n, size_t i, const char *bad)
{
	size_t cap = n * 8 + 64 + strlen(bad);
	char *b = kvi_malloc(cap);
	size_t o =
	    (size_t)snprintf(b, cap, "{\"model_name\":\"m\",\"token_ids\":[");
	for (size_t k = 0; k < n; k++) {
		o += (size_t)snprintf(b + o, cap - o, "%s", k ? ", " : "");
		if (k == i) {
			o += (size_t)snprintf(b + o, cap - o, "%s", bad);
		} else {
			o +=
			    (size_t)snprintf(b + o, cap - o, "%zu", 100000 + k);
		}
	}
	snprintf(b + o, cap - o, "]}");
	return b;
}

static void
test_tokens_resumed(void **state)
{
	(void)state;
	/* a wrong id at every place of 3 x 64 bytes: the 64-byte reader
	 * declines, the element reader goes on from its last comma */
	for (size_t i = 0; i < 40; i++) {
		char msg[64];
		char *b = tokens_body(40, i, "4294967296");
		snprintf(msg, sizeof(msg),
			 "token_ids[%zu]: 4294967296 is not a u32", i);
		query_fails(b, strlen(b), 64, KVI_ERANGE, msg);
		kvi_free(b);
		b = tokens_body(40, i, "\"7\"");
		snprintf(msg, sizeof(msg), "token_ids[%zu]: \"7\" is not a u32",
			 i);
		query_fails(b, strlen(b), 64, KVI_EINVAL, msg);
		kvi_free(b);
		/* -0 is 0, which the 64-byte reader leaves to the other */
		b = tokens_body(40, i, "-0");
		kvc_qreq q = query_ok(b, 64);
		assert_int_equal(q.n_tokens, 40);
		for (size_t k = 0; k < 40; k++) {
			assert_int_equal(q.token_ids[k],
					 k == i ? 0 : 100000 + k);
		}
		kvc_qreq_fini(&q);
		kvi_free(b);
		/* and JSON that is not: jansson's words */
		b = tokens_body(40, i, "1,");
		refused_as_jansson(b, strlen(b));
		kvi_free(b);
		b = tokens_body(40, i, "1\xff");
		refused_as_jansson(b, strlen(b));
		kvi_free(b);
	}
	/* too many: counted to the end */
	char *b = tokens_body(40, 39, "-1");
	query_fails(b, strlen(b), 10, KVI_ETOOBIG,
		    "token_ids has 40 tokens, more than the maximum of 10");
	kvi_free(b);
	b = tokens_body(40, 0, "[1, {\"a\": 2}]");
	query_fails(b, strlen(b), 64, KVI_EINVAL,
		    "token_ids[0]: an array is not a u32");
	kvi_free(b);
}

/* ---- what the API refuses now and took before ------------------------- */

static void
test_refused_now(void **state)
{
	(void)state;
	/* jansson dropped a NUL byte right after a number or a word (its
	 * lexer puts the byte back and then takes it for its buffer's end):
	 * [1\0, 2] was [1, 2]. A NUL is no white space. */
	static const char b1[] =
	    "{\"model_name\":\"m\",\"token_ids\":[1\0, 2]}";
	query_fails(b1, sizeof(b1) - 1, 8, KVI_EPROTO,
		    "invalid JSON: ']' expected near end of file at line 1, "
		    "column 33 (byte 33)");
	static const char b2[] = "{\"model_name\":\"m\",\"token_ids\":[],"
				 "\"x\":true\0}";
	query_fails(b2, sizeof(b2) - 1, 8, KVI_EPROTO,
		    "invalid JSON: '}' expected near end of file at line 1, "
		    "column 42 (byte 42)");
	/* an integer beyond int64 was taken as an mm_features identifier
	 * (as a NUL byte and its digits), one within int64 was not */
	const char *b = "{\"model_name\":\"m\",\"token_ids\":[1,2],"
			"\"mm_features\":[{\"identifier\":18446744073709551616,"
			"\"offset\":0,\"length\":1}]}";
	query_fails(b, strlen(b), 8, KVI_EINVAL,
		    "mm_features[0].identifier must be a non-empty string");
}

/* ---- registration ---------------------------------------------------------
 */

static void
test_register_escaped(void **state)
{
	(void)state;
	const char *b = "{\"name\":\"ns\\/p\\u00e9\",\"ip\":\"10.0.0.1\","
			"\"zmq_port\":5557,\"model_name\":\"\\u006d\","
			"\"block_size\":16,\"x\":[{\"name\":1}]}";
	kvc_pod p = {0};
	kvc_qerr e = {0};
	assert_int_equal(kvc_api_register_parse(b, strlen(b), 2, &p, &e),
			 KVI_OK);
	assert_string_equal(p.name, "ns/p\xc3\xa9");
	assert_string_equal(p.model, "m");
	assert_int_equal(p.dp_size, 2);
	kvc_pod_fini(&p);
	b = "{\"instance_id\":\"18446744073709551615\",\"model_name\":\"m\"}";
	kvc_api_unregister u = {0};
	assert_int_equal(kvc_api_unregister_parse(b, strlen(b), &u, &e),
			 KVI_OK);
	assert_true(u.instance_id == UINT64_MAX);
	kvc_api_unregister_fini(&u);
	b = "[{\"name\":\"ns/p\"}]";
	assert_int_equal(kvc_api_unregister_parse(b, strlen(b), &u, &e),
			 KVI_EINVAL);
	assert_string_equal(e.message,
			    "the body must be a JSON object, not an array");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_syntax_errors),
	    cmocka_unit_test(test_depth),
	    cmocka_unit_test(test_many_keys),
	    cmocka_unit_test(test_big_integers),
	    cmocka_unit_test(test_strings_decoded),
	    cmocka_unit_test(test_tokens_resumed),
	    cmocka_unit_test(test_refused_now),
	    cmocka_unit_test(test_register_escaped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
