/*
 * test_api_packed.c - the compact form of /query, /query_by_hash and
 * /routed (api_packed.h, docs/api.md#compact-request-bodies): the body's
 * packed integers read exactly, little-endian, every parameter, and every
 * refusal with its status and message, in the API's order.
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

#include "api_packed.h"

#define MAX 8

typedef struct body {
	const uint8_t *bytes;
	size_t len;
} body;

static void
copy_body(void *arg, void *dst)
{
	const body *b = arg;
	memcpy(dst, b->bytes, b->len);
}

/* parse reads a packed request: params as "name", "value", ..., NULL. */
static kvi_err
parse(kvc_packed_route route, const char *const *params, const void *bytes,
      size_t len, kvc_qreq *q, kvc_qerr *e)
{
	size_t n = 0;
	while (params[2 * n] != NULL) {
		n++;
	}
	body b = {bytes, len};
	return kvc_api_packed_parse(route, params, n, len, copy_body, &b, MAX,
				    q, e);
}

static void
fails(kvc_packed_route route, const char *const *params, size_t len, kvi_err rv,
      int status, const char *msg)
{
	uint8_t bytes[256] = {0};
	kvc_qreq q = {0};
	kvc_qerr e = {0};
	assert_true(len <= sizeof(bytes));
	assert_int_equal(parse(route, params, bytes, len, &q, &e), rv);
	assert_int_equal(e.status, status);
	assert_string_equal(e.message, msg);
	assert_null(q.model); /* out untouched */
	kvc_qerr_fini(&e);
}

static void
test_content_type(void **state)
{
	(void)state;
	assert_true(kvc_api_is_packed("application/octet-stream"));
	assert_true(kvc_api_is_packed("Application/Octet-Stream"));
	assert_true(kvc_api_is_packed(" application/octet-stream; x=y"));
	assert_false(kvc_api_is_packed(NULL));
	assert_false(kvc_api_is_packed("application/json"));
	assert_false(kvc_api_is_packed("application/octet-streams"));
	assert_false(kvc_api_is_packed(""));
}

static void
test_tokens_little_endian(void **state)
{
	(void)state;
	const uint8_t bytes[] = {1,    0,    0,    0,    0x78, 0x56,
				 0x34, 0x12, 0xff, 0xff, 0xff, 0xff};
	const char *params[] = {"model_name", "m",
				"top_k",      "8",
				"lora_name",  "l",
				"cache_salt", "s",
				"dp_rank",    "65535",
				"pending",    "false",
				"instances",  "0,18446744073709551615",
				NULL};
	kvc_qreq q = {0};
	kvc_qerr e = {0};
	assert_int_equal(
	    parse(KVC_PACKED_QUERY, params, bytes, sizeof(bytes), &q, &e),
	    KVI_OK);
	assert_string_equal(q.model, "m");
	assert_int_equal(q.n_tokens, 3);
	assert_int_equal(q.token_ids[0], 1);
	assert_int_equal(q.token_ids[1], 0x12345678u);
	assert_int_equal(q.token_ids[2], UINT32_MAX);
	assert_int_equal(q.top_k, 8);
	assert_string_equal(q.lora_name, "l");
	assert_string_equal(q.cache_salt, "s");
	assert_true(q.has_dp_rank);
	assert_int_equal(q.dp_rank, 65535);
	assert_true(q.no_pending);
	assert_int_equal(q.n_instances, 2);
	assert_true(q.instances[0] == 0 && q.instances[1] == UINT64_MAX);
	assert_null(q.block_hashes);
	kvc_qreq_fini(&q);

	/* an empty prompt is a prompt of no blocks, as in JSON */
	const char *only[] = {"model_name", "m", NULL};
	assert_int_equal(parse(KVC_PACKED_QUERY, only, "", 0, &q, &e), KVI_OK);
	assert_int_equal(q.n_tokens, 0);
	assert_null(q.token_ids);
	assert_false(q.no_pending);
	assert_int_equal(q.top_k, 0);
	kvc_qreq_fini(&q);
}

