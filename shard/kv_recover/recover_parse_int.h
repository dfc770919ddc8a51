/*
 * recover_parse_int.h - what the two files of the `/kv_recover` stream
 * parser share: recover_parse.c (the parser object, its errors and its API)
 * and recover_parse_schema.c (the schema layer the JSON lexer drives, and
 * the output arrays it fills). Not a public header: everything else goes
 * through recover_parse.h.
 */
#ifndef KVI_SHARD_RECOVER_PARSE_INT_H
#define KVI_SHARD_RECOVER_PARSE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json_lex.h"
#include "recover_parse.h"

_Static_assert(KVR_DEPTH_MAX == KVJ_DEPTH_MAX, "one frame per container");
_Static_assert(KVR_MESSAGE_MAX == KVJ_STRING_MAX, "a message is one string");

/* The keys the schema knows, with their names. K_NONE: no key yet;
 * K_UNKNOWN: any other. */
#define KVR_KEYS(X)                                                            \
	X(K_NONE, "")                                                          \
	X(K_UNKNOWN, "*")                                                      \
	X(K_KIND_EVENTS, "Events")                                             \
	X(K_KIND_TREE_DUMP, "TreeDump")                                        \
	X(K_KIND_TOO_NEW, "TooNew")                                            \
	X(K_KIND_INVALID_RANGE, "InvalidRange")                                \
	X(K_KIND_ERROR, "Error")                                               \
	X(K_EVENTS, "events")                                                  \
	X(K_LAST_EVENT_ID, "last_event_id")                                    \
	X(K_REQUESTED_START, "requested_start")                                \
	X(K_REQUESTED_END, "requested_end")                                    \
	X(K_NEWEST_AVAILABLE, "newest_available")                              \
	X(K_START_ID, "start_id")                                              \
	X(K_END_ID, "end_id")                                                  \
	X(K_WORKER_ID, "worker_id")                                            \
	X(K_STORAGE_TIER, "storage_tier")                                      \
	X(K_EVENT, "event")                                                    \
	X(K_EVENT_ID, "event_id")                                              \
	X(K_DP_RANK, "dp_rank")                                                \
	X(K_DATA, "data")                                                      \
	X(K_STORED, "stored")                                                  \
	X(K_REMOVED, "removed")                                                \
	X(K_CLEARED, "cleared")                                                \
	X(K_PARENT_HASH, "parent_hash")                                        \
	X(K_BLOCKS, "blocks")                                                  \
	X(K_BLOCK_HASH, "block_hash")                                          \
	X(K_TOKENS_HASH, "tokens_hash")                                        \
	X(K_BLOCK_HASHES, "block_hashes")

enum {
#define KVR_KEY_ENUM(k, name) k,
	KVR_KEYS(KVR_KEY_ENUM)
#undef KVR_KEY_ENUM
};

/* The name of each key, indexed by the enum above. */
extern const char *const kvr_key_names[];

/* One open container. */
typedef struct kvr_frame {
	uint8_t node;   /* V_*: what this container is */
	uint8_t key;    /* objects: the key whose value is next, or K_NONE */
	uint8_t want;   /* objects: what that value must be */
	bool is_array;  /* as the lexer saw it */
	uint32_t seen;  /* objects: bit set of the known keys seen */
	uint64_t index; /* arrays: elements completed */
} kvr_frame;

struct kvr_parser {
	kvj_lexer lex;
	uint8_t depth; /* frames in use: the lexer's depth */
	bool finished;
	kvi_err rv;
	char err[512];

	kvr_frame frames[KVR_DEPTH_MAX];

	/* output */
	kvr_response resp;
	kvr_event *events;
	size_t events_len, events_cap;
	size_t ev_blocks_off; /* where the current event's blocks start */
	size_t ev_hashes_off; /* and its removed hashes */
	kvr_block *blocks;
	size_t blocks_len, blocks_cap;
	uint64_t *hashes;
	size_t hashes_len, hashes_cap;
	char message[KVR_MESSAGE_MAX + 1];
};

/* The schema's handler of the lexer's tokens (recover_parse_schema.c); its
 * context is the parser. */
extern const kvj_handler kvr_handler;

/* kvr_fail records a KVI_EPROTO failure at the current byte; only the first
 * failure is kept (recover_parse.c). */
void kvr_fail(kvr_parser *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* KVI_SHARD_RECOVER_PARSE_INT_H */
