/*
 * recover_parse.h - a streaming parser for `/kv_recover` response bodies.
 *
 * A `/kv_recover` body (docs/wire.md#kv_recover) is one externally tagged JSON
 * value:
 *
 *   {"Events":   {"events": [RouterEvent, ...], "last_event_id": N}}
 *   {"TreeDump": {"events": [RouterEvent, ...], "last_event_id": N | null}}
 *   {"TooNew":   {"requested_start": S, "requested_end": E,
 *                 "newest_available": N | null}}
 *   {"InvalidRange": {"start_id": S, "end_id": E}}
 *   {"Error": "message"}
 *
 * The dump of a large engine is tens of MB, so the parser never holds the
 * JSON: a byte-at-a-time JSON lexer (json_lex.h; strict RFC 8259: grammar,
 * escapes, UTF-8) drives a schema state machine that writes each value straight
 * into compact arrays it owns. Memory is bounded by the output (about 56 bytes
 * per event, 16 per stored block, 8 per removed hash, at most doubled by the
 * arrays' growth) plus about 10 kB of its own, whatever the chunking: bytes may
 * be fed in pieces of any size, down to one byte at a time, with identical
 * results. The parser does no I/O: create, feed bytes, finish, read the
 * result, free.
 *
 * Values:
 *  - u64 fields (hashes, ids) are parsed from the number's digits, so the
 *    whole range up to 2^64-1 is exact. A hash may also be negative, down to
 *    -2^63: it is taken as its 64-bit two's-complement value (SGLang sends
 *    signed hashes). Ids (event_id, last_event_id, the TooNew and
 *    InvalidRange bounds) must be non-negative. Numbers with a fraction or an
 *    exponent are not integers and are rejected where an integer is expected.
 *  - TreeDump's `last_event_id` and TooNew's `newest_available` may be null:
 *    an engine that has published nothing yet has no id to name.
 *    has_last_event_id and has_newest_available tell null (false, the id
 *    reads 0) from a number. Every other id, Events' `last_event_id`
 *    included, must be a number.
 *  - `dp_rank` is optional (absent or null: none) and must fit in a u16.
 *  - `storage_tier` maps case-insensitively: absent, null, "Device", "GPU"
 *    -> gpu; "Host", "HostPinned", "Host_Pinned", "CPU", "CPU_Pinned",
 *    "CPU_Tier1" -> cpu; "Disk" and anything else -> disk (the lowest tier
 *    is the safe guess for a tier this parser does not know).
 *  - `parent_hash` absent or null: the block starts a sequence.
 *  - `data` is "cleared", {"cleared": null | {...}}, {"stored": {...}} or
 *    {"removed": {...}}: exactly one variant.
 *  - `worker_id` is informational: it must be an integer and is ignored.
 *  - Unknown keys are ignored (their values are still checked to be JSON),
 *    except at the top (an unknown kind) and in `data` (an unknown variant).
 *    A known key given twice in one object is an error.
 *
 * Limits: nesting deeper than KVR_DEPTH_MAX, one RouterEvent element longer
 * than KVR_ELEMENT_MAX bytes of JSON. The Error message is kept up to
 * KVR_MESSAGE_MAX bytes (longer ones are truncated, not rejected).
 *
 * Errors: every malformed body yields KVI_EPROTO and a message that says
 * what and where, e.g.
 *   byte 97: Events.events[0].event.dp_rank: 65536 does not fit in u16
 * The parser never reads outside the bytes it is given and never aborts on
 * bad input. Errors are sticky until kvr_parser_reset().
 *
 * Threading: a parser is used by one thread at a time.
 */
#ifndef KVI_SHARD_RECOVER_PARSE_H
#define KVI_SHARD_RECOVER_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "wire.h"

#define KVR_DEPTH_MAX   32
#define KVR_ELEMENT_MAX (8u << 20)
#define KVR_MESSAGE_MAX 4096

/* Which of the five answers the body is. */
typedef enum kvr_kind {
	KVR_KIND_NONE = 0,
	KVR_KIND_EVENTS,        /* apply the events, then set the watermark */
	KVR_KIND_TREE_DUMP,     /* clear, apply the events, set the watermark */
	KVR_KIND_TOO_NEW,       /* nothing to apply */
	KVR_KIND_INVALID_RANGE, /* nothing to apply */
	KVR_KIND_ERROR,         /* nothing to apply; see message */
} kvr_kind;

