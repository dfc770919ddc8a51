/*
 * test_recover_parse_stream.c - the /kv_recover stream parser
 * (docs/wire.md#kv_recover): how a body is fed.
 *
 * Every valid body fed in every way (whole, one byte at a time, random
 * chunks) giving the same result, every valid body cut short at every byte
 * failing cleanly, trailing bytes, the parser's life through feed, finish
 * and reset, the limits on nesting and on the size of one element, and a
 * large tree dump whose memory follows the output. The documents and
 * helpers are in recover_fixture.h.
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

static const char *const valid_docs[] = {
    DOC_EVENTS,       DOC_TREE_DUMP, DOC_TOO_NEW,      DOC_INVALID_RANGE,
    DOC_ERROR,        DOC_BIG,       DOC_NEG,          DOC_ORDER,
    DOC_PRETTY,       DOC_ESCAPES,   DOC_EMPTY_EVENTS, DOC_DUMP_NULL,
    DOC_TOO_NEW_NULL,
};
#define N_VALID (sizeof(valid_docs) / sizeof(valid_docs[0]))

/* ---- helpers --------------------------------------------------------- */

/* dump writes every field of the result as text, for comparisons. */
static char *
dump(const kvr_response *r)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);
	assert_non_null(f);
	fprintf(
	    f, "%s last=%d:%ju n=%zu/%zu/%zu tn=%ju,%ju,%d:%ju ir=%ju,%ju\n",
	    kvr_kind_name(r->kind), r->has_last_event_id,
	    (uintmax_t)r->last_event_id, r->n_events, r->n_blocks, r->n_hashes,
	    (uintmax_t)r->requested_start, (uintmax_t)r->requested_end,
	    r->has_newest_available, (uintmax_t)r->newest_available,
	    (uintmax_t)r->start_id, (uintmax_t)r->end_id);
	fprintf(f, "msg %zu %d [", r->message_len, r->message_truncated);
	fwrite(r->message, 1, r->message_len, f);
	fprintf(f, "]\n");
	for (size_t i = 0; i < r->n_events; i++) {
		const kvr_event *ev = &r->events[i];
		fprintf(f, "ev %d %d %d:%u id=%ju parent=%d:%ju", ev->type,
			ev->tier, ev->has_dp_rank, ev->dp_rank,
			(uintmax_t)ev->event_id, ev->has_parent,
			(uintmax_t)ev->parent_hash);
		for (uint32_t k = 0; k < ev->n_blocks; k++) {
			fprintf(f, " b%ju/%ju",
				(uintmax_t)ev->blocks[k].block_hash,
				(uintmax_t)ev->blocks[k].tokens_hash);
		}
		for (uint32_t k = 0; k < ev->n_hashes; k++) {
			fprintf(f, " h%ju", (uintmax_t)ev->block_hashes[k]);
		}
		fprintf(f, "\n");
	}
	fclose(f);
	return buf;
}

/* ---- feeding --------------------------------------------------------- */

static void
test_chunking(void **state)
{
	(void)state;
	srand(12345);
	for (size_t d = 0; d < N_VALID; d++) {
		const char *doc = valid_docs[d];
		size_t len = strlen(doc);
		char *want = dump(parse_ok(doc));
		for (int round = 0; round < 21; round++) {
			if (round == 0) {
				assert_int_equal(parse(doc, len, 1), KVI_OK);
			} else {
				kvr_parser_reset(p);
				size_t o = 0;
				while (o < len) {
					size_t n = 1 + (size_t)rand() % 17;
					if (n > len - o) {
						n = len - o;
					}
					assert_int_equal(
					    kvr_parser_feed(p, doc + o, n),
					    KVI_OK);
					/* empty feeds change nothing */
					assert_int_equal(
					    kvr_parser_feed(p, NULL, 0),
					    KVI_OK);
					o += n;
				}
				assert_int_equal(kvr_parser_finish(p), KVI_OK);
			}
			char *got = dump(kvr_parser_result(p));
			assert_string_equal(got, want);
			assert_int_equal(kvr_parser_bytes(p), len);
			free(got);
		}
		free(want);
	}
}

