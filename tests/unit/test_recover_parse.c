/*
 * test_recover_parse.c - the /kv_recover stream parser
 * (docs/wire.md#kv_recover): what a body says.
 *
 * Every kind of body as docs/wire.md#kv_recover writes it, the corner cases of
 * its values (u64 past 2^63, negative hashes, absent and null fields, tiers,
 * key order, whitespace), and malformed bodies failing with a message that says
 * what and where. How a body is fed is test_recover_parse_stream.c; the
 * documents and helpers both use are in recover_fixture.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "recover_fixture.h"

/* ---- the kinds of docs/wire.md#kv_recover --------------------------- */

static void
test_events(void **state)
{
	(void)state;
	const kvr_response *r = parse_ok(DOC_EVENTS);
	assert_int_equal(r->kind, KVR_KIND_EVENTS);
	assert_true(r->has_last_event_id);
	assert_int_equal(r->last_event_id, 44);
	assert_int_equal(r->n_events, 3);
	assert_int_equal(r->n_blocks, 2);
	assert_int_equal(r->n_hashes, 2);

	const kvr_event *ev = &r->events[0];
	assert_int_equal(ev->type, KVI_EVENT_STORED);
	assert_int_equal(ev->tier, KVI_TIER_GPU);
	assert_true(ev->has_dp_rank);
	assert_int_equal(ev->dp_rank, 1);
	assert_int_equal(ev->event_id, 42);
	assert_true(ev->has_parent);
	assert_int_equal(ev->parent_hash, 123);
	assert_int_equal(ev->n_blocks, 2);
	assert_int_equal(ev->n_hashes, 0);
	assert_null(ev->block_hashes);
	assert_int_equal(ev->blocks[0].block_hash, 456);
	assert_int_equal(ev->blocks[0].tokens_hash, 789);
	assert_int_equal(ev->blocks[1].block_hash, 457);
	assert_int_equal(ev->blocks[1].tokens_hash, 790);

	ev = &r->events[1];
	assert_int_equal(ev->type, KVI_EVENT_REMOVED);
	assert_int_equal(ev->tier, KVI_TIER_CPU);
	assert_int_equal(ev->event_id, 43);
	assert_int_equal(ev->n_blocks, 0);
	assert_null(ev->blocks);
	assert_int_equal(ev->n_hashes, 2);
	assert_int_equal(ev->block_hashes[0], 456);
	assert_int_equal(ev->block_hashes[1], 457);

	ev = &r->events[2];
	assert_int_equal(ev->type, KVI_EVENT_CLEARED);
	assert_int_equal(ev->tier, KVI_TIER_GPU);
	assert_false(ev->has_dp_rank);
	assert_int_equal(ev->event_id, 44);
	assert_int_equal(ev->n_blocks + ev->n_hashes, 0);
	assert_string_equal(r->message, "");
}

static void
test_tree_dump(void **state)
{
	(void)state;
	const kvr_response *r = parse_ok(DOC_TREE_DUMP);
	assert_int_equal(r->kind, KVR_KIND_TREE_DUMP);
	assert_true(r->has_last_event_id);
	assert_int_equal(r->last_event_id, 977);
	assert_int_equal(r->n_events, 2);
	assert_false(r->events[0].has_parent);
	assert_int_equal(r->events[0].event_id, 0);
	assert_int_equal(r->events[0].blocks[0].block_hash, 1);
	assert_int_equal(r->events[0].blocks[0].tokens_hash, 11);
	assert_int_equal(r->events[0].tier, KVI_TIER_GPU);
	assert_true(r->events[1].has_parent);
	assert_int_equal(r->events[1].parent_hash, 1);
	assert_int_equal(r->events[1].blocks[0].tokens_hash, 22);
	assert_int_equal(r->events[1].tier, KVI_TIER_DISK);
}

