/*
 * test_api_json.c - the coordinator's HTTP API bodies (docs/api.md).
 *
 * Every error docs/api.md lists, with its status, error code and exact message
 * (bodies that are not JSON, wrong types, token ids that are not u32, dp_rank
 * 65536, dp_size 0 and 65537, ports, too many tokens or hashes: 413), u64 ids
 * and hashes exact up to 2^64-1 as numbers and as decimal strings, both forms
 * of /register and /unregister, and the error body (the /query response:
 * test_api_response.c).
 *
 * Bodies are written with ' for " (see J()).
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

#include "api_fixture.h"
#include "api_json.h"
#include "api_query.h"

#define MAX_TOKENS 8

/* ---- helpers: a parse that must fail ------------------------------------- */

static void
query_fails(const char *body, kvi_err rv, int status, const char *msg)
{
	kvc_qreq q = {0};
	kvc_qerr e = {0};
	assert_int_equal(
	    kvc_api_query_parse(J(body), strlen(body), MAX_TOKENS, &q, &e), rv);
	assert_int_equal(e.status, status);
	assert_string_equal(e.message, msg);
	assert_null(q.model); /* out untouched */
	kvc_qerr_fini(&e);
}

static void
hash_query_fails(const char *body, kvi_err rv, int status, const char *msg)
{
	kvc_qreq q = {0};
	kvc_qerr e = {0};
	assert_int_equal(
	    kvc_api_hash_query_parse(J(body), strlen(body), 2, &q, &e), rv);
	assert_int_equal(e.status, status);
	assert_string_equal(e.message, msg);
	assert_null(q.model);
	kvc_qerr_fini(&e);
}

static void
register_fails(const char *body, kvi_err rv, const char *msg)
{
	kvc_pod p = {0};
	kvc_qerr e = {0};
	assert_int_equal(
	    kvc_api_register_parse(J(body), strlen(body), 1, &p, &e), rv);
	assert_int_equal(e.status, 400);
	assert_string_equal(e.message, msg);
	assert_null(p.model);
	kvc_qerr_fini(&e);
}

static void
unregister_fails(const char *body, kvi_err rv, const char *msg)
{
	kvc_api_unregister u = {0};
	kvc_qerr e = {0};
	assert_int_equal(
	    kvc_api_unregister_parse(J(body), strlen(body), &u, &e), rv);
	assert_int_equal(e.status, 400);
	assert_string_equal(e.message, msg);
	assert_null(u.name);
	assert_null(u.model);
	kvc_qerr_fini(&e);
}

/* ---- /query -------------------------------------------------------------- */

