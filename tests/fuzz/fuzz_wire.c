/*
 * fuzz_wire.c - libFuzzer target for the event batch decoder.
 *
 * Any input must either decode or fail with a message; on success every
 * array of the batch is read in full, so a bad length or pointer shows up
 * under ASan, and the rank read alone (kvi_batch_rank) must be the
 * decoder's. Built as a libFuzzer binary with -DKVI_FUZZ=ON (clang), and as
 * a corpus replayer (replay_main.c) in every build.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t
fuzz_touch_batch(const kvi_batch *b)
{
	uint64_t sum = b->dp_rank;
	for (uint32_t i = 0; i < b->n_events; i++) {
		const kvi_event *ev = &b->events[i];
		for (uint32_t k = 0; k < ev->n_hashes; k++) {
			sum += ev->hashes[k];
		}
		for (uint32_t k = 0; k < ev->n_tokens; k++) {
			sum += ev->tokens[k];
		}
		const kvi_str *strs[] = {&ev->medium, &ev->lora_name,
					 &ev->cache_salt, &ev->locality};
		for (size_t s = 0; s < sizeof(strs) / sizeof(strs[0]); s++) {
			for (uint32_t k = 0; k < strs[s]->len; k++) {
				sum += (uint8_t)strs[s]->ptr[k];
			}
		}
		if (ev->type == KVI_EVENT_STORED && ev->block_size == 0) {
			abort(); /* the decoder promises a positive size */
		}
	}
	return sum;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static kvi_decoder *dec;
	if (dec == NULL) {
		dec = kvi_decoder_alloc();
	}
	kvi_batch b;
	kvi_err rv = kvi_decoder_decode(dec, data, size, &b);
	bool has;
	uint16_t rank = 0;
	kvi_err rrv = kvi_batch_rank(data, size, &has, &rank);
	if (rv == KVI_OK) {
		volatile uint64_t sink = fuzz_touch_batch(&b);
		(void)sink;
		/* what the rank reader says of a batch that decodes is what
		 * the decoder says */
		if (rrv != KVI_OK || has != b.has_dp_rank ||
		    (has && rank != b.dp_rank)) {
			abort();
		}
	} else if (kvi_decoder_error(dec)[0] == '\0') {
		abort(); /* every failure must say why */
	}
	return 0;
}
