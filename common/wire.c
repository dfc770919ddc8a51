/*
 * wire.c - the event batch decoder.
 *
 * Decoding is two passes over the payload. mp_check() walks the raw msgpack
 * once, checking that every length fits in the bytes that remain and that
 * nesting stays shallow: msgpack-c sizes each container's storage from its
 * declared count before reading its elements, so an unchecked 6-byte payload
 * could ask it for gigabytes. Once the bytes are known to be well formed,
 * msgpack-c builds the object tree in a zone the decoder reuses, and the walk
 * below maps it onto kvi_batch, checking every field's type.
 */
#include "wire.h"

#include <inttypes.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"

#define KVI_MP_MAX_DEPTH 24
#define KVI_BIN_HASH_MIN 8
#define KVI_BIN_HASH_MAX 64

/* Where each event's arrays start in the decoder's arenas; pointers are set
 * once decoding is done, since the arenas may move while they grow. */
typedef struct kvi_event_span {
	size_t hash_off;
	size_t token_off;
} kvi_event_span;

struct kvi_decoder {
	msgpack_zone zone;
	kvi_event *events;
	kvi_event_span *spans;
	size_t events_cap;
	uint64_t *hashes;
	size_t hashes_len, hashes_cap;
	uint32_t *tokens;
	size_t tokens_len, tokens_cap;
	char err[256];
};

/* Fields of the events, in legacy-array order for BlockStored. */
typedef enum kvi_field {
	F_NONE = 0,
	F_BLOCK_HASHES,
	F_PARENT,
	F_TOKEN_IDS,
	F_BLOCK_SIZE,
	F_LORA_ID,
	F_MEDIUM,
	F_LORA_NAME,
	F_EXTRA_KEYS,
	F_GROUP_IDX,
	F_SPEC_KIND,
	F_SPEC_WINDOW,
	F_LOCALITY,
	F_CACHE_SALT,
} kvi_field;

static const char *const kvi_field_names[] = {
    [F_NONE] = "?",
    [F_BLOCK_HASHES] = "block_hashes",
    [F_PARENT] = "parent_block_hash",
    [F_TOKEN_IDS] = "token_ids",
    [F_BLOCK_SIZE] = "block_size",
    [F_LORA_ID] = "lora_id",
    [F_MEDIUM] = "medium",
    [F_LORA_NAME] = "lora_name",
    [F_EXTRA_KEYS] = "extra_keys",
    [F_GROUP_IDX] = "group_idx",
    [F_SPEC_KIND] = "kv_cache_spec_kind",
    [F_SPEC_WINDOW] = "kv_cache_spec_sliding_window",
    [F_LOCALITY] = "locality",
    [F_CACHE_SALT] = "cache_salt",
};
#define KVI_FIELD_COUNT (sizeof(kvi_field_names) / sizeof(kvi_field_names[0]))

static const kvi_field kvi_stored_legacy[] = {
    F_BLOCK_HASHES, F_PARENT,    F_TOKEN_IDS,   F_BLOCK_SIZE,
    F_LORA_ID,      F_MEDIUM,    F_LORA_NAME,   F_EXTRA_KEYS,
    F_GROUP_IDX,    F_SPEC_KIND, F_SPEC_WINDOW,
};
static const kvi_field kvi_removed_legacy[] = {F_BLOCK_HASHES, F_MEDIUM,
					       F_GROUP_IDX};
#define KVI_STORED_MIN_FIELDS  5
#define KVI_REMOVED_MIN_FIELDS 1
#define KVI_NELEM(a)           (sizeof(a) / sizeof((a)[0]))

/* ---- errors ---------------------------------------------------------- */