static void
test_query_mm_features(void **state)
{
	(void)state;
	const char *body =
	    J("{'token_ids': [1, 2, 3, 4, 5, 6, 7, 8], 'model_name': 'm',"
	      " 'mm_features': [{'identifier': 'img-a', 'offset': 1,"
	      " 'length': 3}, {'identifier': 'img-b', 'offset': 4,"
	      " 'length': 4, 'modality': 'image'}]}");
	kvc_qreq q = {0};
	kvc_qerr e = {0};
	assert_int_equal(
	    kvc_api_query_parse(body, strlen(body), MAX_TOKENS, &q, &e),
	    KVI_OK);
	assert_int_equal(q.n_mm, 2);
	assert_memory_equal(q.mm[0].id, "img-a", 5);
	assert_int_equal(q.mm[0].id_len, 5);
	assert_int_equal(q.mm[0].offset, 1);
	assert_int_equal(q.mm[0].length, 3);
	assert_memory_equal(q.mm[1].id, "img-b", 5);
	assert_int_equal(q.mm[1].offset, 4);
	kvc_qreq_fini(&q);
	/* null and [] are no items */
	body = J("{'token_ids': [1], 'model_name': 'm', 'mm_features': null}");
	assert_int_equal(
	    kvc_api_query_parse(body, strlen(body), MAX_TOKENS, &q, &e),
	    KVI_OK);
	assert_int_equal(q.n_mm, 0);
	kvc_qreq_fini(&q);
	body = J("{'token_ids': [1], 'model_name': 'm', 'mm_features': []}");
	assert_int_equal(
	    kvc_api_query_parse(body, strlen(body), MAX_TOKENS, &q, &e),
	    KVI_OK);
	assert_int_equal(q.n_mm, 0);
	assert_null(q.mm);
	kvc_qreq_fini(&q);

	query_fails("{'token_ids': [1, 2], 'model_name': 'm', 'mm_features': "
		    "[{'identifier': 'a', 'offset': 1, 'length': 2}]}",
		    KVI_EINVAL, 400,
		    "mm_features[0]: tokens 1..3 are past the prompt's 2 "
		    "tokens");
	query_fails("{'token_ids': [1, 2, 3, 4], 'model_name': 'm', "
		    "'mm_features': [{'identifier': 'a', 'offset': 1, "
		    "'length': 2}, {'identifier': 'b', 'offset': 2, 'length': "
		    "1}]}",
		    KVI_EINVAL, 400,
		    "mm_features[1]: offset 2 is before the end of "
		    "mm_features[0] (3): entries must be sorted and not "
		    "overlap");
	query_fails("{'token_ids': [1, 2], 'model_name': 'm', 'mm_features': "
		    "[{'identifier': 'a', 'offset': -1, 'length': 1}]}",
		    KVI_ERANGE, 400, "mm_features[0].offset: -1 is not a u64");
	query_fails("{'token_ids': [1, 2], 'model_name': 'm', 'mm_features': "
		    "[{'identifier': 'a', 'offset': 0, 'length': 0}]}",
		    KVI_ERANGE, 400,
		    "mm_features[0].length: 0, an item covers at least one "
		    "token");
	query_fails("{'token_ids': [1, 2], 'model_name': 'm', 'mm_features': "
		    "[{'identifier': '', 'offset': 0, 'length': 1}]}",
		    KVI_EINVAL, 400,
		    "mm_features[0].identifier must be a non-empty string");
	query_fails("{'token_ids': [1, 2], 'model_name': 'm', 'mm_features': "
		    "[{'offset': 0, 'length': 1}]}",
		    KVI_EINVAL, 400,
		    "mm_features[0].identifier must be a non-empty string");
	query_fails("{'token_ids': [1, 2], 'model_name': 'm', 'mm_features': "
		    "[7]}",
		    KVI_EINVAL, 400, "mm_features[0] must be an object");
	query_fails("{'token_ids': [1, 2], 'model_name': 'm', 'mm_features': "
		    "[{'identifier': 'a', 'offset': 0}]}",
		    KVI_EINVAL, 400,
		    "mm_features[0].length: missing is not a u64");
}

static void
test_query_valid(void **state)
{
	(void)state;
	const char *body =
	    J("{'token_ids': [0, 1, 4294967295], 'model_name': 'm',"
	      " 'lora_name': 'a', 'cache_salt': 's', 'unknown': {'x': []},"
	      " 'instances': [7, 18446744073709551615, '9223372036854775808'],"
	      " 'dp_rank': 65535}");
	kvc_qreq q = {0};
	kvc_qerr e = {0};
	assert_int_equal(
	    kvc_api_query_parse(body, strlen(body), MAX_TOKENS, &q, &e),
	    KVI_OK);
	assert_string_equal(q.model, "m");
	assert_string_equal(q.lora_name, "a");
	assert_string_equal(q.cache_salt, "s");
	assert_int_equal(q.n_tokens, 3);
	assert_int_equal(q.token_ids[0], 0);
	assert_int_equal(q.token_ids[1], 1);
	assert_int_equal(q.token_ids[2], UINT32_MAX);
	assert_int_equal(q.n_instances, 3);
	assert_true(q.instances[0] == 7);
	assert_true(q.instances[1] == UINT64_MAX);
	assert_true(q.instances[2] == UINT64_C(9223372036854775808));
	assert_true(q.has_dp_rank);
	assert_int_equal(q.dp_rank, 65535);
	assert_null(q.block_hashes);
	kvc_qreq_fini(&q);
	assert_null(q.model);
}

static void
test_query_optional_fields(void **state)
{
	(void)state;
	/* Absent and null optional fields are both "not given"; an empty
	 * token list is a query of no blocks; exactly MAX_TOKENS fit. */
	const char *bodies[] = {
	    J("{'token_ids': [], 'model_name': 'm'}"),
	    J("{'token_ids': [1,2,3,4,5,6,7,8], 'model_name': 'm',"
	      " 'lora_name': null, 'cache_salt': null, 'instances': null,"
	      " 'dp_rank': null}"),
	};
	for (size_t i = 0; i < 2; i++) {
		kvc_qreq q = {0};
		kvc_qerr e = {0};
		assert_int_equal(kvc_api_query_parse(bodies[i],
						     strlen(bodies[i]),
						     MAX_TOKENS, &q, &e),
				 KVI_OK);
		assert_int_equal(q.n_tokens, i == 0 ? 0 : 8);
		assert_null(q.lora_name);
		assert_null(q.cache_salt);
		assert_int_equal(q.n_instances, 0);
		assert_null(q.instances);
		assert_false(q.has_dp_rank);
		kvc_qreq_fini(&q);
	}
}

