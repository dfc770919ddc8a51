/*
 * wire.h - decoding of engine KV event batches (docs/wire.md#event-batches).
 *
 * A kvi_decoder turns the msgpack payload of one event message into a
 * kvi_batch. It accepts every encoding engines publish: the batch as an
 * array [ts, events] or [ts, events, data_parallel_rank] (extra trailing
 * elements ignored) or as a map {ts, events, data_parallel_rank}; events as
 * legacy tagged arrays of any length (fields past the known ones ignored) or
 * as current tagged maps (unknown keys ignored); hashes as msgpack ints of any
 * width (negative int64 taken as its two's-complement u64) or as bin, reduced
 * to the last 8 bytes read big-endian.
 *
 * The decoder never reads outside the given bytes and never aborts on bad
 * input: every malformed payload yields KVI_EPROTO (or KVI_ERANGE for a value
 * that does not fit its type) and a message naming what was wrong and where,
 * e.g. "events[1].token_ids[3]: -5 is not a u32".
 *
 * Memory: the decoder owns every array a batch points to. A batch stays valid
 * until the next kvi_decoder_decode() on the same decoder or its fini, and is
 * never modified by the caller. One decoder serves one thread; decoders reuse
 * their buffers, so steady-state decoding does not allocate.
 */
#ifndef KVI_COMMON_WIRE_H
#define KVI_COMMON_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Where a block lives, from the event's `medium`. */
typedef enum kvi_tier {
	KVI_TIER_GPU = 0,
	KVI_TIER_CPU = 1,
	KVI_TIER_DISK = 2,
} kvi_tier;
#define KVI_TIER_COUNT 3

typedef enum kvi_event_type {
	KVI_EVENT_SKIPPED = 0, /* not decoded: see skip */
	KVI_EVENT_STORED = 1,
	KVI_EVENT_REMOVED,
	KVI_EVENT_CLEARED,
} kvi_event_type;

/* Why an event was skipped. */
typedef enum kvi_skip {
	KVI_SKIP_NONE = 0,
	KVI_SKIP_UNKNOWN_TYPE, /* a tag this decoder does not know */
	KVI_SKIP_MALFORMED,    /* a field missing, of a wrong type or range */
} kvi_skip;
#define KVI_SKIP_COUNT 3

/* A string inside a batch: not NUL-terminated; ptr is NULL when the field
 * was absent or nil. */
typedef struct kvi_str {
	const char *ptr;
	uint32_t len;
} kvi_str;

typedef struct kvi_event {
	kvi_event_type type;
	kvi_skip skip;          /* KVI_EVENT_SKIPPED: why */
	kvi_tier tier;          /* from medium; gpu when absent */
	bool has_parent;        /* stored: parent_block_hash was not nil */
	bool has_group_idx;     /* group_idx present and not nil */
	bool remote;            /* locality == "REMOTE" (case-insensitive) */
	bool unknown_keys;      /* extra_keys held elements of unknown kinds */
	uint32_t block_size;    /* stored: positive, or 0 without tokens */
	uint64_t parent;        /* stored, when has_parent */
	int64_t group_idx;      /* when has_group_idx */
	const uint64_t *hashes; /* stored/removed: external block hashes */
	uint32_t n_hashes;
	const uint32_t *tokens; /* stored: token ids; none for an offload */
	uint32_t n_tokens;
	/* stored: block i's extra bytes (hash.h) are
	 * extra[extra_off[i] .. extra_off[i + 1]); extra_off is NULL when no
	 * block has any. */
	const uint8_t *extra;
	const uint32_t *extra_off;
	kvi_str medium; /* raw medium as sent */
	kvi_str lora_name;
	/* SGLang's metadata or map field, or vLLM's first-block salt */
	kvi_str cache_salt;
	kvi_str locality;
	/* stored: vLLM's kv_cache_spec_kind of the event's cache group, as
	 * sent (ptr NULL when absent), and kv_cache_spec_sliding_window in
	 * tokens (0 when absent, nil, or not a positive u32) */
	kvi_str spec_kind;
	uint32_t window;
} kvi_event;

typedef struct kvi_batch {
	double ts;
	bool has_dp_rank;
	uint16_t dp_rank;
	uint32_t n_events;
	uint32_t n_skipped; /* events of type KVI_EVENT_SKIPPED */
	const kvi_event *events;
} kvi_batch;

typedef struct kvi_decoder kvi_decoder;

/* kvi_decoder_alloc returns a new decoder; it aborts on out-of-memory. */
kvi_decoder *kvi_decoder_alloc(void);
void kvi_decoder_free(kvi_decoder *dec);

/* kvi_decoder_decode decodes one payload of len bytes into *batch.
 * Returns KVI_OK, KVI_EPROTO (malformed) or KVI_ERANGE (a value that does not
 * fit, such as a rank of 65536); on error *batch is untouched and
 * kvi_decoder_error() says what and where. */
kvi_err kvi_decoder_decode(kvi_decoder *dec, const void *buf, size_t len,
			   kvi_batch *batch);

/* kvi_batch_rank reads a batch's data_parallel_rank without decoding its
 * events: it steps over them, checking only that their lengths fit, so it
 * costs a fraction of a decode. *has is false when the batch names no
 * rank (a two-element array, no such key, or nil). Returns KVI_EPROTO when
 * the envelope cannot be read that far and KVI_ERANGE for a rank that is
 * not a u16; the decoder then says exactly what is wrong. Never reads
 * outside the given bytes. */
kvi_err kvi_batch_rank(const void *buf, size_t len, bool *has, uint16_t *rank);

/* kvi_decoder_error returns the message of the last failed decode (valid
 * until the next decode), or "" after a success. */
const char *kvi_decoder_error(const kvi_decoder *dec);

/* kvi_decoder_skip_error returns why the first malformed event of the last
 * decoded batch was skipped, else the first one of an unknown type, or ""
 * when none was. */
const char *kvi_decoder_skip_error(const kvi_decoder *dec);

/* kvi_skip_name returns "unknown_type" or "malformed". */
const char *kvi_skip_name(kvi_skip skip);

/* kvi_event_local_hashes writes the local hashes (hash.h) of a stored
 * event's blocks into out (n_hashes entries): its tokens and each block's
 * extra bytes, the LoRA name in every block's seed, the salt in the first
 * block's when the event starts a sequence (no parent). The event must
 * have n_hashes * block_size tokens. */
void kvi_event_local_hashes(const kvi_event *ev, uint64_t *out);

/* kvi_event_local_hashes_bs is the same over n blocks of bs tokens each
 * (the event must have n * bs tokens): a KV cache group's store whose
 * blocks are several of the model's, or that lists only some of the
 * blocks its tokens span. Extra bytes are hashed only when the blocks are
 * the event's own, all listed. */
void kvi_event_local_hashes_bs(const kvi_event *ev, uint32_t bs, size_t n,
			       uint64_t *out);

/* kvi_tier_from_medium maps a medium string (case-insensitive) to a tier:
 * GPU, DEVICE and absent are gpu; CPU, CPU_PINNED, CPU_TIER1 are cpu;
 * anything else is disk. */
kvi_tier kvi_tier_from_medium(const char *medium, size_t len);

/* kvi_tier_name returns "gpu", "cpu" or "disk". */
const char *kvi_tier_name(kvi_tier tier);

/* kvi_hash_from_bytes reduces a bin hash to u64 (last 8 bytes, big-endian).
 * len must be at least 8. */
uint64_t kvi_hash_from_bytes(const uint8_t *p, size_t len);

#endif /* KVI_COMMON_WIRE_H */