static kvi_err kvi_fail(kvi_decoder *dec, kvi_err rv, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static kvi_err
kvi_fail(kvi_decoder *dec, kvi_err rv, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(dec->err, sizeof(dec->err), fmt, ap);
	va_end(ap);
	return rv;
}

static const char *
kvi_mp_type_name(const msgpack_object *o)
{
	switch (o->type) {
	case MSGPACK_OBJECT_NIL:
		return "nil";
	case MSGPACK_OBJECT_BOOLEAN:
		return "bool";
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		return "int";
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		return "float";
	case MSGPACK_OBJECT_STR:
		return "str";
	case MSGPACK_OBJECT_ARRAY:
		return "array";
	case MSGPACK_OBJECT_MAP:
		return "map";
	case MSGPACK_OBJECT_BIN:
		return "bin";
	case MSGPACK_OBJECT_EXT:
		return "ext";
	}
	return "unknown";
}

/* kvi_int_text writes an int object's value for a message. */
static const char *
kvi_int_text(const msgpack_object *o, char *buf, size_t size)
{
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		snprintf(buf, size, "%" PRId64, o->via.i64);
	} else {
		snprintf(buf, size, "%" PRIu64, o->via.u64);
	}
	return buf;
}

/* ---- pass 1: bounds and depth of the raw msgpack --------------------- */

static uint64_t
kvi_be(const uint8_t *p, size_t n)
{
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		v = (v << 8) | p[i];
	}
	return v;
}

/* How the size of an object whose first byte is 0xc0 + i is found: a
 * big-endian length of lenbytes bytes may follow the first byte, then fixed
 * bytes plus, for str/bin/ext, length bytes of data; a container's length
 * counts its elements (per_len 1: array) or key/value pairs (2: map). */
typedef struct kvi_mp_shape {
	uint8_t valid, lenbytes, fixed, per_len;
} kvi_mp_shape;

static const kvi_mp_shape kvi_mp_shapes[32] = {
    [0x00] = {1, 0, 0, 0},                         /* nil */
    [0x02] = {1, 0, 0, 0},  [0x03] = {1, 0, 0, 0}, /* false, true */
    [0x04] = {1, 1, 0, 0},  [0x05] = {1, 2, 0, 0}, /* bin 8, 16 */
    [0x06] = {1, 4, 0, 0},                         /* bin 32 */
    [0x07] = {1, 1, 1, 0},  [0x08] = {1, 2, 1, 0}, /* ext 8, 16 */
    [0x09] = {1, 4, 1, 0},                         /* ext 32 */
    [0x0a] = {1, 0, 4, 0},  [0x0b] = {1, 0, 8, 0}, /* float 32, 64 */
    [0x0c] = {1, 0, 1, 0},  [0x0d] = {1, 0, 2, 0}, /* uint 8, 16 */
    [0x0e] = {1, 0, 4, 0},  [0x0f] = {1, 0, 8, 0}, /* uint 32, 64 */
    [0x10] = {1, 0, 1, 0},  [0x11] = {1, 0, 2, 0}, /* int 8, 16 */
    [0x12] = {1, 0, 4, 0},  [0x13] = {1, 0, 8, 0}, /* int 32, 64 */
    [0x14] = {1, 0, 2, 0},  [0x15] = {1, 0, 3, 0}, /* fixext 1, 2 */
    [0x16] = {1, 0, 5, 0},  [0x17] = {1, 0, 9, 0}, /* fixext 4, 8 */
    [0x18] = {1, 0, 17, 0},                        /* fixext 16 */
    [0x19] = {1, 1, 0, 0},  [0x1a] = {1, 2, 0, 0}, /* str 8, 16 */
    [0x1b] = {1, 4, 0, 0},                         /* str 32 */
    [0x1c] = {1, 2, 0, 1},  [0x1d] = {1, 4, 0, 1}, /* array 16, 32 */
    [0x1e] = {1, 2, 0, 2},  [0x1f] = {1, 4, 0, 2}, /* map 16, 32 */
};

/* kvi_mp_head returns the shape of the object whose first byte is b, with
 * the fix-size forms (fixint, fixstr, fixarray, fixmap) folded in: *items
 * is then their element count. 0xc1 is never used: valid is 0. */
