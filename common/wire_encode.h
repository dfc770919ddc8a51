/*
 * wire_encode.h - encoding of engine KV event batches, as engines send them.
 *
 * The inverse of wire.h, used by the engine simulator, the benchmarks and the
 * tests: it writes exactly the msgpack an engine writes
 * (docs/wire.md#event-batches): events in the current map form (vLLM >= 0.23,
 * the default), the legacy tagged-array form, SGLang's positional form (a
 * metadata map at index 7 when the block has a salt) or SGLang's tagged maps
 * (cache_salt a field); the batch as an array [ts, events, rank] or, as current
 * vLLM encodes it, a map; hashes as unsigned ints (vLLM), signed int64 (SGLang)
 * or 32-byte bin.
 *
 * Usage: kvi_encoder_begin() with the number of events that follow, one
 * kvi_encoder_stored/removed/cleared() per event, then kvi_encoder_data().
 * The encoder owns its buffer; data stays valid until the next begin or
 * fini. Not thread-safe: one encoder per thread.
 */
#ifndef KVI_COMMON_WIRE_ENCODE_H
#define KVI_COMMON_WIRE_ENCODE_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum kvi_event_form {
	KVI_FORM_MAP = 0,   /* tagged maps, optional fields omitted */
	KVI_FORM_LEGACY,    /* tagged arrays, 7 fields for BlockStored */
	KVI_FORM_SGLANG,    /* tagged arrays, 6 fields + metadata map */
	KVI_FORM_SGLANG_MAP /* tagged maps with cache_salt, no lora_name */
} kvi_event_form;

typedef enum kvi_hash_form {
	KVI_HASH_UINT = 0, /* unsigned int, smallest width (vLLM) */
	KVI_HASH_INT64,    /* the same 64 bits as a signed int (SGLang) */
	KVI_HASH_BIN32,    /* 32-byte bin; the u64 in the last 8 bytes */
} kvi_hash_form;

typedef struct kvi_encoder {
	msgpack_sbuffer buf;
	msgpack_packer pk;
	kvi_event_form form;
	kvi_hash_form hash_form;
	uint32_t left; /* events announced by begin and not yet written */
	bool with_rank;
	bool map_batch; /* the batch as {ts, events, data_parallel_rank} */
	int dp_rank;
} kvi_encoder;

/* One element of a block's vLLM extra_keys tuple. */
typedef enum kvi_xkey_kind {
	KVI_XKEY_STR = 1, /* a str: the LoRA name, the salt, an old mm id */
	KVI_XKEY_MM,      /* [identifier, offset] */
	KVI_XKEY_BIN,     /* bytes: a prompt-embeds digest */
} kvi_xkey_kind;

typedef struct kvi_xkey {
	kvi_xkey_kind kind;
	const void *p; /* the str, identifier or bytes */
	size_t len;
	int64_t offset; /* KVI_XKEY_MM */
} kvi_xkey;

/* A BlockStored with every field an engine may send. */
typedef struct kvi_stored_spec {
	const uint64_t *hashes;
	size_t n;
	const uint64_t *parent; /* NULL: nil */
	const uint32_t *tokens; /* n_tokens ids; an offload store sends none */
	size_t n_tokens;
	uint32_t block_size; /* as written: 0 is what some offloads send */
	const char *medium;  /* NULL: nil */
	const char *lora_name;
	/* SGLang forms: the metadata salt (NULL: no metadata). */
	const char *cache_salt;
	/* vLLM forms: per block i, xkeys[xkey_start[i] .. xkey_start[i+1]),
	 * an empty tuple written as nil; xkey_start NULL writes no
	 * extra_keys. */
	const kvi_xkey *xkeys;
	const uint32_t *xkey_start;
} kvi_stored_spec;

void kvi_encoder_init(kvi_encoder *enc, kvi_event_form form,
		      kvi_hash_form hash_form);
void kvi_encoder_fini(kvi_encoder *enc);

/* kvi_encoder_begin starts a batch [ts, events, dp_rank] of n_events
 * events; dp_rank < 0 writes nil, and with_rank false writes the old
 * two-element batch [ts, events]. With enc->map_batch set, the batch is a
 * map with the same keys (data_parallel_rank omitted when nil or without
 * with_rank). */
void kvi_encoder_begin(kvi_encoder *enc, double ts, uint32_t n_events,
		       bool with_rank, int dp_rank);

/* kvi_encoder_stored writes a BlockStored of n hashes and their
 * n * block_size tokens; parent NULL writes nil, medium and lora_name NULL
 * write nil. */
void kvi_encoder_stored(kvi_encoder *enc, const uint64_t *hashes, size_t n,
			const uint64_t *parent, const uint32_t *tokens,
			size_t n_tokens, uint32_t block_size,
			const char *medium, const char *lora_name);

/* kvi_encoder_stored_spec writes a BlockStored of every shape in s. */
void kvi_encoder_stored_spec(kvi_encoder *enc, const kvi_stored_spec *s);

/* kvi_encoder_removed writes a BlockRemoved; medium NULL writes nil. */
void kvi_encoder_removed(kvi_encoder *enc, const uint64_t *hashes, size_t n,
			 const char *medium);

void kvi_encoder_cleared(kvi_encoder *enc);

/* kvi_encoder_data returns the encoded batch and its length. */
const void *kvi_encoder_data(const kvi_encoder *enc, size_t *len);

#endif /* KVI_COMMON_WIRE_ENCODE_H */