static void
test_query_invalid_json(void **state)
{
	(void)state;
	struct {
		const char *body;
		const char *where;
	} cases[] = {
	    {"{'token_ids': [1, 2", "at line 1, column 19 (byte 19)"},
	    {"", "at line 1, column 0 (byte 0)"},
	    {"{'model_name': 'm'} x", "at line 1, column 21 (byte 21)"},
	    {"{'a': 1,\n 'a': 2}",
	     "duplicate object key near '\"a\"' at line 2, column 4 (byte 13)"},
	    /* a number too big even for a u64 is fine, the syntax is not */
	    {"{'x': 99999999999999999999999, 'y': }",
	     "at line 1, column 29 (byte 29)"},
	    /* NUL in a string: rejected, the u64 rewrite notwithstanding */
	    {"{'model_name': 'a\\u0000', 'instances': [18446744073709551615]}",
	     "\\u0000 is not allowed"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *body = J(cases[i].body);
		kvc_qreq q = {0};
		kvc_qerr e = {0};
		assert_int_equal(
		    kvc_api_query_parse(body, strlen(body), MAX_TOKENS, &q, &e),
		    KVI_EPROTO);
		assert_int_equal(e.status, 400);
		assert_memory_equal(e.message, "invalid JSON: ", 14);
		if (strstr(e.message, cases[i].where) == NULL) {
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, e.message,
				 cases[i].where);
		}
	}
	query_fails("[1, 2]", KVI_EINVAL, 400,
		    "the body must be a JSON object, not an array");
}

static void
test_query_wrong_types(void **state)
{
	(void)state;
	query_fails("{'token_ids': 'x', 'model_name': 'm'}", KVI_EINVAL, 400,
		    "token_ids must be an array, got \"x\"");
	query_fails("{'token_ids': null, 'model_name': 'm'}", KVI_EINVAL, 400,
		    "token_ids must be an array, got null");
	query_fails("{'model_name': 'm'}", KVI_EINVAL, 400,
		    "token_ids is missing");
	query_fails("{'token_ids': [1], 'model_name': 5}", KVI_EINVAL, 400,
		    "model_name must be a string, got 5");
	query_fails("{'token_ids': [1], 'model_name': 18446744073709551616}",
		    KVI_EINVAL, 400,
		    "model_name must be a string, got 18446744073709551616");
	query_fails("{'token_ids': [1], 'model_name': 'm', 'lora_name': []}",
		    KVI_EINVAL, 400,
		    "lora_name must be a string, got an array");
	query_fails("{'token_ids': [1], 'model_name': 'm', 'cache_salt': {}}",
		    KVI_EINVAL, 400,
		    "cache_salt must be a string, got an object");
	query_fails("{'token_ids': [1], 'model_name': 'm', 'instances': 7}",
		    KVI_EINVAL, 400, "instances must be an array, got 7");
	query_fails("{'token_ids': [1], 'model_name': 'm', 'dp_rank': '1'}",
		    KVI_EINVAL, 400, "dp_rank must be an integer, got \"1\"");
	query_fails("{'token_ids': [1], 'model_name': 'm', 'dp_rank': 1.5}",
		    KVI_EINVAL, 400, "dp_rank must be an integer, got 1.5");
	query_fails("{'token_ids': [1, 'a'], 'model_name': 'm'}", KVI_EINVAL,
		    400, "token_ids[1]: \"a\" is not a u32");
	query_fails("{'token_ids': [1, 2, 3.0], 'model_name': 'm'}", KVI_EINVAL,
		    400, "token_ids[2]: 3.0 is not a u32");
	query_fails("{'token_ids': [true], 'model_name': 'm'}", KVI_EINVAL, 400,
		    "token_ids[0]: true is not a u32");
}