static kvi_mp_shape
kvi_mp_head(uint8_t b, uint64_t *items)
{
	*items = 0;
	if (b <= 0x7f || b >= 0xe0) {
		return (kvi_mp_shape){1, 0, 0, 0};
	}
	if (b <= 0x8f) {
		*items = 2u * (b & 0x0f);
		return (kvi_mp_shape){1, 0, 0, 2};
	}
	if (b <= 0x9f) {
		*items = b & 0x0f;
		return (kvi_mp_shape){1, 0, 0, 1};
	}
	if (b <= 0xbf) {
		return (kvi_mp_shape){1, 0, (uint8_t)(b & 0x1f), 0};
	}
	return kvi_mp_shapes[b - 0xc0];
}

static kvi_err
kvi_mp_check(kvi_decoder *dec, const uint8_t *p, size_t len)
{
	uint64_t left[KVI_MP_MAX_DEPTH + 1];
	int depth = 0;
	size_t off = 0;
	left[0] = 1;
	for (;;) {
		while (left[depth] == 0) {
			if (depth == 0) {
				goto done;
			}
			depth--;
		}
		left[depth]--;
		if (off >= len) {
			return kvi_fail(dec, KVI_EPROTO,
					"msgpack: truncated at byte %zu", off);
		}
		size_t at = off;
		uint64_t items;
		kvi_mp_shape sh = kvi_mp_head(p[off++], &items);
		if (!sh.valid) {
			return kvi_fail(
			    dec, KVI_EPROTO,
			    "msgpack: invalid byte 0x%02x at byte %zu", p[at],
			    at);
		}
		if (sh.lenbytes > len - off) {
			return kvi_fail(dec, KVI_EPROTO,
					"msgpack: truncated at byte %zu", len);
		}
		uint64_t n = kvi_be(p + off, sh.lenbytes);
		off += sh.lenbytes;
		bool container = sh.per_len != 0;
		if (!container) {
			/* str, bin and ext carry n data bytes */
			uint64_t skip = sh.fixed + n;
			if (skip > len - off) {
				return kvi_fail(dec, KVI_EPROTO,
						"msgpack: value at byte %zu "
						"needs %" PRIu64
						" bytes, %zu remain",
						at, skip, len - off);
			}
			off += (size_t)skip;
			continue;
		}
		if (sh.lenbytes != 0) {
			items = n * sh.per_len;
		}
		/* Every element takes at least one byte. */
		if (items > len - off) {
			return kvi_fail(
			    dec, KVI_EPROTO,
			    "msgpack: container at byte %zu declares "
			    "%" PRIu64 " elements, %zu bytes remain",
			    at, items, len - off);
		}
		if (items == 0) {
			continue;
		}
		if (depth == KVI_MP_MAX_DEPTH) {
			return kvi_fail(
			    dec, KVI_EPROTO,
			    "msgpack: nested deeper than %d at byte "
			    "%zu",
			    KVI_MP_MAX_DEPTH, at);
		}
		left[++depth] = items;
	}
done:
	if (off != len) {
		return kvi_fail(dec, KVI_EPROTO,
				"msgpack: %zu trailing bytes after the batch",
				len - off);
	}
	return KVI_OK;
}

/* ---- arenas ---------------------------------------------------------- */

static void
kvi_reserve(void **arr, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap) {
		return;
	}
	size_t n = *cap ? *cap : 64;
	while (n < need) {
		n *= 2;
	}
	*arr = kvi_reallocarray(*arr, n, elem);
	*cap = n;
}

/* ---- pass 2: object tree -> batch ------------------------------------ */

typedef struct kvi_ctx {
	kvi_decoder *dec;
	uint32_t idx; /* event index, for messages */
	kvi_event *ev;
	bool seen[KVI_FIELD_COUNT];
} kvi_ctx;

static bool
kvi_str_eq(const msgpack_object *o, const char *s)
{
	size_t n = strlen(s);
	return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n &&
	       memcmp(o->via.str.ptr, s, n) == 0;
}

static kvi_err
kvi_type_error(kvi_ctx *c, kvi_field f, const char *want,
	       const msgpack_object *o)
{
	return kvi_fail(c->dec, KVI_EPROTO,
			"events[%u].%s: expected %s, got %s", c->idx,
			kvi_field_names[f], want, kvi_mp_type_name(o));
}

/* kvi_hash_value normalises a wire hash to u64; returns false when o is not
 * a hash. */
