/*
 * wire_event.c - pass 2 of the event batch decoder (wire.h, wire.c) for the
 * events: each event, as a legacy tagged array or a tagged map, is mapped
 * onto a kvi_event, its hashes, token ids and extra bytes copied into the
 * decoder's arenas. An event that cannot be read is rolled back out of the
 * arenas and returned as skipped; the others decode on.
 */
#include "wire.h"

#include <msgpack.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "wire_int.h"

#define KVI_BIN_HASH_MIN 8
#define KVI_BIN_HASH_MAX 64

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
	F_METADATA,
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
    [F_METADATA] = "metadata",
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
	kvi_skip skip;               /* why, when decoding fails */
	const msgpack_object *xkeys; /* extra_keys, read once all else is */
	bool seen[KVI_FIELD_COUNT];
} kvi_ctx;

bool
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
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ||
	    o->via.u64 > UINT32_MAX) {
		char num[32];
		return kvi_fail(c->dec, KVI_ERANGE,
				"events[%u].block_size: %s is not a u32",
				c->idx, kvi_int_text(o, num, sizeof(num)));
	}
	c->ev->block_size = (uint32_t)o->via.u64;
	return KVI_OK;
}

/* kvi_set_metadata reads SGLang's BlockStored metadata map: cache_salt,
 * and keys of later versions, ignored. */
static kvi_err
kvi_set_metadata(kvi_ctx *c, const msgpack_object *o)
{
	const msgpack_object_map *m = &o->via.map;
	for (uint32_t i = 0; i < m->size; i++) {
		if (kvi_str_eq(&m->ptr[i].key, "cache_salt")) {
			kvi_err rv =
			    kvi_set_str(c, F_CACHE_SALT, &m->ptr[i].val,
					&c->ev->cache_salt);
			if (rv != KVI_OK) {
				return rv;
			}
		}
	}
	return KVI_OK;
}

static kvi_err kvi_set_field(kvi_ctx *c, kvi_field f, const msgpack_object *o);

static bool
kvi_is_str(const msgpack_object *o)
{
	return o->type == MSGPACK_OBJECT_STR;
}

/* kvi_block_keys appends block i's tuple t to the extra bytes (wire.h says
 * what each element becomes). */
static void
kvi_block_keys(kvi_ctx *c, uint32_t i, const msgpack_object_array *t)
{
	kvi_event *ev = c->ev;
	kvi_xbuf *x = &c->dec->xbytes;
	uint32_t k = 0;
	if (t->size > 0 && kvi_is_str(&t->ptr[0]) && ev->lora_name.len > 0 &&
	    t->ptr[0].via.str.size == ev->lora_name.len &&
	    memcmp(t->ptr[0].via.str.ptr, ev->lora_name.ptr,
		   ev->lora_name.len) == 0) {
		k = 1; /* the LoRA name: in the seed */
	}
	uint32_t last_str = UINT32_MAX;
	for (uint32_t j = k; j < t->size; j++) {
		if (kvi_is_str(&t->ptr[j])) {
			last_str = j;
		}
	}
	bool first = i == 0 && !ev->has_parent;
	for (; k < t->size; k++) {
		const msgpack_object *e = &t->ptr[k];
		if (kvi_is_str(e) && first && k == last_str) {
			if (ev->cache_salt.ptr == NULL) {
				ev->cache_salt =
				    (kvi_str){e->via.str.ptr, e->via.str.size};
			}
		} else if (kvi_is_str(e)) {
			kvi_xbuf_record(x, KVI_EXTRA_IDENT, e->via.str.ptr,
					e->via.str.size);
		} else if (e->type == MSGPACK_OBJECT_ARRAY &&
			   e->via.array.size == 2 &&
			   kvi_is_str(&e->via.array.ptr[0]) &&
			   (e->via.array.ptr[1].type ==
				MSGPACK_OBJECT_POSITIVE_INTEGER ||
			    e->via.array.ptr[1].type ==
				MSGPACK_OBJECT_NEGATIVE_INTEGER)) {
			const msgpack_object *id = &e->via.array.ptr[0];
			kvi_xbuf_mm(x, id->via.str.ptr, id->via.str.size,
				    e->via.array.ptr[1].via.i64);
		} else if (e->type == MSGPACK_OBJECT_BIN) {
			kvi_xbuf_record(x, KVI_EXTRA_EMBEDS, e->via.bin.ptr,
					e->via.bin.size);
		} else {
			/* A key of a later engine: the block cannot be
			 * matched by a query, and must not match another. */
			kvi_xbuf_record(x, KVI_EXTRA_UNKNOWN, NULL, 0);
			ev->unknown_keys = true;
		}
	}
}