static void
test_query_model_name(void **state)
{
	(void)state;
	query_fails("{'token_ids': [1]}", KVI_EINVAL, 400,
		    "model_name is missing");
	query_fails("{'token_ids': [1], 'model_name': ''}", KVI_EINVAL, 400,
		    "model_name is empty");
	query_fails("{'token_ids': [1], 'model_name': null}", KVI_EINVAL, 400,
		    "model_name must be a string, got null");
}

static void
test_query_token_not_u32(void **state)
{
	(void)state;
	query_fails("{'token_ids': [0, 1, 2, 4294967296], 'model_name': 'm'}",
		    KVI_ERANGE, 400, "token_ids[3]: 4294967296 is not a u32");
	query_fails("{'token_ids': [-1], 'model_name': 'm'}", KVI_ERANGE, 400,
		    "token_ids[0]: -1 is not a u32");
	query_fails("{'token_ids': [1, 18446744073709551615],"
		    " 'model_name': 'm'}",
		    KVI_ERANGE, 400,
		    "token_ids[1]: 18446744073709551615 is not a u32");
	query_fails("{'token_ids': [-99999999999999999999], 'model_name': 'm'}",
		    KVI_ERANGE, 400,
		    "token_ids[0]: -99999999999999999999 is not a u32");
}

static void
test_query_dp_rank_not_u16(void **state)
{
	(void)state;
	query_fails("{'token_ids': [1], 'model_name': 'm', 'dp_rank': 65536}",
		    KVI_ERANGE, 400, "dp_rank 65536 does not fit in u16");
	query_fails("{'token_ids': [1], 'model_name': 'm', 'dp_rank': -1}",
		    KVI_ERANGE, 400, "dp_rank -1 does not fit in u16");
	query_fails("{'token_ids': [1], 'model_name': 'm',"
		    " 'dp_rank': 18446744073709551616}",
		    KVI_ERANGE, 400,
		    "dp_rank 18446744073709551616 does not fit in u16");
}

static void
test_query_too_many_tokens(void **state)
{
	(void)state;
	query_fails("{'token_ids': [1,2,3,4,5,6,7,8,9], 'model_name': 'm'}",
		    KVI_ETOOBIG, 413,
		    "token_ids has 9 tokens, more than the maximum of 8");
}

static void
test_query_instances_not_u64(void **state)
{
	(void)state;
	query_fails("{'token_ids': [1], 'model_name': 'm',"
		    " 'instances': [1, 18446744073709551616]}",
		    KVI_ERANGE, 400,
		    "instances[1]: 18446744073709551616 is not a u64");
	query_fails("{'token_ids': [1], 'model_name': 'm', 'instances': [-7]}",
		    KVI_ERANGE, 400, "instances[0]: -7 is not a u64");
	query_fails("{'token_ids': [1], 'model_name': 'm', 'instances': [7.5]}",
		    KVI_EINVAL, 400, "instances[0]: 7.5 is not a u64");
	query_fails("{'token_ids': [1], 'model_name': 'm',"
		    " 'instances': ['18446744073709551616']}",
		    KVI_EINVAL, 400,
		    "instances[0]: \"18446744073709551616\" is not a u64");
	query_fails("{'token_ids': [1], 'model_name': 'm',"
		    " 'instances': ['07']}",
		    KVI_EINVAL, 400, "instances[0]: \"07\" is not a u64");
	query_fails("{'token_ids': [1], 'model_name': 'm',"
		    " 'instances': ['-1']}",
		    KVI_EINVAL, 400, "instances[0]: \"-1\" is not a u64");
	/* a long literal is quoted, cut short */
	query_fails(
	    "{'token_ids': [1], 'model_name': 'm', 'instances': "
	    "[1234567890123456789012345678901234567890123456789012345]}",
	    KVI_ERANGE, 400,
	    "instances[0]: "
	    "123456789012345678901234567890123456789012345678... "
	    "is not a u64");
}

/* ---- /query_by_hash ------------------------------------------------------ */