static bool
kvi_hash_value(const msgpack_object *o, uint64_t *out)
{
	switch (o->type) {
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		*out = o->via.u64;
		return true;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		*out = (uint64_t)o->via.i64;
		return true;
	case MSGPACK_OBJECT_BIN:
		if (o->via.bin.size < KVI_BIN_HASH_MIN ||
		    o->via.bin.size > KVI_BIN_HASH_MAX) {
			return false;
		}
		*out = kvi_hash_from_bytes((const uint8_t *)o->via.bin.ptr,
					   o->via.bin.size);
		return true;
	default:
		return false;
	}
}

static kvi_err
kvi_set_hashes(kvi_ctx *c, const msgpack_object *o)
{
	kvi_decoder *dec = c->dec;
	if (o->type != MSGPACK_OBJECT_ARRAY) {
		return kvi_type_error(c, F_BLOCK_HASHES, "array", o);
	}
	uint32_t n = o->via.array.size;
	kvi_reserve((void **)&dec->hashes, &dec->hashes_cap,
		    dec->hashes_len + n, sizeof(uint64_t));
	dec->spans[c->idx].hash_off = dec->hashes_len;
	for (uint32_t i = 0; i < n; i++) {
		const msgpack_object *h = &o->via.array.ptr[i];
		if (!kvi_hash_value(h, &dec->hashes[dec->hashes_len + i])) {
			return kvi_fail(dec, KVI_EPROTO,
					"events[%u].block_hashes[%u]: expected "
					"int or bin of %d..%d bytes, got %s",
					c->idx, i, KVI_BIN_HASH_MIN,
					KVI_BIN_HASH_MAX, kvi_mp_type_name(h));
		}
	}
	dec->hashes_len += n;
	c->ev->n_hashes = n;
	return KVI_OK;
}

static kvi_err
kvi_set_tokens(kvi_ctx *c, const msgpack_object *o)
{
	kvi_decoder *dec = c->dec;
	if (o->type != MSGPACK_OBJECT_ARRAY) {
		return kvi_type_error(c, F_TOKEN_IDS, "array", o);
	}
	uint32_t n = o->via.array.size;
	kvi_reserve((void **)&dec->tokens, &dec->tokens_cap,
		    dec->tokens_len + n, sizeof(uint32_t));
	dec->spans[c->idx].token_off = dec->tokens_len;
	uint32_t *out = dec->tokens + dec->tokens_len;
	for (uint32_t i = 0; i < n; i++) {
		const msgpack_object *t = &o->via.array.ptr[i];
		if (t->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
		    t->via.u64 <= UINT32_MAX) {
			out[i] = (uint32_t)t->via.u64;
			continue;
		}
		char num[32];
		if (t->type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
		    t->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
			return kvi_fail(dec, KVI_ERANGE,
					"events[%u].token_ids[%u]: %s is not a "
					"u32",
					c->idx, i,
					kvi_int_text(t, num, sizeof(num)));
		}
		return kvi_fail(
		    dec, KVI_EPROTO,
		    "events[%u].token_ids[%u]: expected int, got %s", c->idx, i,
		    kvi_mp_type_name(t));
	}
	dec->tokens_len += n;
	c->ev->n_tokens = n;
	return KVI_OK;
}

static kvi_err
kvi_set_str(kvi_ctx *c, kvi_field f, const msgpack_object *o, kvi_str *out)
{
	if (o->type == MSGPACK_OBJECT_NIL) {
		*out = (kvi_str){0};
		return KVI_OK;
	}
	if (o->type != MSGPACK_OBJECT_STR) {
		return kvi_type_error(c, f, "str or nil", o);
	}
	out->ptr = o->via.str.ptr;
	out->len = o->via.str.size;
	return KVI_OK;
}

/* kvi_check_int accepts nil or an int; *present says which. */
static kvi_err
kvi_check_int(kvi_ctx *c, kvi_field f, const msgpack_object *o, bool *present)
{
	*present = false;
	if (o->type == MSGPACK_OBJECT_NIL) {
		return KVI_OK;
	}
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER &&
	    o->type != MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		return kvi_type_error(c, f, "int or nil", o);
	}
	*present = true;
	return KVI_OK;
}