/* One stored block: the engine's external hash and the local hash. */
typedef struct kvr_block {
	uint64_t block_hash;
	uint64_t tokens_hash;
} kvr_block;

/* One RouterEvent. blocks is set for stored events, block_hashes for
 * removed ones; either is NULL when its count is 0. */
typedef struct kvr_event {
	kvi_event_type type;
	kvi_tier tier;
	bool has_dp_rank;
	bool has_parent; /* stored: parent_hash was present and not null */
	uint16_t dp_rank;
	uint32_t n_blocks;
	uint32_t n_hashes;
	uint64_t event_id;
	uint64_t parent_hash; /* when has_parent */
	const kvr_block *blocks;
	const uint64_t *block_hashes;
} kvr_event;

/* A parsed body. Only the fields of its kind are meaningful; the others are
 * 0 (events NULL, message ""). */
typedef struct kvr_response {
	kvr_kind kind;
	/* Events, TreeDump. has_last_event_id is false when a TreeDump gave
	 * null (always true for Events); last_event_id is then 0. */
	bool has_last_event_id;
	uint64_t last_event_id;
	const kvr_event *events;
	size_t n_events;
	size_t n_blocks; /* over all events */
	size_t n_hashes; /* over all events */
	/* TooNew. has_newest_available is false when it was null;
	 * newest_available is then 0. */
	uint64_t requested_start;
	uint64_t requested_end;
	bool has_newest_available;
	uint64_t newest_available;
	/* InvalidRange */
	uint64_t start_id;
	uint64_t end_id;
	/* Error: NUL-terminated; message_len excludes the NUL and counts any
	 * NUL the message itself holds (from \u0000). */
	const char *message;
	size_t message_len;
	bool message_truncated;
} kvr_response;

typedef struct kvr_parser kvr_parser;

/* kvr_parser_alloc returns a new, empty parser; it aborts on out-of-memory. */
kvr_parser *kvr_parser_alloc(void);

/* kvr_parser_free frees p and everything its result points to; NULL is
 * ignored. */
void kvr_parser_free(kvr_parser *p);

/* kvr_parser_reset makes p ready for a new body, keeping its buffers.
 * Invalidates the previous result. */
void kvr_parser_reset(kvr_parser *p);

/* kvr_parser_feed parses the next len bytes of the body (buf may be NULL
 * when len is 0). Returns KVI_OK, KVI_EPROTO for a malformed body (and every
 * later call returns it again), or KVI_EINVAL after a finish. */
kvi_err kvr_parser_feed(kvr_parser *p, const void *buf, size_t len);

/* kvr_parser_finish says the body is complete. Returns KVI_OK when the body
 * held one complete value of the shape above and nothing but whitespace
 * after it, else KVI_EPROTO (or the error of an earlier feed). Calling it
 * again returns the same. */
kvi_err kvr_parser_finish(kvr_parser *p);

/* kvr_parser_result returns the parsed body after a successful finish, else
 * NULL. It and every array it points to stay valid, unmodified, until
 * kvr_parser_reset() or kvr_parser_free() of p. */
const kvr_response *kvr_parser_result(const kvr_parser *p);

/* kvr_parser_error returns the message of the failure ("" when there is
 * none), valid until the next call on p. */
const char *kvr_parser_error(const kvr_parser *p);

/* kvr_parser_bytes returns how many bytes were fed since the last reset. */
uint64_t kvr_parser_bytes(const kvr_parser *p);

/* kvr_parser_blocks returns how many stored blocks the events parsed so
 * far hold, whole or not yet: what a caller bounds while bytes come. */
size_t kvr_parser_blocks(const kvr_parser *p);

/* kvr_parser_footprint returns the bytes of heap p holds (its arrays at
 * their capacity, and itself). */
size_t kvr_parser_footprint(const kvr_parser *p);

/* kvr_kind_name returns "Events", "TreeDump", "TooNew", "InvalidRange",
 * "Error" or "none". */
const char *kvr_kind_name(kvr_kind kind);

#endif /* KVI_SHARD_RECOVER_PARSE_H */
