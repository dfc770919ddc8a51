/*
 * wire.c - the event batch decoder.
 *
 * Decoding is two passes over the payload. mp_check() walks the raw msgpack
 * once, checking that every length fits in the bytes that remain and that
 * nesting stays shallow: msgpack-c sizes each container's storage from its
 * declared count before reading its elements, so an unchecked 6-byte payload
 * could ask it for gigabytes. Once the bytes are known to be well formed,
 * msgpack-c builds the object tree in a zone the decoder reuses, and the walk
 * below maps it onto kvi_batch, checking every field's type; each event's
 * fields are walked in wire_event.c.
 */
#include "wire.h"

#include <inttypes.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "wire_int.h"

#define KVI_MP_MAX_DEPTH 24

/* ---- errors ---------------------------------------------------------- */

kvi_err
kvi_fail(kvi_decoder *dec, kvi_err rv, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(dec->err, sizeof(dec->err), fmt, ap);
	va_end(ap);
	return rv;
}

const char *
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
const char *
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

/* kvi_mp_skip steps *off over the one object that starts there, checking
 * that every length fits in the bytes that remain and that nesting stays
 * within KVI_MP_MAX_DEPTH. Returns KVI_EPROTO, with err saying where, for
 * bytes that are not such an object. */
static kvi_err
kvi_mp_skip(const uint8_t *p, size_t len, size_t *pos, char *err, size_t errlen)
{
	uint64_t left[KVI_MP_MAX_DEPTH + 1];
	int depth = 0;
	size_t off = *pos;
	left[0] = 1;
	for (;;) {
		while (left[depth] == 0) {
			if (depth == 0) {
				*pos = off;
				return KVI_OK;
			}
			depth--;
		}
		/* Runs of ints - token ids, hashes - are most of a batch:
		 * step over them without the general case. */
		while (left[depth] > 0 && off < len) {
			uint8_t b = p[off];
			size_t n;
			if (b <= 0x7f || b >= 0xe0) {
				n = 1;
			} else if (b >= 0xcc && b <= 0xd3) {
				n = 1 + ((size_t)1 << ((b - 0xcc) & 3));
			} else {
				break;
			}
			if (n > len - off) {
				return kvi_errf(
				    err, errlen, KVI_EPROTO,
				    "msgpack: truncated at byte %zu", len);
			}
			off += n;
			left[depth]--;
		}
		if (left[depth] == 0) {
			continue;
		}
		left[depth]--;
		if (off >= len) {
			return kvi_errf(err, errlen, KVI_EPROTO,
					"msgpack: truncated at byte %zu", off);
		}
		size_t at = off;
		uint64_t items;
		kvi_mp_shape sh = kvi_mp_head(p[off++], &items);
		if (!sh.valid) {
			return kvi_errf(
			    err, errlen, KVI_EPROTO,
			    "msgpack: invalid byte 0x%02x at byte %zu", p[at],
			    at);
		}
		if (sh.lenbytes > len - off) {
			return kvi_errf(err, errlen, KVI_EPROTO,
					"msgpack: truncated at byte %zu", len);
		}
		uint64_t n = kvi_be(p + off, sh.lenbytes);
		off += sh.lenbytes;
		bool container = sh.per_len != 0;
		if (!container) {
			/* str, bin and ext carry n data bytes */
			uint64_t skip = sh.fixed + n;
			if (skip > len - off) {
				return kvi_errf(err, errlen, KVI_EPROTO,
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
			return kvi_errf(
			    err, errlen, KVI_EPROTO,
			    "msgpack: container at byte %zu declares "
			    "%" PRIu64 " elements, %zu bytes remain",
			    at, items, len - off);
		}
		if (items == 0) {
			continue;
		}
		if (depth == KVI_MP_MAX_DEPTH) {
			return kvi_errf(
			    err, errlen, KVI_EPROTO,
			    "msgpack: nested deeper than %d at byte "
			    "%zu",
			    KVI_MP_MAX_DEPTH, at);
		}
		left[++depth] = items;
	}
}

static kvi_err
kvi_mp_check(kvi_decoder *dec, const uint8_t *p, size_t len)
{
	size_t off = 0;
	kvi_err rv = kvi_mp_skip(p, len, &off, dec->err, sizeof(dec->err));
	if (rv != KVI_OK) {
		return rv;
	}
	if (off != len) {
		return kvi_fail(dec, KVI_EPROTO,
				"msgpack: %zu trailing bytes after the batch",
				len - off);
	}
	return KVI_OK;
}

/* ---- the rank alone -------------------------------------------------- */

/* kvi_mp_container reads the header of an array (per_len 1) or map (2) at
 * *off: its element count, or pair count for a map. */
static bool
kvi_mp_container(const uint8_t *p, size_t len, size_t *off, unsigned per_len,
		 uint64_t *n)
{
	if (*off >= len) {
		return false;
	}
	uint64_t items;
	kvi_mp_shape sh = kvi_mp_head(p[*off], &items);
	if (!sh.valid || sh.per_len != per_len ||
	    (size_t)sh.lenbytes + 1 > len - *off) {
		return false;
	}
	*n = sh.lenbytes != 0 ? kvi_be(p + *off + 1, sh.lenbytes)
			      : items / per_len;
	*off += 1 + sh.lenbytes;
	return true;
}

/* kvi_mp_rank reads the rank object at off: nil (none), or an int that fits
 * in u16. */
static kvi_err
kvi_mp_rank(const uint8_t *p, size_t len, size_t off, bool *has, uint16_t *rank)
{
	if (off >= len) {
		return KVI_EPROTO;
	}
	uint8_t b = p[off];
	uint64_t v;
	if (b == 0xc0) {
		*has = false;
		return KVI_OK;
	}
	if (b <= 0x7f) {
		v = b;
	} else if (b >= 0xcc && b <= 0xcf) {
		size_t n = (size_t)1 << (b - 0xcc);
		if (n > len - off - 1) {
			return KVI_EPROTO;
		}
		v = kvi_be(p + off + 1, n);
	} else if (b >= 0xe0 || (b >= 0xd0 && b <= 0xd3)) {
		return KVI_ERANGE; /* negative (or a signed form): never a rank
				    */
	} else {
		return KVI_EPROTO;
	}
	if (v > UINT16_MAX) {
		return KVI_ERANGE;
	}
	*has = true;
	*rank = (uint16_t)v;
	return KVI_OK;
}

/* kvi_mp_is_key says whether the str at *off is key, and steps over it. */
static bool
kvi_mp_is_key(const uint8_t *p, size_t len, size_t *off, const char *key,
	      bool *is)
{
	size_t at = *off;
	if (kvi_mp_skip(p, len, off, NULL, 0) != KVI_OK) {
		return false;
	}
	size_t klen = strlen(key), hdr = *off - at - klen;
	uint8_t b = p[at];
	*is =
	    *off - at > klen &&
	    ((b >= 0xa0 && b <= 0xbf && hdr == 1) || (b == 0xd9 && hdr == 2) ||
	     (b == 0xda && hdr == 3) || (b == 0xdb && hdr == 5)) &&
	    memcmp(p + at + hdr, key, klen) == 0;
	return true;
}

kvi_err
kvi_batch_rank(const void *buf, size_t len, bool *has, uint16_t *rank)
{
	const uint8_t *p = buf;
	size_t off = 0;
	uint64_t n;
	*has = false;
	if (kvi_mp_container(p, len, &off, 1, &n)) {
		/* [ts, events, data_parallel_rank?, ...] */
		if (n < 2) {
			return KVI_EPROTO;
		}
		if (n == 2) {
			return KVI_OK;
		}
		for (int i = 0; i < 2; i++) {
			if (kvi_mp_skip(p, len, &off, NULL, 0) != KVI_OK) {
				return KVI_EPROTO;
			}
		}
		return kvi_mp_rank(p, len, off, has, rank);
	}
	off = 0;
	if (!kvi_mp_container(p, len, &off, 2, &n)) {
		return KVI_EPROTO;
	}
	for (uint64_t i = 0; i < n; i++) {
		bool is;
		if (!kvi_mp_is_key(p, len, &off, "data_parallel_rank", &is)) {
			return KVI_EPROTO;
		}
		/* a key given twice counts the last time, as in a decode */
		kvi_err rv = is ? kvi_mp_rank(p, len, off, has, rank) : KVI_OK;
		if (rv != KVI_OK) {
			return rv;
		}
		if (kvi_mp_skip(p, len, &off, NULL, 0) != KVI_OK) {
			return KVI_EPROTO;
		}
	}
	return KVI_OK;
}

/* ---- pass 2: the batch around the events ---------------------------- */

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
	kvi_xbuf_fini(&dec->xbytes);
	kvi_free(dec->xoffs);
	kvi_free(dec);
}

kvi_err
kvi_decoder_decode(kvi_decoder *dec, const void *buf, size_t len,
		   kvi_batch *batch)
{
	dec->err[0] = '\0';
	dec->skip_err[0] = '\0';
	dec->skip_malformed = false;
	dec->hashes_len = 0;
	dec->tokens_len = 0;
	dec->xoffs_len = 0;
	kvi_xbuf_reset(&dec->xbytes);
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

const char *
kvi_decoder_skip_error(const kvi_decoder *dec)
{
	return dec->skip_err;
}

const char *
kvi_skip_name(kvi_skip skip)
{
	return skip == KVI_SKIP_UNKNOWN_TYPE ? "unknown_type" : "malformed";
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