static kvi_err
kvi_set_block_size(kvi_ctx *c, const msgpack_object *o)
{
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER &&
	    o->type != MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		return kvi_type_error(c, F_BLOCK_SIZE, "int", o);
	}
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER || o->via.u64 == 0 ||
	    o->via.u64 > UINT32_MAX) {
		char num[32];
		return kvi_fail(
		    c->dec, KVI_ERANGE,
		    "events[%u].block_size: %s is not a positive u32", c->idx,
		    kvi_int_text(o, num, sizeof(num)));
	}
	c->ev->block_size = (uint32_t)o->via.u64;
	return KVI_OK;
}

static kvi_err
kvi_set_field(kvi_ctx *c, kvi_field f, const msgpack_object *o)
{
	kvi_event *ev = c->ev;
	bool present;
	kvi_err rv;
	c->seen[f] = true;
	switch (f) {
	case F_BLOCK_HASHES:
		return kvi_set_hashes(c, o);
	case F_PARENT:
		if (o->type == MSGPACK_OBJECT_NIL) {
			ev->has_parent = false;
			return KVI_OK;
		}
		if (!kvi_hash_value(o, &ev->parent)) {
			return kvi_type_error(c, f, "int, bin or nil", o);
		}
		ev->has_parent = true;
		return KVI_OK;
	case F_TOKEN_IDS:
		return kvi_set_tokens(c, o);
	case F_BLOCK_SIZE:
		return kvi_set_block_size(c, o);
	case F_LORA_ID:
	case F_SPEC_WINDOW:
		return kvi_check_int(c, f, o, &present);
	case F_GROUP_IDX:
		if ((rv = kvi_check_int(c, f, o, &present)) != KVI_OK) {
			return rv;
		}
		ev->has_group_idx = present;
		ev->group_idx = present ? o->via.i64 : 0;
		return KVI_OK;
	case F_MEDIUM:
		if ((rv = kvi_set_str(c, f, o, &ev->medium)) != KVI_OK) {
			return rv;
		}
		ev->tier = kvi_tier_from_medium(ev->medium.ptr, ev->medium.len);
		return KVI_OK;
	case F_LORA_NAME:
		return kvi_set_str(c, f, o, &ev->lora_name);
	case F_CACHE_SALT:
		return kvi_set_str(c, f, o, &ev->cache_salt);
	case F_SPEC_KIND: {
		kvi_str ignored;
		return kvi_set_str(c, f, o, &ignored);
	}
	case F_LOCALITY:
		if ((rv = kvi_set_str(c, f, o, &ev->locality)) != KVI_OK) {
			return rv;
		}
		ev->remote = ev->locality.len == 6 &&
			     strncasecmp(ev->locality.ptr, "REMOTE", 6) == 0;
		return KVI_OK;
	case F_EXTRA_KEYS:
		if (o->type != MSGPACK_OBJECT_NIL &&
		    o->type != MSGPACK_OBJECT_ARRAY) {
			return kvi_type_error(c, f, "array or nil", o);
		}
		return KVI_OK;
	case F_NONE:
		break;
	}
	return KVI_OK;
}

static kvi_field
kvi_field_by_key(const msgpack_object *key)
{
	if (key->type != MSGPACK_OBJECT_STR) {
		return F_NONE;
	}
	for (size_t f = 1; f < KVI_FIELD_COUNT; f++) {
		if (kvi_str_eq(key, kvi_field_names[f])) {
			return (kvi_field)f;
		}
	}
	return F_NONE;
}

static kvi_err
kvi_event_type_of(kvi_ctx *c, const msgpack_object *tag)
{
	if (tag->type != MSGPACK_OBJECT_STR) {
		return kvi_fail(c->dec, KVI_EPROTO,
				"events[%u].type: expected str, got %s", c->idx,
				kvi_mp_type_name(tag));
	}
	if (kvi_str_eq(tag, "BlockStored")) {
		c->ev->type = KVI_EVENT_STORED;
	} else if (kvi_str_eq(tag, "BlockRemoved")) {
		c->ev->type = KVI_EVENT_REMOVED;
	} else if (kvi_str_eq(tag, "AllBlocksCleared")) {
		c->ev->type = KVI_EVENT_CLEARED;
	} else {
		return kvi_fail(
		    c->dec, KVI_EPROTO,
		    "events[%u]: unknown event type \"%.*s\"", c->idx,
		    (int)(tag->via.str.size > 40 ? 40 : tag->via.str.size),
		    tag->via.str.ptr);
	}
	return KVI_OK;
}