/* kvi_set_extra turns a stored event's extra_keys into per-block extra
 * bytes; a tuple per block, each nil or an array. */
static kvi_err
kvi_set_extra(kvi_ctx *c)
{
	kvi_decoder *dec = c->dec;
	const msgpack_object_array *a = &c->xkeys->via.array;
	uint32_t n = c->ev->n_hashes;
	if (a->size != n) {
		return kvi_fail(dec, KVI_EPROTO,
				"events[%u].extra_keys: %u entries for %u "
				"blocks",
				c->idx, a->size, n);
	}
	size_t base = dec->xbytes.len;
	kvi_reserve((void **)&dec->xoffs, &dec->xoffs_cap,
		    dec->xoffs_len + n + 1, sizeof(uint32_t));
	uint32_t *off = dec->xoffs + dec->xoffs_len;
	for (uint32_t i = 0; i < n; i++) {
		const msgpack_object *t = &a->ptr[i];
		off[i] = (uint32_t)(dec->xbytes.len - base);
		if (t->type == MSGPACK_OBJECT_NIL) {
			continue;
		}
		if (t->type != MSGPACK_OBJECT_ARRAY) {
			return kvi_fail(dec, KVI_EPROTO,
					"events[%u].extra_keys[%u]: expected "
					"array or nil, got %s",
					c->idx, i, kvi_mp_type_name(t));
		}
		kvi_block_keys(c, i, &t->via.array);
	}
	off[n] = (uint32_t)(dec->xbytes.len - base);
	if (off[n] > 0) {
		dec->spans[c->idx].xoff_off = dec->xoffs_len;
		dec->spans[c->idx].xbyte_off = base;
		dec->xoffs_len += n + 1;
	}
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
		return kvi_check_int(c, f, o, &present);
	case F_SPEC_WINDOW:
		if ((rv = kvi_check_int(c, f, o, &present)) != KVI_OK) {
			return rv;
		}
		/* a window of no tokens, or of more than fit a u32, says
		 * nothing usable: taken as absent */
		ev->window =
		    present && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
			    o->via.u64 <= UINT32_MAX
			? (uint32_t)o->via.u64
			: 0;
		return KVI_OK;
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
		/* SGLang's positional form puts its metadata here */
		if (o->type == MSGPACK_OBJECT_MAP) {
			return kvi_set_metadata(c, o);
		}
		return kvi_set_str(c, f, o, &ev->lora_name);
	case F_METADATA:
		if (o->type == MSGPACK_OBJECT_NIL) {
			return KVI_OK;
		}
		if (o->type != MSGPACK_OBJECT_MAP) {
			return kvi_type_error(c, f, "map or nil", o);
		}
		return kvi_set_metadata(c, o);
	case F_CACHE_SALT:
		return kvi_set_str(c, f, o, &ev->cache_salt);
	case F_SPEC_KIND:
		return kvi_set_str(c, f, o, &ev->spec_kind);
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
		c->xkeys = o->type == MSGPACK_OBJECT_ARRAY ? o : NULL;
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
		c->skip = KVI_SKIP_UNKNOWN_TYPE;
		return kvi_fail(
		    c->dec, KVI_EPROTO,
		    "events[%u]: unknown event type \"%.*s\"", c->idx,
		    (int)(tag->via.str.size > 40 ? 40 : tag->via.str.size),
		    tag->via.str.ptr);
	}
	return KVI_OK;
}

/* kvi_event_finish checks what the fields say together - a field a legacy
 * array may not lack and a map may not omit, a block size for a store with
 * tokens - and reads the extra keys last (they need lora_name and the
 * parent). */
static kvi_err
kvi_event_finish(kvi_ctx *c)
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
	if (c->ev->type != KVI_EVENT_STORED) {
		return KVI_OK;
	}
	if (c->ev->n_tokens > 0 && c->ev->block_size == 0) {
		return kvi_fail(c->dec, KVI_ERANGE,
				"events[%u].block_size: 0 with %u token ids",
				c->idx, c->ev->n_tokens);
	}
	return c->xkeys != NULL ? kvi_set_extra(c) : KVI_OK;
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

