/*
 * wire_json.h - a decoded batch as JSON, for people and for tests.
 *
 * The shape follows the "expect" objects of the wire test vectors, so a
 * tool's output can be compared with them directly:
 *
 *   {"dp_rank": 1 | null, "ts": 1.5, "events": [
 *     {"type": "stored", "block_hashes": ["<u64>", ...], "parent": "<u64>" |
 *      null, "token_ids": [...], "block_size": 16, "medium": "GPU" | null,
 *      "tier": "gpu", "lora_name": null, "group_idx": 0 | null,
 *      "locality": null, "cache_salt": null},
 *     {"type": "removed", "block_hashes": [...], "medium": ..., "tier": ...},
 *     {"type": "cleared"}]}
 *
 * u64 hashes are decimal strings: JSON numbers lose precision past 2^53 in
 * most readers.
 */
#ifndef KVI_COMMON_WIRE_JSON_H
#define KVI_COMMON_WIRE_JSON_H

#include <jansson.h>

#include "wire.h"

/* kvi_batch_to_json returns a new JSON object for b (the caller owns it). */
json_t *kvi_batch_to_json(const kvi_batch *b);

/* kvi_u64_json returns a new JSON string holding v in decimal. */
json_t *kvi_u64_json(uint64_t v);

#endif /* KVI_COMMON_WIRE_JSON_H */