/* A field a legacy array may not lack and a map may not omit. */
static kvi_err
kvi_check_required(kvi_ctx *c)
{
	static const kvi_field stored[] = {F_BLOCK_HASHES, F_TOKEN_IDS,
					   F_BLOCK_SIZE};
	const kvi_field *req = stored;
	size_t n = 0;
	if (c->ev->type == KVI_EVENT_STORED) {
		n = KVI_NELEM(stored);
	} else if (c->ev->type == KVI_EVENT_REMOVED) {
		n = 1; /* block_hashes */
	}
	for (size_t i = 0; i < n; i++) {
		if (!c->seen[req[i]]) {
			return kvi_fail(c->dec, KVI_EPROTO,
					"events[%u]: missing %s", c->idx,
					kvi_field_names[req[i]]);
		}
	}
	return KVI_OK;
}

static kvi_err
kvi_decode_legacy(kvi_ctx *c, const msgpack_object_array *a)
{
	kvi_err rv = kvi_event_type_of(c, &a->ptr[0]);
	if (rv != KVI_OK) {
		return rv;
	}
	const kvi_field *order = NULL;
	size_t known = 0, min = 0;
	if (c->ev->type == KVI_EVENT_STORED) {
		order = kvi_stored_legacy;
		known = KVI_NELEM(kvi_stored_legacy);
		min = KVI_STORED_MIN_FIELDS;
	} else if (c->ev->type == KVI_EVENT_REMOVED) {
		order = kvi_removed_legacy;
		known = KVI_NELEM(kvi_removed_legacy);
		min = KVI_REMOVED_MIN_FIELDS;
	}
	size_t fields = a->size - 1;
	if (fields < min) {
		return kvi_fail(c->dec, KVI_EPROTO,
				"events[%u]: %.*s has %zu fields, expected at "
				"least %zu",
				c->idx, (int)a->ptr[0].via.str.size,
				a->ptr[0].via.str.ptr, fields, min);
	}
	for (size_t i = 0; i < fields && i < known; i++) {
		if ((rv = kvi_set_field(c, order[i], &a->ptr[i + 1])) !=
		    KVI_OK) {
			return rv;
		}
	}
	return KVI_OK;
}

static kvi_err
kvi_decode_map(kvi_ctx *c, const msgpack_object_map *m)
{
	const msgpack_object *tag = NULL;
	for (uint32_t i = 0; i < m->size; i++) {
		if (kvi_str_eq(&m->ptr[i].key, "type")) {
			tag = &m->ptr[i].val;
			break;
		}
	}
	if (tag == NULL) {
		return kvi_fail(c->dec, KVI_EPROTO, "events[%u]: missing type",
				c->idx);
	}
	kvi_err rv = kvi_event_type_of(c, tag);
	if (rv != KVI_OK) {
		return rv;
	}
	for (uint32_t i = 0; i < m->size; i++) {
		kvi_field f = kvi_field_by_key(&m->ptr[i].key);
		if (f == F_NONE) {
			continue; /* "type", or a key of a later version */
		}
		if ((rv = kvi_set_field(c, f, &m->ptr[i].val)) != KVI_OK) {
			return rv;
		}
	}
	return KVI_OK;
}