static void
test_hash_query_u64_exact(void **state)
{
	(void)state;
	/* Pretty-printed, with digits and escapes inside strings that must
	 * not be taken for numbers. */
	const char *body =
	    J("{\n  'model_name': 'm\\'99999999999999999999',\n"
	      "  'block_hashes': [18446744073709551615,\t9223372036854775807,"
	      "\r\n 9223372036854775808, '18446744073709551614'],\n"
	      "  'x': '\\\\', 'instances': [0], 'dp_rank': 0}");
	kvc_qreq q = {0};
	kvc_qerr e = {0};
	assert_int_equal(
	    kvc_api_hash_query_parse(body, strlen(body), 4, &q, &e), KVI_OK);
	assert_string_equal(q.model, "m\"99999999999999999999");
	assert_int_equal(q.n_hashes, 4);
	assert_true(q.block_hashes[0] == UINT64_MAX);
	assert_true(q.block_hashes[1] == UINT64_C(9223372036854775807));
	assert_true(q.block_hashes[2] == UINT64_C(9223372036854775808));
	assert_true(q.block_hashes[3] == UINT64_MAX - 1);
	assert_int_equal(q.n_instances, 1);
	assert_true(q.instances[0] == 0);
	assert_true(q.has_dp_rank);
	assert_int_equal(q.dp_rank, 0);
	assert_int_equal(q.n_tokens, 0);
	assert_null(q.lora_name);
	kvc_qreq_fini(&q);
}

static void
test_hash_query_errors(void **state)
{
	(void)state;
	hash_query_fails("{'model_name': 'm'}", KVI_EINVAL, 400,
			 "block_hashes is missing");
	hash_query_fails("{'block_hashes': [1], 'model_name': ''}", KVI_EINVAL,
			 400, "model_name is empty");
	hash_query_fails("{'block_hashes': [1, 2, 3], 'model_name': 'm'}",
			 KVI_ETOOBIG, 413,
			 "block_hashes has 3 hashes, more than the maximum "
			 "of 2");
	hash_query_fails("{'block_hashes': [1, -1], 'model_name': 'm'}",
			 KVI_ERANGE, 400, "block_hashes[1]: -1 is not a u64");
	hash_query_fails("{'block_hashes': [18446744073709551616],"
			 " 'model_name': 'm'}",
			 KVI_ERANGE, 400,
			 "block_hashes[0]: 18446744073709551616 is not a u64");
	hash_query_fails("{'block_hashes': [1e3], 'model_name': 'm'}",
			 KVI_EINVAL, 400,
			 "block_hashes[0]: 1000.0 is not a u64");
	hash_query_fails("{'block_hashes': [1], 'model_name': 'm',"
			 " 'dp_rank': 65536}",
			 KVI_ERANGE, 400, "dp_rank 65536 does not fit in u16");
}

/* ---- /register and /unregister ------------------------------------------- */

static void
test_register_per_rank(void **state)
{
	(void)state;
	const char *body =
	    J("{'instance_id': 18446744073709551615, 'endpoint': "
	      "'tcp://10.0.0.5:5557', 'model_name': 'm', 'block_size': 16,"
	      " 'dp_rank': 3, 'replay_endpoint': 'tcp://10.0.0.5:6557',"
	      " 'recover_endpoint': 'http://10.0.0.5:8100'}");
	kvc_pod p = {0};
	kvc_qerr e = {0};
	assert_int_equal(kvc_api_register_parse(body, strlen(body), 4, &p, &e),
			 KVI_OK);
	assert_int_equal(p.source, KVC_SOURCE_HTTP);
	assert_null(p.name);
	assert_true(p.instance_id == UINT64_MAX);
	assert_string_equal(p.endpoint, "tcp://10.0.0.5:5557");
	assert_string_equal(p.model, "m");
	assert_int_equal(p.block_size, 16);
	assert_int_equal(p.rank, 3);
	assert_int_equal(p.dp_size, 1);
	assert_string_equal(p.replay_endpoint, "tcp://10.0.0.5:6557");
	assert_string_equal(p.recover_endpoint, "http://10.0.0.5:8100");
	kvc_pod_fini(&p);

	/* dp_rank defaults to 0, endpoints to none; an id as a string */
	body = J("{'instance_id': '7', 'endpoint': 'ipc://kv-events',"
		 " 'model_name': 'm', 'block_size': 32}");
	assert_int_equal(kvc_api_register_parse(body, strlen(body), 4, &p, &e),
			 KVI_OK);
	assert_true(p.instance_id == 7);
	assert_int_equal(p.rank, 0);
	assert_null(p.replay_endpoint);
	assert_null(p.recover_endpoint);
	kvc_pod_fini(&p);
}