static void
test_hashes(void **state)
{
	(void)state;
	uint8_t bytes[16];
	for (int i = 0; i < 8; i++) {
		bytes[i] = (uint8_t)(0x01 << (i % 8));
		bytes[8 + i] = 0xff;
	}
	const char *params[] = {"model_name", "m", NULL};
	kvc_qreq q = {0};
	kvc_qerr e = {0};
	assert_int_equal(
	    parse(KVC_PACKED_HASH_QUERY, params, bytes, sizeof(bytes), &q, &e),
	    KVI_OK);
	assert_int_equal(q.n_hashes, 2);
	assert_true(q.block_hashes[0] == 0x8040201008040201ull);
	assert_true(q.block_hashes[1] == UINT64_MAX);
	assert_null(q.token_ids);
	kvc_qreq_fini(&q);
	/* a /query_by_hash has no LoRA or salt, as in JSON */
	const char *lora[] = {"model_name", "m", "lora_name", "x", NULL};
	fails(KVC_PACKED_HASH_QUERY, lora, 8, KVI_EINVAL, 400,
	      "lora_name is not a parameter of a packed /query_by_hash");
}

static void
test_routed(void **state)
{
	(void)state;
	uint8_t bytes[16] = {7};
	const char *by_pod[] = {"model_name", "m",       "pod",
				"p",          "dp_rank", "1",
				"ttl_ms",     "600000",  NULL};
	kvc_qreq q = {0};
	kvc_qerr e = {0};
	assert_int_equal(parse(KVC_PACKED_ROUTED, by_pod, bytes, 16, &q, &e),
			 KVI_OK);
	assert_string_equal(q.pod, "p");
	assert_int_equal(q.n_tokens, 4);
	assert_int_equal(q.token_ids[0], 7);
	assert_true(q.has_ttl_ms && q.ttl_ms == 600000);
	kvc_qreq_fini(&q);
	const char *by_id[] = {"model_name", "m",      "instance_id",
			       "42",         "prompt", "block_hashes",
			       NULL};
	assert_int_equal(parse(KVC_PACKED_ROUTED, by_id, bytes, 16, &q, &e),
			 KVI_OK);
	assert_true(q.has_instance_id && q.instance_id == 42);
	assert_int_equal(q.n_hashes, 2);
	assert_true(q.block_hashes[0] == 7);
	kvc_qreq_fini(&q);

	const char *neither[] = {"model_name", "m", NULL};
	fails(KVC_PACKED_ROUTED, neither, 4, KVI_EINVAL, 400,
	      "name the rank the request went to by pod or by instance_id "
	      "(one of them), with dp_rank");
	const char *both[] = {"model_name",  "m", "pod", "p",
			      "instance_id", "1", NULL};
	fails(KVC_PACKED_ROUTED, both, 4, KVI_EINVAL, 400,
	      "name the rank the request went to by pod or by instance_id "
	      "(one of them), with dp_rank");
	const char *empty_pod[] = {"model_name", "m", "pod", "", NULL};
	fails(KVC_PACKED_ROUTED, empty_pod, 4, KVI_EINVAL, 400,
	      "pod must not be empty");
	const char *ttl[] = {"model_name", "m", "pod", "p",
			     "ttl_ms",     "0", NULL};
	fails(KVC_PACKED_ROUTED, ttl, 4, KVI_ERANGE, 400,
	      "ttl_ms 0 is not in 1..600000");
	const char *prompt[] = {"model_name", "m", "pod", "p",
				"prompt",     "x", NULL};
	fails(KVC_PACKED_ROUTED, prompt, 4, KVI_EINVAL, 400,
	      "prompt must be token_ids or block_hashes, got \"x\"");
	const char *salt[] = {"model_name", "m",      "pod",
			      "p",          "prompt", "block_hashes",
			      "cache_salt", "s",      NULL};
	fails(KVC_PACKED_ROUTED, salt, 8, KVI_EINVAL, 400,
	      "cache_salt applies to token ids only");
	/* /routed's parameters are its own */
	const char *on_query[] = {"model_name", "m", "pod", "p", NULL};
	fails(KVC_PACKED_QUERY, on_query, 4, KVI_EINVAL, 400,
	      "pod is not a parameter of a packed /query");
}