static kvi_err
kvi_decode_event(kvi_decoder *dec, uint32_t idx, const msgpack_object *o)
{
	kvi_ctx c = {.dec = dec, .idx = idx, .ev = &dec->events[idx]};
	memset(c.ev, 0, sizeof(*c.ev));
	dec->spans[idx] = (kvi_event_span){0};
	c.ev->tier = KVI_TIER_GPU;
	kvi_err rv;
	if (o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size > 0) {
		rv = kvi_decode_legacy(&c, &o->via.array);
	} else if (o->type == MSGPACK_OBJECT_MAP) {
		rv = kvi_decode_map(&c, &o->via.map);
	} else {
		return kvi_fail(
		    dec, KVI_EPROTO,
		    "events[%u]: expected a tagged array or map, got "
		    "%s",
		    idx,
		    o->type == MSGPACK_OBJECT_ARRAY ? "an empty array"
						    : kvi_mp_type_name(o));
	}
	if (rv != KVI_OK) {
		return rv;
	}
	return kvi_check_required(&c);
}

static kvi_err
kvi_decode_ts(kvi_decoder *dec, const msgpack_object *o, double *ts)
{
	switch (o->type) {
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		*ts = o->via.f64;
		return KVI_OK;
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		*ts = (double)o->via.u64;
		return KVI_OK;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		*ts = (double)o->via.i64;
		return KVI_OK;
	default:
		return kvi_fail(dec, KVI_EPROTO, "ts: expected float, got %s",
				kvi_mp_type_name(o));
	}
}

static kvi_err
kvi_decode_rank(kvi_decoder *dec, const msgpack_object *o, kvi_batch *b)
{
	char num[32];
	b->has_dp_rank = false;
	switch (o->type) {
	case MSGPACK_OBJECT_NIL:
		return KVI_OK;
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		if (o->via.u64 <= UINT16_MAX) {
			b->has_dp_rank = true;
			b->dp_rank = (uint16_t)o->via.u64;
			return KVI_OK;
		}
		/* fall through */
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		return kvi_fail(dec, KVI_ERANGE,
				"data_parallel_rank %s does not fit in u16",
				kvi_int_text(o, num, sizeof(num)));
	default:
		return kvi_fail(
		    dec, KVI_EPROTO,
		    "data_parallel_rank: expected int or nil, got %s",
		    kvi_mp_type_name(o));
	}
}