static void
test_register_per_pod(void **state)
{
	(void)state;
	const char *body =
	    J("{'name': 'ns/pod', 'ip': '10.0.0.5', 'zmq_port': 5557,"
	      " 'recover_port': 8100, 'replay_port': 6557, 'dp_size': 2,"
	      " 'model_name': 'm', 'block_size': 16}");
	kvc_pod p = {0};
	kvc_qerr e = {0};
	assert_int_equal(kvc_api_register_parse(body, strlen(body), 4, &p, &e),
			 KVI_OK);
	assert_int_equal(p.source, KVC_SOURCE_HTTP);
	assert_string_equal(p.name, "ns/pod");
	assert_true(p.instance_id == kvc_instance_id("ns/pod"));
	assert_string_equal(p.ip, "10.0.0.5");
	assert_int_equal(p.zmq_port, 5557);
	assert_true(p.has_recover_port);
	assert_int_equal(p.recover_port, 8100);
	assert_true(p.has_replay_port);
	assert_int_equal(p.replay_port, 6557);
	assert_int_equal(p.dp_size, 2);
	assert_string_equal(p.model, "m");
	assert_int_equal(p.block_size, 16);
	assert_null(p.endpoint);
	kvc_pod_fini(&p);

	/* dp_size absent: the default given (--watch-dp-size) */
	body = J("{'name': 'ns/q', 'ip': '10.0.0.6', 'zmq_port': 5557,"
		 " 'model_name': 'm', 'block_size': 16}");
	assert_int_equal(kvc_api_register_parse(body, strlen(body), 4, &p, &e),
			 KVI_OK);
	assert_int_equal(p.dp_size, 4);
	assert_false(p.has_recover_port);
	assert_false(p.has_replay_port);
	kvc_pod_fini(&p);

	/* one of the pods of a data-parallel group over several: ranks 4
	 * and 5, keyed, answered and offset by their global rank */
	body = J("{'name': 'ns/r', 'ip': '10.0.0.7', 'zmq_port': 5557,"
		 " 'recover_port': 8100, 'dp_size': 2, 'dp_start_rank': 4,"
		 " 'model_name': 'm', 'block_size': 16}");
	assert_int_equal(kvc_api_register_parse(body, strlen(body), 1, &p, &e),
			 KVI_OK);
	assert_int_equal(p.dp_start_rank, 4);
	size_t n;
	kvc_rank *r = kvc_pod_ranks(&p, &n);
	assert_int_equal(n, 2);
	assert_string_equal(r[0].key, "ns/r#4");
	assert_int_equal(r[0].rank, 4);
	assert_string_equal(r[0].endpoint, "tcp://10.0.0.7:5561");
	assert_string_equal(r[1].key, "ns/r#5");
	assert_int_equal(r[1].rank, 5);
	assert_string_equal(r[1].endpoint, "tcp://10.0.0.7:5562");
	assert_string_equal(r[1].recover_endpoint, "http://10.0.0.7:8105");
	kvc_ranks_free(r, n);
	kvc_pod_fini(&p);
}