/* kvi_skip_event turns a half-decoded event into a skipped one, keeping
 * the batch's first reason. */
static void
kvi_skip_event(kvi_decoder *dec, kvi_event *ev, kvi_skip why)
{
	*ev = (kvi_event){.type = KVI_EVENT_SKIPPED, .skip = why};
	bool malformed = why == KVI_SKIP_MALFORMED;
	if (dec->skip_err[0] == '\0' || (malformed && !dec->skip_malformed)) {
		memcpy(dec->skip_err, dec->err, sizeof(dec->skip_err));
		dec->skip_malformed = malformed;
	}
	dec->err[0] = '\0';
}

static kvi_err
kvi_decode_event(kvi_decoder *dec, uint32_t idx, const msgpack_object *o)
{
	kvi_ctx c = {.dec = dec,
		     .idx = idx,
		     .ev = &dec->events[idx],
		     .skip = KVI_SKIP_MALFORMED};
	memset(c.ev, 0, sizeof(*c.ev));
	dec->spans[idx] = (kvi_event_span){.xoff_off = SIZE_MAX};
	c.ev->tier = KVI_TIER_GPU;
	kvi_err rv;
	if (o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size > 0) {
		rv = kvi_decode_legacy(&c, &o->via.array);
	} else if (o->type == MSGPACK_OBJECT_MAP) {
		rv = kvi_decode_map(&c, &o->via.map);
	} else {
		rv = kvi_fail(dec, KVI_EPROTO,
			      "events[%u]: expected a tagged array or map, "
			      "got %s",
			      idx,
			      o->type == MSGPACK_OBJECT_ARRAY
				  ? "an empty array"
				  : kvi_mp_type_name(o));
	}
	if (rv == KVI_OK) {
		rv = kvi_event_finish(&c);
	}
	if (rv != KVI_OK) {
		kvi_skip_event(dec, c.ev, c.skip);
	}
	return rv;
}

kvi_err
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
	uint32_t skipped = 0;
	for (uint32_t i = 0; i < n; i++) {
		size_t hashes = dec->hashes_len, tokens = dec->tokens_len;
		size_t xoffs = dec->xoffs_len, xbytes = dec->xbytes.len;
		if (kvi_decode_event(dec, i, &o->via.array.ptr[i]) != KVI_OK) {
			dec->hashes_len = hashes;
			dec->tokens_len = tokens;
			dec->xoffs_len = xoffs;
			dec->xbytes.len = xbytes;
			skipped++;
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		kvi_event *ev = &dec->events[i];
		const kvi_event_span *sp = &dec->spans[i];
		ev->hashes = ev->n_hashes ? dec->hashes + sp->hash_off : NULL;
		ev->tokens = ev->n_tokens ? dec->tokens + sp->token_off : NULL;
		if (ev->type == KVI_EVENT_STORED && sp->xoff_off != SIZE_MAX) {
			ev->extra_off = dec->xoffs + sp->xoff_off;
			ev->extra = dec->xbytes.p + sp->xbyte_off;
		}
	}
	b->n_events = n;
	b->n_skipped = skipped;
	b->events = dec->events;
	return KVI_OK;
}

void
kvi_event_local_hashes_bs(const kvi_event *ev, uint32_t bs, size_t n,
			  uint64_t *out)
{
	uint64_t seed =
	    kvi_local_seed(ev->lora_name.ptr, ev->lora_name.len, NULL, 0);
	/* The salt is in the first block of a sequence; the chain carries
	 * it to the rest. */
	uint64_t first =
	    ev->has_parent
		? seed
		: kvi_local_seed(ev->lora_name.ptr, ev->lora_name.len,
				 ev->cache_salt.ptr, ev->cache_salt.len);
	bool extra =
	    ev->extra_off != NULL && bs == ev->block_size && n == ev->n_hashes;
	for (size_t i = 0; i < n; i++) {
		const uint32_t *tok = ev->tokens + i * bs;
		uint64_t sd = i == 0 ? first : seed;
		out[i] = !extra ? kvi_local_hash(tok, bs, sd)
				: kvi_local_hash_extra(
				      tok, bs, sd, ev->extra + ev->extra_off[i],
				      ev->extra_off[i + 1] - ev->extra_off[i]);
	}
}

void
kvi_event_local_hashes(const kvi_event *ev, uint64_t *out)
{
	kvi_event_local_hashes_bs(ev, ev->block_size, ev->n_hashes, out);
}
