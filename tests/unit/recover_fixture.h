/*
 * recover_fixture.h - what the /kv_recover stream parser's tests
 * (test_recover_parse.c, test_recover_parse_stream.c) share.
 *
 * The documents: a body of every kind as docs/wire.md#kv_recover writes it, and
 * bodies for the corner cases of values, key order and whitespace, all valid.
 * The parser: one, p, made by setup and freed by teardown, that every helper
 * resets before a body. parse feeds a body in chunks of a given size,
 * parse_ok expects success and parse_bad a failure with a given message;
 * both fail the running test through cmocka otherwise.
 */
#ifndef KVI_TESTS_UNIT_RECOVER_FIXTURE_H
#define KVI_TESTS_UNIT_RECOVER_FIXTURE_H

#include <stddef.h>

#include "recover_parse.h"

/* ---- documents ------------------------------------------------------- */

#define DOC_EVENTS                                                             \
	"{\"Events\": {\"events\": ["                                          \
	"{\"worker_id\": 7, \"storage_tier\": \"Device\",\n"                   \
	" \"event\": {\"event_id\": 42, \"dp_rank\": 1,\n"                     \
	"  \"data\": {\"stored\": {\"parent_hash\": 123,\n"                    \
	"   \"blocks\": [{\"block_hash\": 456, \"tokens_hash\": 789},"         \
	" {\"block_hash\": 457, \"tokens_hash\": 790}]}}}},"                   \
	"{\"worker_id\": 7, \"storage_tier\": \"HostPinned\","                 \
	" \"event\": {\"event_id\": 43, \"dp_rank\": 1,"                       \
	" \"data\": {\"removed\": {\"block_hashes\": [456, 457]}}}},"          \
	"{\"worker_id\": 7,"                                                   \
	" \"event\": {\"event_id\": 44, \"data\": \"cleared\"}}"               \
	"], \"last_event_id\": 44}}"

#define DOC_TREE_DUMP                                                          \
	"{\"TreeDump\": {\"events\": ["                                        \
	"{\"worker_id\": 3, \"event\": {\"event_id\": 0, \"data\":"            \
	" {\"stored\": {\"parent_hash\": null, \"blocks\":"                    \
	" [{\"block_hash\": 1, \"tokens_hash\": 11}]}}}},"                     \
	"{\"worker_id\": 3, \"storage_tier\": \"Disk\", \"event\":"            \
	" {\"event_id\": 1, \"data\": {\"stored\": {\"parent_hash\": 1,"       \
	" \"blocks\": [{\"block_hash\": 2, \"tokens_hash\": 22}]}}}}"          \
	"], \"last_event_id\": 977}}"

#define DOC_TOO_NEW                                                            \
	"{\"TooNew\": {\"requested_start\": 500, \"requested_end\": 600,"      \
	" \"newest_available\": 450}}"

#define DOC_INVALID_RANGE "{\"InvalidRange\": {\"start_id\": 9, \"end_id\": 5}}"

#define DOC_ERROR "{\"Error\": \"replay buffer unavailable\"}"

/* 2^63, 2^64-1 in every u64 place. */
#define DOC_BIG                                                                \
	"{\"Events\":{\"events\":[{\"event\":{\"event_id\":"                   \
	"18446744073709551615,\"data\":{\"stored\":{\"parent_hash\":"          \
	"9223372036854775808,\"blocks\":[{\"block_hash\":"                     \
	"18446744073709551615,\"tokens_hash\":9223372036854775808}]}}}},"      \
	"{\"event\":{\"event_id\":9223372036854775808,\"data\":{\"removed\":"  \
	"{\"block_hashes\":[18446744073709551614,9223372036854775807,0]}}}}]," \
	"\"last_event_id\":18446744073709551615}}"

/* SGLang-style signed hashes. */
#define DOC_NEG                                                                \
	"{\"Events\":{\"events\":[{\"event\":{\"event_id\":1,\"data\":"        \
	"{\"stored\":{\"parent_hash\":-1,\"blocks\":[{\"block_hash\":"         \
	"-9223372036854775808,\"tokens_hash\":-2}]}}}},{\"event\":"            \
	"{\"event_id\":2,\"data\":{\"removed\":{\"block_hashes\":[-1,-0]}}}}]" \
	","                                                                    \
	"\"last_event_id\":2}}"

/* last_event_id first, keys of every object in another order, unknown
 * keys of every JSON type, the object form of cleared. */
#define DOC_ORDER                                                              \
	"{\"Events\":{\"last_event_id\":8,\"meta\":{\"a\":[1,2.5e3,true,"      \
	"false,null,{\"b\":\"\\u00e9\"}]},\"events\":[{\"event\":{\"data\":"   \
	"{\"stored\":{\"blocks\":[{\"tokens_hash\":6,\"mm\":null,"             \
	"\"block_hash\":5}],\"x\":-0.5}},\"dp_rank\":null,\"event_id\":7},"    \
	"\"storage_tier\":\"cpu\",\"worker_id\":-3},{\"storage_tier\":null,"   \
	"\"event\":{\"dp_rank\":65535,\"data\":{\"cleared\":null},"            \
	"\"event_id\":8}}]}}"

#define DOC_PRETTY                                                             \
	"\r\n  {\n\t\"TooNew\" :\n  {\n    \"newest_available\" : 1 ,\n"       \
	"    \"requested_start\" : 2,\r\n\t\"requested_end\":3\n  }\n}\n\n"

#define DOC_ESCAPES                                                            \
	"{\"Error\":\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t \\u00e9\\uD83D\\ude00 "   \
	"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}"

#define DOC_EMPTY_EVENTS "{\"Events\":{\"events\":[],\"last_event_id\":0}}"

/* An engine that has published nothing yet: no id to name. */
#define DOC_DUMP_NULL "{\"TreeDump\":{\"events\":[],\"last_event_id\":null}}"
#define DOC_TOO_NEW_NULL                                                       \
	"{\"TooNew\":{\"requested_start\":5,\"requested_end\":9,"              \
	"\"newest_available\":null}}"

/* ---- the parser ------------------------------------------------------ */

/* The parser the tests share: setup allocates it, teardown frees it. */
extern kvr_parser *p;

int setup(void **state);
int teardown(void **state);

/* parse feeds doc in chunks of chunk bytes (0: at once) and finishes. */
kvi_err parse(const char *doc, size_t len, size_t chunk);

/* parse_ok parses doc at once and returns the result; a failure fails the
 * running test. */
const kvr_response *parse_ok(const char *doc);

/* parse_bad checks that doc fails with KVI_EPROTO and a message that holds
 * want and says where. */
void parse_bad(const char *doc, size_t len, const char *want);

#endif /* KVI_TESTS_UNIT_RECOVER_FIXTURE_H */