static bool
is_space(char c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static void
test_truncated(void **state)
{
	(void)state;
	for (size_t d = 0; d < N_VALID; d++) {
		const char *doc = valid_docs[d];
		size_t end = strlen(doc);
		while (end > 0 && is_space(doc[end - 1])) {
			end--;
		}
		for (size_t cut = 0; cut < end; cut++) {
			kvr_parser_reset(p);
			assert_int_equal(kvr_parser_feed(p, doc, cut), KVI_OK);
			if (kvr_parser_finish(p) != KVI_EPROTO) {
				fail_msg("doc %zu cut at %zu: not rejected", d,
					 cut);
			}
			assert_null(kvr_parser_result(p));
			const char *err = kvr_parser_error(p);
			char want[32];
			snprintf(want, sizeof(want), "byte %zu: ", cut);
			if (strncmp(err, want, strlen(want)) != 0) {
				fail_msg("doc %zu cut at %zu: \"%s\"", d, cut,
					 err);
			}
		}
	}
}

static void
test_trailing(void **state)
{
	(void)state;
	char doc[256];
	snprintf(doc, sizeof(doc), "%s \n\t\r ", DOC_ERROR);
	assert_int_equal(parse_ok(doc)->kind, KVR_KIND_ERROR);
	snprintf(doc, sizeof(doc), "%s x", DOC_ERROR);
	parse_bad(doc, strlen(doc), "trailing data");
	snprintf(doc, sizeof(doc), "%s%s", DOC_ERROR, DOC_ERROR);
	parse_bad(doc, strlen(doc), "trailing data");
	/* a NUL byte is not whitespace */
	parse_bad(DOC_ERROR "\0", sizeof(DOC_ERROR), "trailing data");
}

static void
test_lifecycle(void **state)
{
	(void)state;
	kvr_parser_reset(p);
	assert_null(kvr_parser_result(p));
	assert_string_equal(kvr_parser_error(p), "");
	assert_int_equal(kvr_parser_feed(p, DOC_ERROR, 5), KVI_OK);
	assert_null(kvr_parser_result(p)); /* not finished */
	assert_int_equal(
	    kvr_parser_feed(p, DOC_ERROR + 5, strlen(DOC_ERROR) - 5), KVI_OK);
	assert_int_equal(kvr_parser_finish(p), KVI_OK);
	assert_int_equal(kvr_parser_finish(p), KVI_OK); /* idempotent */
	assert_non_null(kvr_parser_result(p));
	assert_int_equal(kvr_parser_feed(p, " ", 1), KVI_EINVAL);
	assert_non_null(kvr_parser_result(p));

	/* errors are sticky until reset */
	kvr_parser_reset(p);
	assert_int_equal(kvr_parser_feed(p, "[", 1), KVI_EPROTO);
	assert_int_equal(kvr_parser_feed(p, DOC_ERROR, 3), KVI_EPROTO);
	assert_int_equal(kvr_parser_finish(p), KVI_EPROTO);
	assert_string_equal(kvr_parser_error(p),
			    "byte 0: expected an object, got an array");

	/* reset reuses the parser for another body */
	const kvr_response *r = parse_ok(DOC_EVENTS);
	assert_int_equal(r->n_events, 3);
	r = parse_ok(DOC_TOO_NEW);
	assert_int_equal(r->n_events, 0);
	assert_int_equal(r->last_event_id, 0);
	r = parse_ok(DOC_TREE_DUMP);
	assert_int_equal(r->n_events, 2);
	assert_int_equal(r->events[1].blocks[0].tokens_hash, 22);
	assert_string_equal(kvr_kind_name(KVR_KIND_NONE), "none");
}

/* ---- limits ---------------------------------------------------------- */

static void
test_deep_nesting(void **state)
{
	(void)state;
	char doc[256];
	int o = sprintf(doc, "{\"Events\":{\"x\":");
	for (int i = 0; i < 100; i++) {
		doc[o++] = i % 2 ? '[' : '{';
		if (i % 2 == 0) {
			o += sprintf(doc + o, "\"k\":");
		}
		if (o > 200) {
			break;
		}
	}
	doc[o] = '\0';
	parse_bad(doc, (size_t)o, "nesting deeper than 32");

	/* 32 levels are fine */
	char ok[256];
	o = sprintf(ok,
		    "{\"Events\":{\"events\":[],\"last_event_id\":1,\"x\":");
	for (int i = 0; i < KVR_DEPTH_MAX - 2; i++) {
		ok[o++] = '[';
	}
	for (int i = 0; i < KVR_DEPTH_MAX - 2; i++) {
		ok[o++] = ']';
	}
	strcpy(ok + o, "}}");
	assert_int_equal(parse_ok(ok)->kind, KVR_KIND_EVENTS);
}

static void
test_huge_element(void **state)
{
	(void)state;
	size_t pad = KVR_ELEMENT_MAX + 1000;
	char *doc = malloc(pad + 256);
	int o = sprintf(doc, "{\"Events\":{\"events\":[{\"pad\":\"");
	memset(doc + o, 'x', pad);
	size_t n = (size_t)o + pad;
	n += (size_t)sprintf(doc + n, "\",\"event\":{\"event_id\":1,"
				      "\"data\":\"cleared\"}}],"
				      "\"last_event_id\":1}}");
	parse_bad(doc, n, "events[0].*: RouterEvent longer than 8388608 bytes");
	/* the same failure when fed in small pieces */
	assert_int_equal(parse(doc, n, 4096), KVI_EPROTO);
	assert_non_null(strstr(kvr_parser_error(p), "RouterEvent longer"));

	/* outside an element, a long value is only skipped */
	o = sprintf(doc, "{\"Events\":{\"events\":[],\"pad\":\"");
	memset(doc + o, 'x', pad);
	n = (size_t)o + pad;
	n += (size_t)sprintf(doc + n, "\",\"last_event_id\":1}}");
	assert_int_equal(parse(doc, n, 0), KVI_OK);
	assert_true(kvr_parser_footprint(p) < 64 * 1024);
	free(doc);
}

/* ---- a large tree dump ----------------------------------------------- */

static uint64_t
mix(uint64_t x)
{
	x += UINT64_C(0x9e3779b97f4a7c15);
	x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
	return x ^ (x >> 31);
}

static void
test_large_tree_dump(void **state)
{
	(void)state;
	const size_t n = 200000;
	size_t cap = n * 256 + 128;
	char *doc = malloc(cap);
	assert_non_null(doc);
	size_t o = (size_t)sprintf(doc, "{\"TreeDump\":{\"events\":[");
	for (size_t i = 0; i < n; i++) {
		o += (size_t)sprintf(
		    doc + o,
		    "%s{\"worker_id\":7,\"storage_tier\":\"Device\",\"event\":"
		    "{\"event_id\":%zu,\"dp_rank\":0,\"data\":{\"stored\":{"
		    "\"parent_hash\":%ju,\"blocks\":[{\"block_hash\":%ju,"
		    "\"tokens_hash\":%ju}]}}}}",
		    i ? "," : "", i, (uintmax_t)(i ? mix(i - 1) : 0),
		    (uintmax_t)mix(i), (uintmax_t)mix(i + n));
	}
	o += (size_t)sprintf(doc + o, "],\"last_event_id\":%zu}}", n);

	kvr_parser_reset(p);
	for (size_t at = 0; at < o; at += 65536) {
		size_t k = o - at < 65536 ? o - at : 65536;
		assert_int_equal(kvr_parser_feed(p, doc + at, k), KVI_OK);
	}
	assert_int_equal(kvr_parser_finish(p), KVI_OK);
	const kvr_response *r = kvr_parser_result(p);
	assert_int_equal(r->kind, KVR_KIND_TREE_DUMP);
	assert_int_equal(r->n_events, n);
	assert_int_equal(r->n_blocks, n);
	assert_int_equal(r->last_event_id, n);
	for (size_t i = 0; i < n; i += 997) {
		const kvr_event *ev = &r->events[i];
		assert_int_equal(ev->event_id, i);
		assert_true(ev->blocks[0].block_hash == mix(i));
		assert_true(ev->blocks[0].tokens_hash == mix(i + n));
		assert_true(ev->parent_hash == (i ? mix(i - 1) : 0));
	}
	/* Memory follows the output (one event and one block each, with
	 * room to grow), not the JSON. */
	size_t per = sizeof(kvr_event) + sizeof(kvr_block);
	size_t fp = kvr_parser_footprint(p);
	if (fp > 2 * n * per + 65536 || fp > o / 2) {
		fail_msg("footprint %zu bytes for %zu blocks, %zu bytes JSON",
			 fp, n, o);
	}
	free(doc);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_chunking),
	    cmocka_unit_test(test_truncated),
	    cmocka_unit_test(test_trailing),
	    cmocka_unit_test(test_lifecycle),
	    cmocka_unit_test(test_deep_nesting),
	    cmocka_unit_test(test_huge_element),
	    cmocka_unit_test(test_large_tree_dump),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
