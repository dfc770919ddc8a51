/*
 * fuzz_recover.c - libFuzzer target for the /kv_recover stream parser.
 *
 * Each input is parsed twice: at once, and in two chunks split at a
 * position taken from the input. Both must agree exactly (the same error
 * and message, or the same result), a failure must say why, and every
 * array of a result is read in full, so a bad length or pointer shows up
 * under ASan. A body the parser accepts must also be JSON to jansson,
 * unless it holds a number jansson cannot represent. Built as a libFuzzer
 * binary with -DKVI_FUZZ=ON (clang), and as a corpus replayer
 * (replay_main.c) in every build.
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recover_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* fuzz_sum reads every value of r into one number. */
static uint64_t
fuzz_sum(const kvr_response *r)
{
	uint64_t sum = r->kind + r->last_event_id + r->requested_start +
		       r->requested_end + r->newest_available + r->start_id +
		       r->end_id + r->message_len + r->message_truncated;
	size_t blocks = 0, hashes = 0;
	for (size_t i = 0; i < r->n_events; i++) {
		const kvr_event *ev = &r->events[i];
		sum = sum * 31 + ev->type + ev->tier + ev->has_dp_rank +
		      ev->dp_rank + ev->event_id + ev->has_parent +
		      ev->parent_hash;
		for (uint32_t k = 0; k < ev->n_blocks; k++) {
			sum = sum * 31 + ev->blocks[k].block_hash +
			      ev->blocks[k].tokens_hash;
		}
		for (uint32_t k = 0; k < ev->n_hashes; k++) {
			sum = sum * 31 + ev->block_hashes[k];
		}
		if ((ev->n_blocks && ev->type != KVI_EVENT_STORED) ||
		    (ev->n_hashes && ev->type != KVI_EVENT_REMOVED) ||
		    ev->type < KVI_EVENT_STORED ||
		    ev->type > KVI_EVENT_CLEARED) {
			abort(); /* an event holds only what its type has */
		}
		blocks += ev->n_blocks;
		hashes += ev->n_hashes;
	}
	for (size_t k = 0; k <= r->message_len; k++) {
		sum += (uint8_t)r->message[k]; /* NUL-terminated */
	}
	if (blocks != r->n_blocks || hashes != r->n_hashes ||
	    r->message[r->message_len] != '\0' ||
	    (r->n_events > 0 && r->kind != KVR_KIND_EVENTS &&
	     r->kind != KVR_KIND_TREE_DUMP)) {
		abort();
	}
	return sum;
}

/* fuzz_jansson_agrees says whether jansson also takes the body as JSON. */
static int
fuzz_jansson_agrees(const uint8_t *data, size_t size)
{
	json_error_t e;
	json_t *j = json_loadb((const char *)data, size, JSON_ALLOW_NUL, &e);
	if (j != NULL) {
		json_decref(j);
		return 1;
	}
	/* jansson's integers are int64 and its reals double. */
	return strstr(e.text, "too big") != NULL ||
	       strstr(e.text, "overflow") != NULL;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static kvr_parser *one, *two;
	if (one == NULL) {
		one = kvr_parser_alloc();
		two = kvr_parser_alloc();
	}
	kvr_parser_reset(one);
	kvr_parser_reset(two);
	size_t split = size ? (data[size / 2] * 257u + size) % (size + 1) : 0;

	kvi_err a = kvr_parser_feed(one, data, size);
	if (a == KVI_OK) {
		a = kvr_parser_finish(one);
	}
	kvi_err b = kvr_parser_feed(two, data, split);
	if (b == KVI_OK) {
		b = kvr_parser_feed(two, data + split, size - split);
	}
	if (b == KVI_OK) {
		b = kvr_parser_finish(two);
	}

	if (a != b || strcmp(kvr_parser_error(one), kvr_parser_error(two))) {
		fprintf(stderr, "split at %zu: \"%s\" vs \"%s\"\n", split,
			kvr_parser_error(one), kvr_parser_error(two));
		abort();
	}
	if (a != KVI_OK) {
		if (a != KVI_EPROTO || kvr_parser_error(one)[0] == '\0' ||
		    kvr_parser_result(one) != NULL) {
			abort(); /* every failure is malformed input, and says
				  * why */
		}
		return 0;
	}
	uint64_t s1 = fuzz_sum(kvr_parser_result(one));
	uint64_t s2 = fuzz_sum(kvr_parser_result(two));
	if (s1 != s2) {
		abort();
	}
	if (!fuzz_jansson_agrees(data, size)) {
		fprintf(stderr, "accepted what jansson rejects\n");
		abort();
	}
	volatile uint64_t sink = s1;
	(void)sink;
	return 0;
}