static void
test_register_errors(void **state)
{
	(void)state;
	register_fails("{'name': 'ns/p', 'ip': '1.2.3.4', 'zmq_port': 5557,"
		       " 'dp_size': 0, 'model_name': 'm', 'block_size': 16}",
		       KVI_ERANGE, "dp_size 0 is not in 1..65536");
	register_fails(
	    "{'name': 'ns/p', 'ip': '1.2.3.4', 'zmq_port': 5557,"
	    " 'dp_size': 65537, 'model_name': 'm', 'block_size': 16}",
	    KVI_ERANGE, "dp_size 65537 is not in 1..65536");
	register_fails("{'name': 'ns/p', 'ip': '1.2.3.4', 'zmq_port': 0,"
		       " 'model_name': 'm', 'block_size': 16}",
		       KVI_ERANGE, "zmq_port 0 is not in 1..65535");
	register_fails("{'name': 'ns/p', 'ip': '1.2.3.4', 'zmq_port': 65536,"
		       " 'model_name': 'm', 'block_size': 16}",
		       KVI_ERANGE, "zmq_port 65536 is not in 1..65535");
	register_fails("{'name': 'ns/p', 'ip': '1.2.3.4', 'zmq_port': 1,"
		       " 'recover_port': 70000, 'model_name': 'm',"
		       " 'block_size': 16}",
		       KVI_ERANGE, "recover_port 70000 is not in 1..65535");
	register_fails("{'name': 'ns/p', 'ip': '1.2.3.4', 'zmq_port': 1,"
		       " 'replay_port': -1, 'model_name': 'm',"
		       " 'block_size': 16}",
		       KVI_ERANGE, "replay_port -1 is not in 1..65535");
	register_fails("{'name': 'ns/p', 'ip': '1.2.3.4', 'zmq_port': 1,"
		       " 'dp_start_rank': 65536, 'model_name': 'm',"
		       " 'block_size': 16}",
		       KVI_ERANGE, "dp_start_rank 65536 is not in 0..65535");
	/* a rank is a u16, the start rank's too: never truncated */
	register_fails("{'name': 'ns/p', 'ip': '1.2.3.4', 'zmq_port': 1,"
		       " 'dp_size': 2, 'dp_start_rank': 65535,"
		       " 'model_name': 'm', 'block_size': 16}",
		       KVI_ERANGE,
		       "dp_start_rank 65535 plus dp_size 2 passes rank 65535: "
		       "a rank is a u16");
	/* the ports are offset by the global ranks */
	register_fails("{'name': 'ns/p', 'ip': '1.2.3.4', 'zmq_port': 65000,"
		       " 'dp_size': 2, 'dp_start_rank': 535,"
		       " 'model_name': 'm', 'block_size': 16}",
		       KVI_ERANGE,
		       "zmq_port 65000 plus the ranks does not fit: ports are "
		       "1..65535");
	/* kvc_pod_check: the ports of the ranks must fit too */
	register_fails("{'name': 'ns/p', 'ip': '1.2.3.4', 'zmq_port': 65535,"
		       " 'dp_size': 2, 'model_name': 'm', 'block_size': 16}",
		       KVI_ERANGE,
		       "zmq_port 65535 plus the ranks does not fit: ports are "
		       "1..65535");
	register_fails("{'name': 'ns/p', 'ip': '1.2.3.4', 'zmq_port': '5557',"
		       " 'model_name': 'm', 'block_size': 16}",
		       KVI_EINVAL, "zmq_port must be an integer, got \"5557\"");
	register_fails("{'name': 'ns/p', 'zmq_port': 5557, 'model_name': 'm',"
		       " 'block_size': 16}",
		       KVI_EINVAL, "ip is missing");
	register_fails("{'name': 'ns/p', 'ip': '1.2.3.4', 'zmq_port': 5557,"
		       " 'model_name': 'm', 'block_size': 0}",
		       KVI_EINVAL, "block_size 0 is not in 1..1048576");
	register_fails("{'name': 'ns/p', 'ip': '1.2.3.4', 'zmq_port': 5557,"
		       " 'model_name': 'm', 'block_size': -16}",
		       KVI_ERANGE, "block_size -16 is not a u32");
	register_fails("{'name': 'ns/p', 'ip': '1.2.3.4', 'zmq_port': 5557,"
		       " 'model_name': '', 'block_size': 16}",
		       KVI_EINVAL, "model_name is empty");
	/* per rank */
	register_fails(
	    "{'instance_id': 7, 'endpoint': 'tcp://h:1',"
	    " 'model_name': 'm', 'block_size': 16, 'dp_rank': 65536}",
	    KVI_ERANGE, "dp_rank 65536 does not fit in u16");
	register_fails("{'instance_id': -7, 'endpoint': 'tcp://h:1',"
		       " 'model_name': 'm', 'block_size': 16}",
		       KVI_ERANGE, "instance_id -7 is not a u64");
	register_fails("{'instance_id': 18446744073709551616, 'endpoint': "
		       "'tcp://h:1', 'model_name': 'm', 'block_size': 16}",
		       KVI_ERANGE,
		       "instance_id 18446744073709551616 is not a u64");
	register_fails("{'instance_id': 7, 'endpoint': 'http://h:1',"
		       " 'model_name': 'm', 'block_size': 16}",
		       KVI_EINVAL,
		       "endpoint must be tcp://host:port or ipc://path");
	register_fails(
	    "{'instance_id': 7, 'model_name': 'm', 'block_size': 16}",
	    KVI_EINVAL, "endpoint is missing");
	register_fails("{'instance_id': 7, 'endpoint': 'tcp://h:1',"
		       " 'model_name': 'm'}",
		       KVI_EINVAL, "block_size is missing");
	/* the form */
	register_fails("{'instance_id': 7, 'name': 'ns/p', 'ip': '1.2.3.4',"
		       " 'zmq_port': 1, 'model_name': 'm', 'block_size': 16}",
		       KVI_EINVAL,
		       "give either name (a pod) or instance_id, not both");
	register_fails("{'model_name': 'm', 'block_size': 16}", KVI_EINVAL,
		       "name (a pod) or instance_id is missing");
	register_fails("{'model_name': 'm'", KVI_EPROTO,
		       "invalid JSON: '}' expected near end of file at line 1, "
		       "column 18 (byte 18)");
}