static void
test_too_new(void **state)
{
	(void)state;
	const kvr_response *r = parse_ok(DOC_TOO_NEW);
	assert_int_equal(r->kind, KVR_KIND_TOO_NEW);
	assert_int_equal(r->requested_start, 500);
	assert_int_equal(r->requested_end, 600);
	assert_true(r->has_newest_available);
	assert_int_equal(r->newest_available, 450);
	assert_int_equal(r->n_events, 0);
	assert_null(r->events);

	r = parse_ok(DOC_PRETTY);
	assert_int_equal(r->kind, KVR_KIND_TOO_NEW);
	assert_int_equal(r->requested_start, 2);
	assert_int_equal(r->requested_end, 3);
	assert_int_equal(r->newest_available, 1);
}

/* An engine that has published nothing yet answers a tree dump, or a range
 * past its newest event, with a null id; a number, 0 included, is told apart
 * from it. Every other id stays a number. */
static void
test_null_ids(void **state)
{
	(void)state;
	const kvr_response *r = parse_ok(DOC_DUMP_NULL);
	assert_int_equal(r->kind, KVR_KIND_TREE_DUMP);
	assert_false(r->has_last_event_id);
	assert_int_equal(r->last_event_id, 0);
	assert_int_equal(r->n_events, 0);
	assert_null(r->events);

	r = parse_ok(DOC_TOO_NEW_NULL);
	assert_int_equal(r->kind, KVR_KIND_TOO_NEW);
	assert_int_equal(r->requested_start, 5);
	assert_int_equal(r->requested_end, 9);
	assert_false(r->has_newest_available);
	assert_int_equal(r->newest_available, 0);

	r = parse_ok("{\"TreeDump\":{\"events\":[],\"last_event_id\":0}}");
	assert_true(r->has_last_event_id);
	assert_int_equal(r->last_event_id, 0);
	r = parse_ok("{\"TooNew\":{\"requested_start\":1,\"requested_end\":2,"
		     "\"newest_available\":0}}");
	assert_true(r->has_newest_available);

	static const struct {
		const char *doc;
		const char *want;
	} cases[] = {
	    {"{\"TooNew\":{\"requested_start\":null,\"requested_end\":9,"
	     "\"newest_available\":null}}",
	     "TooNew.requested_start: expected an unsigned integer, got null"},
	    {"{\"TooNew\":{\"requested_start\":5,\"requested_end\":null,"
	     "\"newest_available\":3}}",
	     "TooNew.requested_end: expected an unsigned integer, got null"},
	    {"{\"InvalidRange\":{\"start_id\":null,\"end_id\":5}}",
	     "start_id: expected an unsigned integer, got null"},
	    {"{\"InvalidRange\":{\"start_id\":9,\"end_id\":null}}",
	     "end_id: expected an unsigned integer, got null"},
	    {"{\"Events\":{\"events\":[],\"last_event_id\":null}}",
	     "Events.last_event_id: expected an unsigned integer, got null"},
	    {"{\"TreeDump\":{\"events\":[{\"event\":{\"event_id\":null,"
	     "\"data\":\"cleared\"}}],\"last_event_id\":null}}",
	     "events[0].event.event_id: expected an unsigned integer, got "
	     "null"},
	    {"{\"TreeDump\":{\"events\":[]}}", "missing \"last_event_id\""},
	    {"{\"TooNew\":{\"requested_start\":5,\"requested_end\":9}}",
	     "missing \"newest_available\""},
	    {"{\"TreeDump\":{\"events\":[],\"last_event_id\":\"null\"}}",
	     "TreeDump.last_event_id: expected an unsigned integer or null, "
	     "got "
	     "a string"},
	    {"{\"TreeDump\":{\"events\":[],\"last_event_id\":-1}}",
	     "TreeDump.last_event_id: -1 does not fit in u64"},
	    {"{\"TooNew\":{\"requested_start\":5,\"requested_end\":9,"
	     "\"newest_available\":1.5}}",
	     "newest_available: expected an unsigned integer or null, got a "
	     "non-integer number"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		parse_bad(cases[i].doc, strlen(cases[i].doc), cases[i].want);
	}
}

static void
test_invalid_range(void **state)
{
	(void)state;
	const kvr_response *r = parse_ok(DOC_INVALID_RANGE);
	assert_int_equal(r->kind, KVR_KIND_INVALID_RANGE);
	assert_int_equal(r->start_id, 9);
	assert_int_equal(r->end_id, 5);
	assert_int_equal(r->n_events, 0);
}

static void
test_error(void **state)
{
	(void)state;
	const kvr_response *r = parse_ok(DOC_ERROR);
	assert_int_equal(r->kind, KVR_KIND_ERROR);
	assert_string_equal(r->message, "replay buffer unavailable");
	assert_int_equal(r->message_len, strlen("replay buffer unavailable"));
	assert_false(r->message_truncated);

	r = parse_ok(DOC_ESCAPES);
	const char want[] = "a\"b\\c/d\b\f\n\r\t \xc3\xa9\xf0\x9f\x98\x80 "
			    "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
	assert_int_equal(r->message_len, sizeof(want) - 1);
	assert_memory_equal(r->message, want, sizeof(want) - 1);

	/* \u0000 is kept, and counted. */
	r = parse_ok("{\"Error\":\"a\\u0000b\"}");
	assert_int_equal(r->message_len, 3);
	assert_memory_equal(r->message, "a\0b", 4);

	/* A long message is truncated, not rejected. */
	size_t n = KVR_MESSAGE_MAX + 100;
	char *doc = malloc(n + 32);
	int o = sprintf(doc, "{\"Error\":\"");
	memset(doc + o, 'm', n);
	strcpy(doc + o + n, "\"}");
	r = parse_ok(doc);
	assert_int_equal(r->message_len, KVR_MESSAGE_MAX);
	assert_true(r->message_truncated);
	assert_int_equal(strlen(r->message), KVR_MESSAGE_MAX);
	free(doc);
}

/* ---- values ---------------------------------------------------------- */

static void
test_u64_range(void **state)
{
	(void)state;
	const uint64_t top = UINT64_MAX, half = UINT64_C(1) << 63;
	const kvr_response *r = parse_ok(DOC_BIG);
	assert_true(r->last_event_id == top);
	assert_true(r->events[0].event_id == top);
	assert_true(r->events[0].parent_hash == half);
	assert_true(r->events[0].blocks[0].block_hash == top);
	assert_true(r->events[0].blocks[0].tokens_hash == half);
	assert_true(r->events[1].event_id == half);
	assert_true(r->events[1].block_hashes[0] == top - 1);
	assert_true(r->events[1].block_hashes[1] == half - 1);
	assert_true(r->events[1].block_hashes[2] == 0);

	/* 2^64 and beyond do not fit, neither do negative ids. */
	parse_bad("{\"Events\":{\"events\":[],\"last_event_id\":"
		  "18446744073709551616}}",
		  strlen("{\"Events\":{\"events\":[],\"last_event_id\":"
			 "18446744073709551616}}"),
		  "does not fit in u64");
	const char *doc = "{\"TooNew\":{\"requested_start\":-1,"
			  "\"requested_end\":1,\"newest_available\":1}}";
	parse_bad(doc, strlen(doc), "requested_start: -1 does not fit in u64");
	doc = "{\"InvalidRange\":{\"start_id\":1e3,\"end_id\":1}}";
	parse_bad(doc, strlen(doc), "start_id: expected an unsigned integer");
	doc = "{\"InvalidRange\":{\"start_id\":1,\"end_id\":"
	      "99999999999999999999999999}}";
	parse_bad(doc, strlen(doc), "end_id: (more than 20 digits)");
}

static void
test_negative_hashes(void **state)
{
	(void)state;
	const kvr_response *r = parse_ok(DOC_NEG);
	assert_true(r->events[0].parent_hash == UINT64_MAX);
	assert_true(r->events[0].blocks[0].block_hash == UINT64_C(1) << 63);
	assert_true(r->events[0].blocks[0].tokens_hash == UINT64_MAX - 1);
	assert_true(r->events[1].block_hashes[0] == UINT64_MAX);
	assert_true(r->events[1].block_hashes[1] == 0);

	const char *doc = "{\"Events\":{\"events\":[{\"event\":{\"event_id\":1,"
			  "\"data\":{\"removed\":{\"block_hashes\":"
			  "[-9223372036854775809]}}}}],\"last_event_id\":1}}";
	parse_bad(doc, strlen(doc),
		  "block_hashes[0]: -9223372036854775809 "
		  "does not fit in i64");
	doc = "{\"Events\":{\"events\":[{\"event\":{\"event_id\":-1,"
	      "\"data\":\"cleared\"}}],\"last_event_id\":1}}";
	parse_bad(doc, strlen(doc), "event_id: -1 does not fit in u64");
}

/* event_doc formats an Events body of one RouterEvent whose fields before
 * "event" are given. */
static const kvr_event *
parse_event(const char *head, const char *inner)
{
	static char doc[512];
	snprintf(
	    doc, sizeof(doc),
	    "{\"Events\":{\"events\":[{%s\"event\":{\"event_id\":1,%s"
	    "\"data\":{\"stored\":{\"blocks\":[]}}}}],\"last_event_id\":1}}",
	    head, inner);
	const kvr_response *r = parse_ok(doc);
	assert_int_equal(r->n_events, 1);
	return &r->events[0];
}

static void
test_parent_absent_null(void **state)
{
	(void)state;
	const kvr_event *ev = parse_event("", "");
	assert_false(ev->has_parent);
	assert_int_equal(ev->n_blocks, 0);
	assert_null(ev->blocks);
	const char *doc = "{\"Events\":{\"events\":[{\"event\":{\"event_id\":1,"
			  "\"data\":{\"stored\":{\"parent_hash\":null,"
			  "\"blocks\":[]}}}}],\"last_event_id\":1}}";
	assert_false(parse_ok(doc)->events[0].has_parent);
	doc = "{\"Events\":{\"events\":[{\"event\":{\"event_id\":1,"
	      "\"data\":{\"stored\":{\"parent_hash\":0,"
	      "\"blocks\":[]}}}}],\"last_event_id\":1}}";
	assert_true(parse_ok(doc)->events[0].has_parent);
	assert_int_equal(parse_ok(doc)->events[0].parent_hash, 0);
}

static void
test_storage_tier(void **state)
{
	(void)state;
	static const struct {
		const char *head;
		kvi_tier tier;
	} cases[] = {
	    {"", KVI_TIER_GPU},
	    {"\"storage_tier\":null,", KVI_TIER_GPU},
	    {"\"storage_tier\":\"Device\",", KVI_TIER_GPU},
	    {"\"storage_tier\":\"GPU\",", KVI_TIER_GPU},
	    {"\"storage_tier\":\"dEvIcE\",", KVI_TIER_GPU},
	    {"\"storage_tier\":\"HostPinned\",", KVI_TIER_CPU},
	    {"\"storage_tier\":\"host\",", KVI_TIER_CPU},
	    {"\"storage_tier\":\"CPU\",", KVI_TIER_CPU},
	    {"\"storage_tier\":\"cpu_pinned\",", KVI_TIER_CPU},
	    {"\"storage_tier\":\"CPU_TIER1\",", KVI_TIER_CPU},
	    {"\"storage_tier\":\"Disk\",", KVI_TIER_DISK},
	    {"\"storage_tier\":\"External\",", KVI_TIER_DISK},
	    {"\"storage_tier\":\"\",", KVI_TIER_DISK},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const kvr_event *ev = parse_event(cases[i].head, "");
		if (ev->tier != cases[i].tier) {
			fail_msg("%s: tier %d, expected %d", cases[i].head,
				 ev->tier, cases[i].tier);
		}
	}
}

static void
test_dp_rank(void **state)
{
	(void)state;
	const kvr_event *ev = parse_event("", "\"dp_rank\":0,");
	assert_true(ev->has_dp_rank);
	assert_int_equal(ev->dp_rank, 0);
	ev = parse_event("", "\"dp_rank\":65535,");
	assert_int_equal(ev->dp_rank, 65535);
	ev = parse_event("", "\"dp_rank\":null,");
	assert_false(ev->has_dp_rank);
	ev = parse_event("\"worker_id\":18446744073709551615,", "");
	assert_false(ev->has_dp_rank);
}

static void
test_key_order(void **state)
{
	(void)state;
	const kvr_response *r = parse_ok(DOC_ORDER);
	assert_int_equal(r->kind, KVR_KIND_EVENTS);
	assert_int_equal(r->last_event_id, 8);
	assert_int_equal(r->n_events, 2);
	const kvr_event *ev = &r->events[0];
	assert_int_equal(ev->type, KVI_EVENT_STORED);
	assert_int_equal(ev->event_id, 7);
	assert_int_equal(ev->tier, KVI_TIER_CPU);
	assert_false(ev->has_dp_rank);
	assert_int_equal(ev->n_blocks, 1);
	assert_int_equal(ev->blocks[0].block_hash, 5);
	assert_int_equal(ev->blocks[0].tokens_hash, 6);
	ev = &r->events[1];
	assert_int_equal(ev->type, KVI_EVENT_CLEARED);
	assert_int_equal(ev->dp_rank, 65535);
	assert_int_equal(ev->event_id, 8);
	assert_int_equal(ev->tier, KVI_TIER_GPU);
}

/* ---- malformed bodies ------------------------------------------------ */

#define EV_HEAD "{\"Events\":{\"events\":[{\"event\":{\"event_id\":1,"
#define EV_TAIL "}],\"last_event_id\":1}}"

static void
test_malformed(void **state)
{
	(void)state;
	static const struct {
		const char *doc;
		const char *want;
	} cases[] = {
	    {"", "empty body"},
	    {" \n ", "empty body"},
	    {"x", "unexpected 'x'"},
	    {"\x01", "unexpected byte 0x01"},
	    {"[]", "expected an object, got an array"},
	    {"\"Events\"", "expected an object, got a string"},
	    {"42", "expected an object, got a number"},
	    {"{}", "no kind"},
	    {"{\"Bogus\":{}}", "unknown kind \"Bogus\""},
	    {"{\"events\":{}}", "unknown kind \"events\""},
	    {"{\"Error\":\"a\",\"Error\":\"b\"}", "duplicate key \"Error\""},
	    {"{\"Error\":\"a\",\"TooNew\":{}}",
	     "\"TooNew\" after another kind"},
	    {"{\"Error\":5}", "Error: expected a string, got a number"},
	    {"{\"Events\":[]}", "Events: expected an object, got an array"},
	    {"{\"Events\":{\"events\":[]}}",
	     "Events: missing \"last_event_id\""},
	    {"{\"TreeDump\":{\"last_event_id\":1}}", "missing \"events\""},
	    {"{\"Events\":{\"events\":{},\"last_event_id\":1}}",
	     "events: expected an array, got an object"},
	    {"{\"Events\":{\"events\":[],\"last_event_id\":\"5\"}}",
	     "last_event_id: expected an unsigned integer, got a string"},
	    {"{\"Events\":{\"events\":[],\"last_event_id\":null}}", "got null"},
	    {"{\"Events\":{\"events\":[],\"events\":[],\"last_event_id\":1}}",
	     "duplicate key \"events\""},
	    {"{\"Events\":{\"events\":[1],\"last_event_id\":1}}",
	     "events[0]: expected an object, got a number"},
	    {"{\"Events\":{\"events\":[{}],\"last_event_id\":1}}",
	     "events[0]: missing \"event\""},
	    {EV_HEAD "\"data\":\"cleared\"},\"worker_id\":\"w\"" EV_TAIL,
	     "worker_id: expected an integer, got a string"},
	    {EV_HEAD "\"data\":\"cleared\"},\"worker_id\":1.5" EV_TAIL,
	     "worker_id: expected an integer, got a non-integer number"},
	    {EV_HEAD "\"data\":\"cleared\"},\"storage_tier\":5" EV_TAIL,
	     "storage_tier: expected a string or null, got a number"},
	    {EV_HEAD "\"dp_rank\":65536,\"data\":\"cleared\"}" EV_TAIL,
	     "events[0].event.dp_rank: 65536 does not fit in u16"},
	    {EV_HEAD "\"dp_rank\":-1,\"data\":\"cleared\"}" EV_TAIL,
	     "dp_rank: -1 does not fit in u64"},
	    {EV_HEAD "\"dp_rank\":\"1\",\"data\":\"cleared\"}" EV_TAIL,
	     "dp_rank: expected an integer or null, got a string"},
	    {EV_HEAD "\"event_id\":2,\"data\":\"cleared\"}" EV_TAIL,
	     "duplicate key \"event_id\""},
	    {EV_HEAD "\"data\":\"clear\"}" EV_TAIL,
	     "unknown event data \"clear\""},
	    {EV_HEAD "\"data\":{\"moved\":{}}}" EV_TAIL,
	     "unknown event data \"moved\""},
	    {EV_HEAD "\"data\":{}}" EV_TAIL, "no event data"},
	    {EV_HEAD "\"data\":[]}" EV_TAIL,
	     "data: expected \"cleared\" or an object, got an array"},
	    {EV_HEAD "\"data\":{\"cleared\":null,\"removed\":{}}}" EV_TAIL,
	     "\"removed\" after another event data variant"},
	    {EV_HEAD "\"data\":{\"cleared\":1}}" EV_TAIL,
	     "cleared: expected null or an object, got a number"},
	    {EV_HEAD "\"data\":{\"stored\":{}}}" EV_TAIL,
	     "stored: missing \"blocks\""},
	    {EV_HEAD "\"data\":{\"stored\":{\"blocks\":[1]}}}" EV_TAIL,
	     "blocks[0]: expected an object, got a number"},
	    {EV_HEAD
	     "\"data\":{\"stored\":{\"blocks\":[{\"block_hash\":1}]}}}" EV_TAIL,
	     "blocks[0]: missing \"tokens_hash\""},
	    {EV_HEAD "\"data\":{\"stored\":{\"blocks\":[{\"block_hash\":"
		     "\"1\",\"tokens_hash\":1}]}}}" EV_TAIL,
	     "block_hash: expected an integer, got a string"},
	    {EV_HEAD "\"data\":{\"stored\":{\"blocks\":[],\"parent_hash\":"
		     "true}}}" EV_TAIL,
	     "parent_hash: expected an integer or null, got true"},
	    {EV_HEAD "\"data\":{\"removed\":{\"block_hashes\":{}}}}" EV_TAIL,
	     "block_hashes: expected an array, got an object"},
	    {EV_HEAD
	     "\"data\":{\"removed\":{\"block_hashes\":[1,2.0]}}}" EV_TAIL,
	     "block_hashes[1]: expected an integer, got a non-integer"},
	    {EV_HEAD "\"data\":{\"removed\":{\"block_hashes\":[1,]}}}" EV_TAIL,
	     "unexpected ']'"},
	    {EV_HEAD "\"data\":{\"removed\":{}}}" EV_TAIL,
	     "removed: missing \"block_hashes\""},
	    {"{\"Events\":{\"events\":[{\"event\":{\"data\":\"cleared\"}}],"
	     "\"last_event_id\":1}}",
	     "events[0].event: missing \"event_id\""},
	    /* lexical */
	    {"{\"Error\":\"abc", "body ends inside a string"},
	    {"{\"Error\":\"ab\\", "body ends inside a string"},
	    {"{\"Error\":\"a\nb\"}", "control character 0x0a"},
	    {"{\"Error\":\"\\q\"}", "invalid escape \\q"},
	    {"{\"Error\":\"\\u12G4\"}", "invalid \\u escape"},
	    {"{\"Error\":\"\\uD800\"}", "unpaired surrogate \\uD800"},
	    {"{\"Error\":\"\\uD800\\n\"}", "unpaired surrogate \\uD800"},
	    {"{\"Error\":\"\\uD800\\u0041\"}", "unpaired surrogate \\uD800"},
	    {"{\"Error\":\"\\uDC00\"}", "unpaired surrogate \\uDC00"},
	    {"{\"Error\":\"\xff\"}", "invalid UTF-8 byte 0xff"},
	    {"{\"Error\":\"\xc0\xaf\"}", "invalid UTF-8 byte 0xc0"},
	    {"{\"Error\":\"\xe0\x80\xaf\"}", "invalid UTF-8 byte 0x80"},
	    {"{\"Error\":\"\xed\xa0\x80\"}", "invalid UTF-8 byte 0xa0"},
	    {"{\"Error\":\"\xf4\x90\x80\x80\"}", "invalid UTF-8 byte 0x90"},
	    {"{\"Error\":\"\xc3\"}", "invalid UTF-8 byte 0x22"},
	    {"{\"Error\" \"a\"}", "expected ':' after a key"},
	    {"{\"Error\":\"a\" \"b\"}", "expected ',' or '}'"},
	    {"{\"Error\":\"a\",}", "expected a key"},
	    {"{Error:1}", "expected a key"},
	    {"{\"Events\":{\"events\":[] \"x\"", "expected ',' or '}'"},
	    {"{\"Events\":{\"x\":[1 2]", "expected ',' or ']'"},
	    {"{\"InvalidRange\":{\"start_id\":01,\"end_id\":1}}",
	     "leading zero"},
	    {"{\"InvalidRange\":{\"start_id\":-,\"end_id\":1}}",
	     "no digit after '-'"},
	    {"{\"InvalidRange\":{\"start_id\":1.,\"end_id\":1}}",
	     "expected a digit"},
	    {"{\"InvalidRange\":{\"start_id\":1e,\"end_id\":1}}",
	     "expected a digit"},
	    {"{\"InvalidRange\":{\"start_id\":1e+,\"end_id\":1}}",
	     "expected a digit"},
	    {"{\"InvalidRange\":{\"start_id\":+1,\"end_id\":1}}",
	     "unexpected '+'"},
	    {"{\"InvalidRange\":{\"start_id\":1,\"end_id\":1", "body ends"},
	    {"{\"Events\":{\"x\":tru}}", "invalid literal: expected \"true\""},
	    {"{\"Events\":{\"x\":nul", "body ends inside a literal"},
	    {"{\"Events\":{\"x\":nulL}}", "expected \"null\""},
	    {"{\"Events\":{\"x\":falsey}}", "expected ',' or '}'"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		parse_bad(cases[i].doc, strlen(cases[i].doc), cases[i].want);
	}
}

static void
test_error_offset(void **state)
{
	(void)state;
	const char *doc =
	    "{\"Events\":{\"events\":[],\"last_event_id\":\"5\"}}";
	assert_int_equal(parse(doc, strlen(doc), 0), KVI_EPROTO);
	char want[128];
	snprintf(want, sizeof(want),
		 "byte %zu: Events.last_event_id: expected an unsigned "
		 "integer, got a string",
		 (size_t)(strstr(doc, "\"5\"") + 2 - doc));
	assert_string_equal(kvr_parser_error(p), want);

	doc = EV_HEAD "\"dp_rank\":65536,\"data\":\"cleared\"}" EV_TAIL;
	assert_int_equal(parse(doc, strlen(doc), 1), KVI_EPROTO);
	snprintf(want, sizeof(want),
		 "byte %zu: Events.events[0].event.dp_rank: 65536 does not "
		 "fit in u16",
		 (size_t)(strstr(doc, "65536") + 5 - doc));
	assert_string_equal(kvr_parser_error(p), want);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_events),
	    cmocka_unit_test(test_tree_dump),
	    cmocka_unit_test(test_too_new),
	    cmocka_unit_test(test_null_ids),
	    cmocka_unit_test(test_invalid_range),
	    cmocka_unit_test(test_error),
	    cmocka_unit_test(test_u64_range),
	    cmocka_unit_test(test_negative_hashes),
	    cmocka_unit_test(test_parent_absent_null),
	    cmocka_unit_test(test_storage_tier),
	    cmocka_unit_test(test_dp_rank),
	    cmocka_unit_test(test_key_order),
	    cmocka_unit_test(test_malformed),
	    cmocka_unit_test(test_error_offset),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