static void
test_refusals(void **state)
{
	(void)state;
	const char *none[] = {NULL};
	fails(KVC_PACKED_QUERY, none, 4, KVI_EINVAL, 400,
	      "model_name is missing");
	const char *empty[] = {"model_name", "", NULL};
	fails(KVC_PACKED_QUERY, empty, 4, KVI_EINVAL, 400,
	      "model_name is empty");
	const char *unknown[] = {"model_name", "m", "topk", "8", NULL};
	fails(KVC_PACKED_QUERY, unknown, 4, KVI_EINVAL, 400,
	      "topk is not a parameter of a packed /query");
	const char *twice[] = {"model_name", "m", "top_k", "1",
			       "top_k",      "2", NULL};
	fails(KVC_PACKED_QUERY, twice, 4, KVI_EINVAL, 400,
	      "top_k is given more than once");
	const char *m[] = {"model_name", "m", NULL};
	fails(KVC_PACKED_QUERY, m, 6, KVI_EINVAL, 400,
	      "a packed body of token_ids holds 4-byte integers; 6 bytes is "
	      "not a multiple of 4");
	fails(KVC_PACKED_HASH_QUERY, m, 12, KVI_EINVAL, 400,
	      "a packed body of block_hashes holds 8-byte integers; 12 bytes "
	      "is not a multiple of 8");
	fails(KVC_PACKED_QUERY, m, 4 * (MAX + 1), KVI_ETOOBIG, 413,
	      "token_ids has 9 tokens, more than the maximum of 8");
	fails(KVC_PACKED_HASH_QUERY, m, 8 * (MAX + 1), KVI_ETOOBIG, 413,
	      "block_hashes has 9 hashes, more than the maximum of 8");
	/* the model comes before the body, the body before the rest */
	const char *late[] = {"top_k", "0", NULL};
	fails(KVC_PACKED_QUERY, late, 6, KVI_EINVAL, 400,
	      "model_name is missing");
	const char *order[] = {"model_name", "m", "top_k", "0", NULL};
	fails(KVC_PACKED_QUERY, order, 6, KVI_EINVAL, 400,
	      "a packed body of token_ids holds 4-byte integers; 6 bytes is "
	      "not a multiple of 4");
}

static void
test_values(void **state)
{
	(void)state;
	struct {
		const char *name, *value;
		kvi_err rv;
		const char *msg;
	} cases[] = {
	    {"top_k", "0", KVI_ERANGE, "top_k 0 is not in 1..1048576"},
	    {"top_k", "1048577", KVI_ERANGE,
	     "top_k 1048577 is not in 1..1048576"},
	    {"top_k", "-1", KVI_EINVAL, "top_k must be an integer, got \"-1\""},
	    {"top_k", "", KVI_EINVAL, "top_k must be an integer, got \"\""},
	    {"top_k", "08", KVI_EINVAL, "top_k must be an integer, got \"08\""},
	    {"top_k", "1.5", KVI_EINVAL,
	     "top_k must be an integer, got \"1.5\""},
	    {"dp_rank", "65536", KVI_ERANGE,
	     "dp_rank 65536 does not fit in u16"},
	    {"dp_rank", "x", KVI_EINVAL,
	     "dp_rank must be an integer, got \"x\""},
	    {"pending", "1", KVI_EINVAL,
	     "pending must be true or false, got \"1\""},
	    {"instances", "1,,2", KVI_EINVAL,
	     "instances[1]: \"\" is not a u64"},
	    {"instances", "18446744073709551616", KVI_ERANGE,
	     "instances[0]: \"18446744073709551616\" is not a u64"},
	    {"instances", "", KVI_EINVAL, "instances[0]: \"\" is not a u64"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *params[] = {"model_name", "m", cases[i].name,
					cases[i].value, NULL};
		fails(KVC_PACKED_QUERY, params, 4, cases[i].rv, 400,
		      cases[i].msg);
	}
	const char *id[] = {"model_name", "m", "instance_id",
			    "18446744073709551616", NULL};
	fails(KVC_PACKED_ROUTED, id, 4, KVI_ERANGE, 400,
	      "instance_id 18446744073709551616 is not a u64");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_content_type),
	    cmocka_unit_test(test_tokens_little_endian),
	    cmocka_unit_test(test_hashes),
	    cmocka_unit_test(test_routed),
	    cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_values),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