static kvi_err
kvi_decode_events(kvi_decoder *dec, const msgpack_object *o, kvi_batch *b)
{
	if (o->type != MSGPACK_OBJECT_ARRAY) {
		return kvi_fail(dec, KVI_EPROTO,
				"events: expected array, got %s",
				kvi_mp_type_name(o));
	}
	uint32_t n = o->via.array.size;
	if (n > dec->events_cap) {
		dec->events =
		    kvi_reallocarray(dec->events, n, sizeof(kvi_event));
		dec->spans =
		    kvi_reallocarray(dec->spans, n, sizeof(kvi_event_span));
		dec->events_cap = n;
	}
	for (uint32_t i = 0; i < n; i++) {
		kvi_err rv = kvi_decode_event(dec, i, &o->via.array.ptr[i]);
		if (rv != KVI_OK) {
			return rv;
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		kvi_event *ev = &dec->events[i];
		ev->hashes =
		    ev->n_hashes ? dec->hashes + dec->spans[i].hash_off : NULL;
		ev->tokens =
		    ev->n_tokens ? dec->tokens + dec->spans[i].token_off : NULL;
	}
	b->n_events = n;
	b->events = dec->events;
	return KVI_OK;
}

static kvi_err
kvi_decode_batch(kvi_decoder *dec, const msgpack_object *o, kvi_batch *b)
{
	const msgpack_object *ts = NULL, *events = NULL, *rank = NULL;
	if (o->type == MSGPACK_OBJECT_ARRAY) {
		if (o->via.array.size < 2) {
			return kvi_fail(dec, KVI_EPROTO,
					"batch: array of %u elements, expected "
					"[ts, events, data_parallel_rank?]",
					o->via.array.size);
		}
		ts = &o->via.array.ptr[0];
		events = &o->via.array.ptr[1];
		rank = o->via.array.size > 2 ? &o->via.array.ptr[2] : NULL;
	} else if (o->type == MSGPACK_OBJECT_MAP) {
		for (uint32_t i = 0; i < o->via.map.size; i++) {
			const msgpack_object_kv *kv = &o->via.map.ptr[i];
			if (kvi_str_eq(&kv->key, "ts")) {
				ts = &kv->val;
			} else if (kvi_str_eq(&kv->key, "events")) {
				events = &kv->val;
			} else if (kvi_str_eq(&kv->key, "data_parallel_rank")) {
				rank = &kv->val;
			}
		}
		if (ts == NULL || events == NULL) {
			return kvi_fail(dec, KVI_EPROTO, "batch: missing %s",
					ts == NULL ? "ts" : "events");
		}
	} else {
		return kvi_fail(dec, KVI_EPROTO,
				"batch: expected array or map, got %s",
				kvi_mp_type_name(o));
	}
	kvi_err rv = kvi_decode_ts(dec, ts, &b->ts);
	if (rv == KVI_OK && rank != NULL) {
		rv = kvi_decode_rank(dec, rank, b);
	}
	if (rv == KVI_OK) {
		rv = kvi_decode_events(dec, events, b);
	}
	return rv;
}

/* ---- public ---------------------------------------------------------- */

kvi_decoder *
kvi_decoder_alloc(void)
{
	kvi_decoder *dec = kvi_calloc(1, sizeof(*dec));
	if (!msgpack_zone_init(&dec->zone, MSGPACK_ZONE_CHUNK_SIZE)) {
		kvi_oom(MSGPACK_ZONE_CHUNK_SIZE);
	}
	return dec;
}

void
kvi_decoder_free(kvi_decoder *dec)
{
	if (dec == NULL) {
		return;
	}
	msgpack_zone_destroy(&dec->zone);
	kvi_free(dec->events);
	kvi_free(dec->spans);
	kvi_free(dec->hashes);
	kvi_free(dec->tokens);
	kvi_free(dec);
}

kvi_err
kvi_decoder_decode(kvi_decoder *dec, const void *buf, size_t len,
		   kvi_batch *batch)
{
	dec->err[0] = '\0';
	dec->hashes_len = 0;
	dec->tokens_len = 0;
	msgpack_zone_clear(&dec->zone);
	kvi_err rv = kvi_mp_check(dec, buf, len);
	if (rv != KVI_OK) {
		return rv;
	}
	msgpack_object root;
	size_t off = 0;
	msgpack_unpack_return ur =
	    msgpack_unpack(buf, len, &off, &dec->zone, &root);
	if (ur == MSGPACK_UNPACK_NOMEM_ERROR) {
		kvi_oom(len);
	}
	if (ur != MSGPACK_UNPACK_SUCCESS) {
		return kvi_fail(dec, KVI_EPROTO, "msgpack: unpack failed (%d)",
				(int)ur);
	}
	kvi_batch b = {0};
	rv = kvi_decode_batch(dec, &root, &b);
	if (rv == KVI_OK) {
		*batch = b;
	}
	return rv;
}

const char *
kvi_decoder_error(const kvi_decoder *dec)
{
	return dec->err;
}

kvi_tier
kvi_tier_from_medium(const char *medium, size_t len)
{
	static const char *const gpu[] = {"GPU", "DEVICE"};
	static const char *const cpu[] = {"CPU", "CPU_PINNED", "CPU_TIER1"};
	if (medium == NULL) {
		return KVI_TIER_GPU;
	}
	for (size_t i = 0; i < KVI_NELEM(gpu); i++) {
		if (strlen(gpu[i]) == len &&
		    strncasecmp(medium, gpu[i], len) == 0) {
			return KVI_TIER_GPU;
		}
	}
	for (size_t i = 0; i < KVI_NELEM(cpu); i++) {
		if (strlen(cpu[i]) == len &&
		    strncasecmp(medium, cpu[i], len) == 0) {
			return KVI_TIER_CPU;
		}
	}
	return KVI_TIER_DISK;
}

const char *
kvi_tier_name(kvi_tier tier)
{
	switch (tier) {
	case KVI_TIER_GPU:
		return "gpu";
	case KVI_TIER_CPU:
		return "cpu";
	default:
		return "disk";
	}
}

uint64_t
kvi_hash_from_bytes(const uint8_t *p, size_t len)
{
	return kvi_be(p + len - 8, 8);
}