static void
test_unregister(void **state)
{
	(void)state;
	const char *body = J("{'instance_id': 18446744073709551615,"
			     " 'model_name': 'm', 'dp_rank': 1}");
	kvc_api_unregister u = {0};
	kvc_qerr e = {0};
	assert_int_equal(kvc_api_unregister_parse(body, strlen(body), &u, &e),
			 KVI_OK);
	assert_null(u.name);
	assert_true(u.instance_id == UINT64_MAX);
	assert_string_equal(u.model, "m");
	assert_true(u.has_dp_rank);
	assert_int_equal(u.dp_rank, 1);
	kvc_api_unregister_fini(&u);

	body = J("{'name': 'ns/pod'}");
	assert_int_equal(kvc_api_unregister_parse(body, strlen(body), &u, &e),
			 KVI_OK);
	assert_string_equal(u.name, "ns/pod");
	assert_true(u.instance_id == kvc_instance_id("ns/pod"));
	assert_null(u.model);
	assert_false(u.has_dp_rank);
	kvc_api_unregister_fini(&u);

	unregister_fails("{'instance_id': 7}", KVI_EINVAL,
			 "model_name is missing");
	unregister_fails("{'instance_id': 7, 'model_name': 'm',"
			 " 'dp_rank': 65536}",
			 KVI_ERANGE, "dp_rank 65536 does not fit in u16");
	unregister_fails("{'instance_id': 1.5, 'model_name': 'm'}", KVI_EINVAL,
			 "instance_id 1.5 is not a u64");
	unregister_fails("{'name': ''}", KVI_EINVAL, "name is empty");
	unregister_fails("{'name': 7}", KVI_EINVAL,
			 "name must be a string, got 7");
	unregister_fails("{}", KVI_EINVAL,
			 "name (a pod) or instance_id is missing");
}

/* ---- errors -------------------------------------------------------------- */

static void
test_error_body(void **state)
{
	(void)state;
	kvc_qerr e = {0};
	assert_int_equal(
	    kvc_qerr_set(&e, KVI_EINVAL, 400, "dp_rank %d is not connected", 3),
	    KVI_EINVAL);
	e.extra = json_pack("{s:[i,i], s:s}", "connected_ranks", 0, 1, "error",
			    "not this one");
	json_t *body = kvc_qerr_body(&e);
	char *text = json_dumps(body, JSON_COMPACT);
	assert_string_equal(text, "{\"error\":\"dp_rank 3 is not connected\","
				  "\"connected_ranks\":[0,1]}");
	free(text);
	json_decref(body);
	/* setting again drops the extra fields; non-ASCII becomes '?' */
	kvc_qerr_set(&e, KVI_EPROTO, 400, "near '\xff\xfe'");
	assert_null(e.extra);
	assert_string_equal(e.message, "near '?\?'");
	kvc_qerr_fini(&e);
	kvc_qerr_fini(&e); /* idempotent */
}

int
main(void)
{
	srand(7);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_query_valid),
	    cmocka_unit_test(test_query_mm_features),
	    cmocka_unit_test(test_query_optional_fields),
	    cmocka_unit_test(test_query_invalid_json),
	    cmocka_unit_test(test_query_wrong_types),
	    cmocka_unit_test(test_query_model_name),
	    cmocka_unit_test(test_query_token_not_u32),
	    cmocka_unit_test(test_query_dp_rank_not_u16),
	    cmocka_unit_test(test_query_too_many_tokens),
	    cmocka_unit_test(test_query_instances_not_u64),
	    cmocka_unit_test(test_hash_query_u64_exact),
	    cmocka_unit_test(test_hash_query_errors),
	    cmocka_unit_test(test_register_per_rank),
	    cmocka_unit_test(test_register_per_pod),
	    cmocka_unit_test(test_register_errors),
	    cmocka_unit_test(test_unregister),
	    cmocka_unit_test(test_error_body),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
