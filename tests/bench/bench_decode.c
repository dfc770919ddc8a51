/*
 * bench_decode - event decoder throughput on a Mooncake trace.
 *
 * Builds the stream one engine rank would publish for the trace
 * (bench_stream.h: new blocks stored, FIFO-cache evictions removed, one
 * batch per request), encodes it once in each wire form, then times
 * decoding every batch --rounds times. Prints batches/s, block events/s
 * (one per hash in a stored or removed event) and MB/s for each form, and
 * what reading a batch's rank alone (kvi_batch_rank) costs beside it.
 *
 *   bench_decode [--trace FILE] [--block-size N] [--blocks-per-id K]
 *                [--cache-blocks N] [--rounds R]
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_stream.h"
#include "wire.h"

static void
bench_form(bs_opts o, kvi_event_form form, const char *name, int rounds)
{
	bs_stream s;
	o.form = form;
	bs_build(&o, &s);
	kvi_decoder *dec = kvi_decoder_alloc();
	uint64_t check = 0;
	double t0 = bs_now();
	for (int r = 0; r < rounds; r++) {
		for (size_t i = 0; i < s.n; i++) {
			kvi_batch b;
			if (kvi_decoder_decode(dec, s.data + s.batches[i].off,
					       s.batches[i].len,
					       &b) != KVI_OK) {
				fprintf(stderr, "decode failed: %s\n",
					kvi_decoder_error(dec));
				exit(1);
			}
			check += b.n_events;
		}
	}
	double dt = bs_now() - t0;
	/* the rank alone, as ingest reads it before sequencing a batch */
	double t1 = bs_now();
	for (int r = 0; r < rounds; r++) {
		for (size_t i = 0; i < s.n; i++) {
			bool has;
			uint16_t rank = 0;
			if (kvi_batch_rank(s.data + s.batches[i].off,
					   s.batches[i].len, &has,
					   &rank) != KVI_OK) {
				fprintf(stderr, "rank unreadable\n");
				exit(1);
			}
			check += rank;
		}
	}
	double dr = bs_now() - t1;
	printf("form=%-6s batches=%zu block_events=%zu bytes=%zu "
	       "batches_per_s=%.0f block_events_per_s=%.0f MB_per_s=%.1f "
	       "rank_only_batches_per_s=%.0f rank_cost_of_decode=%.3f "
	       "(check %llu)\n",
	       name, s.n, s.block_events, s.bytes, (double)s.n * rounds / dt,
	       (double)s.block_events * rounds / dt,
	       (double)s.bytes * rounds / dt / 1e6, (double)s.n * rounds / dr,
	       dr / dt, (unsigned long long)check);
	kvi_decoder_free(dec);
	bs_free(&s);
}

int
main(int argc, char **argv)
{
	bs_opts o = {
	    .trace = KVI_DATA_DIR "/traces/conversation_trace.jsonl",
	    .block_size = 16,
	    .blocks_per_id = 1,
	    .cache_blocks = 65536,
	    .listeners = 1,
	    .copies = 1,
	};
	int rounds = 5;
	static const struct option longopts[] = {
	    {"trace", required_argument, NULL, 't'},
	    {"block-size", required_argument, NULL, 'b'},
	    {"blocks-per-id", required_argument, NULL, 'k'},
	    {"cache-blocks", required_argument, NULL, 'c'},
	    {"rounds", required_argument, NULL, 'r'},
	    {NULL, 0, NULL, 0},
	};
	int c;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 't':
			o.trace = optarg;
			break;
		case 'b':
			o.block_size = (uint32_t)atoi(optarg);
			break;
		case 'k':
			o.blocks_per_id = (uint32_t)atoi(optarg);
			break;
		case 'c':
			o.cache_blocks = (size_t)atol(optarg);
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		default:
			fprintf(stderr, "see the comment at the top of "
					"bench_decode.c\n");
			return 2;
		}
	}
	if (o.block_size == 0 || o.blocks_per_id == 0 || rounds <= 0 ||
	    o.cache_blocks == 0) {
		fprintf(stderr, "sizes and rounds must be positive\n");
		return 2;
	}
	const char *base = strrchr(o.trace, '/');
	printf("trace=%s block_size=%u blocks_per_id=%u cache_blocks=%zu "
	       "rounds=%d\n",
	       base ? base + 1 : o.trace, o.block_size, o.blocks_per_id,
	       o.cache_blocks, rounds);
	bench_form(o, KVI_FORM_MAP, "map", rounds);
	bench_form(o, KVI_FORM_LEGACY, "legacy", rounds);
	return 0;
}
