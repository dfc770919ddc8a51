/*
 * recover_parse_schema.c - the schema layer of the `/kv_recover` stream
 * parser.
 *
 * The layer over the JSON lexer of json_lex.h. Every token the lexer
 * completes comes here (on_open, on_close, on_key,
 * on_scalar), and a stack of frames, one per open container, says what
 * the position calls for (a `want`: an event id, a hash list, anything). A
 * value is checked against its want and written into the output arrays at
 * once; the lexer keeps every key the schema knows and the Error message
 * whole (KVR_MESSAGE_MAX bytes) and hands over integers exact.
 *
 * Blocks and removed hashes go into two arrays, in event order; while
 * parsing an event only counts its own, since the arrays move as they grow,
 * and kvr_parser_finish() (recover_parse.c) points each event into them
 * once nothing moves.
 */
#include <inttypes.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "log.h"
#include "recover_parse_int.h"

const char *const kvr_key_names[] = {
#define KVR_KEY_NAME(k, name) name,
    KVR_KEYS(KVR_KEY_NAME)
#undef KVR_KEY_NAME
};

/* What a position in the document calls for. The first group are
 * containers (the node of a stack frame), the second scalars. */
enum {
	V_SKIP = 0, /* any value, checked as JSON and ignored */
	V_ROOT,
	V_BODY, /* the object of Events */
	V_DUMP, /* the object of TreeDump */
	V_TOO_NEW,
	V_INVALID_RANGE,
	V_EVENT_LIST,
	V_ROUTER_EVENT,
	V_EVENT,
	V_DATA, /* an object, or the string "cleared" */
	V_STORED,
	V_REMOVED,
	V_BLOCK_LIST,
	V_BLOCK,
	V_HASH_LIST,
	V_MESSAGE,
	V_U64,
	V_ID_OR_NULL, /* u64, or null: an engine that has published nothing */
	V_HASH,       /* u64, or a negative i64 taken as two's complement */
	V_PARENT,
	V_DP_RANK,
	V_TIER,
	V_WORKER_ID,
	V_CLEARED, /* null, or an object that is ignored */
	V_COUNT
};

typedef struct kvr_field {
	uint8_t key;
	uint8_t want;
	uint8_t variant; /* a kind, or an event's type: what the key sets */
} kvr_field;

/* How a container or scalar of the schema looks. */
typedef struct kvr_shape {
	const kvr_field *fields; /* objects: the keys known in it */
	uint8_t n_fields;
	uint8_t container; /* 0 scalar, 1 object, 2 array, 3 either */
	uint8_t elem;      /* arrays: the want of each element */
	uint32_t required; /* objects: bit set of keys that must be present */
	const char *what;  /* for "expected ..." messages */
} kvr_shape;

#define KB(k)        (UINT32_C(1) << (k))
#define KVR_NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define K_COUNT      KVR_NELEM(kvr_key_names)

_Static_assert(K_COUNT <= 32, "a frame's seen keys are a u32 bit set");

static const kvr_field kvr_root_fields[] = {
    {K_KIND_EVENTS, V_BODY, KVR_KIND_EVENTS},
    {K_KIND_TREE_DUMP, V_DUMP, KVR_KIND_TREE_DUMP},
    {K_KIND_TOO_NEW, V_TOO_NEW, KVR_KIND_TOO_NEW},
    {K_KIND_INVALID_RANGE, V_INVALID_RANGE, KVR_KIND_INVALID_RANGE},
    {K_KIND_ERROR, V_MESSAGE, KVR_KIND_ERROR},
};
static const kvr_field kvr_body_fields[] = {
    {K_EVENTS, V_EVENT_LIST},
    {K_LAST_EVENT_ID, V_U64},
};
static const kvr_field kvr_dump_fields[] = {
    {K_EVENTS, V_EVENT_LIST},
    {K_LAST_EVENT_ID, V_ID_OR_NULL},
};
static const kvr_field kvr_too_new_fields[] = {
    {K_REQUESTED_START, V_U64},
    {K_REQUESTED_END, V_U64},
    {K_NEWEST_AVAILABLE, V_ID_OR_NULL},
};
static const kvr_field kvr_invalid_range_fields[] = {
    {K_START_ID, V_U64},
    {K_END_ID, V_U64},
};
static const kvr_field kvr_router_event_fields[] = {
    {K_WORKER_ID, V_WORKER_ID},
    {K_STORAGE_TIER, V_TIER},
    {K_EVENT, V_EVENT},
};
static const kvr_field kvr_event_fields[] = {
    {K_EVENT_ID, V_U64},
    {K_DP_RANK, V_DP_RANK},
    {K_DATA, V_DATA},
};
static const kvr_field kvr_data_fields[] = {
    {K_STORED, V_STORED, KVI_EVENT_STORED},
    {K_REMOVED, V_REMOVED, KVI_EVENT_REMOVED},
    {K_CLEARED, V_CLEARED, KVI_EVENT_CLEARED},
};
static const kvr_field kvr_stored_fields[] = {
    {K_PARENT_HASH, V_PARENT},
    {K_BLOCKS, V_BLOCK_LIST},
};
static const kvr_field kvr_block_fields[] = {
    {K_BLOCK_HASH, V_HASH},
    {K_TOKENS_HASH, V_HASH},
};
static const kvr_field kvr_removed_fields[] = {
    {K_BLOCK_HASHES, V_HASH_LIST},
};

#define KVR_OBJ(f, req, what)                                                  \
	{                                                                      \
		f, KVR_NELEM(f), 1, V_SKIP, req, what                          \
	}
#define KVR_ARR(elem)                                                          \
	{                                                                      \
		NULL, 0, 2, elem, 0, "an array"                                \
	}
#define KVR_SCALAR(what)                                                       \
	{                                                                      \
		NULL, 0, 0, V_SKIP, 0, what                                    \
	}

static const kvr_shape kvr_shapes[V_COUNT] = {
    [V_SKIP] = {NULL, 0, 3, V_SKIP, 0, "any value"},
    [V_ROOT] = KVR_OBJ(kvr_root_fields, 0, "an object"),
    [V_BODY] = KVR_OBJ(kvr_body_fields, KB(K_EVENTS) | KB(K_LAST_EVENT_ID),
		       "an object"),
    [V_DUMP] = KVR_OBJ(kvr_dump_fields, KB(K_EVENTS) | KB(K_LAST_EVENT_ID),
		       "an object"),
    [V_TOO_NEW] = KVR_OBJ(kvr_too_new_fields,
			  KB(K_REQUESTED_START) | KB(K_REQUESTED_END) |
			      KB(K_NEWEST_AVAILABLE),
			  "an object"),
    [V_INVALID_RANGE] = KVR_OBJ(kvr_invalid_range_fields,
				KB(K_START_ID) | KB(K_END_ID), "an object"),
    [V_EVENT_LIST] = KVR_ARR(V_ROUTER_EVENT),
    [V_ROUTER_EVENT] =
	KVR_OBJ(kvr_router_event_fields, KB(K_EVENT), "an object"),
    [V_EVENT] =
	KVR_OBJ(kvr_event_fields, KB(K_EVENT_ID) | KB(K_DATA), "an object"),
    [V_DATA] = KVR_OBJ(kvr_data_fields, 0, "\"cleared\" or an object"),
    [V_STORED] = KVR_OBJ(kvr_stored_fields, KB(K_BLOCKS), "an object"),
    [V_REMOVED] = KVR_OBJ(kvr_removed_fields, KB(K_BLOCK_HASHES), "an object"),
    [V_BLOCK_LIST] = KVR_ARR(V_BLOCK),
    [V_BLOCK] = KVR_OBJ(kvr_block_fields, KB(K_BLOCK_HASH) | KB(K_TOKENS_HASH),
			"an object"),
    [V_HASH_LIST] = KVR_ARR(V_HASH),
    [V_MESSAGE] = KVR_SCALAR("a string"),
    [V_U64] = KVR_SCALAR("an unsigned integer"),
    [V_ID_OR_NULL] = KVR_SCALAR("an unsigned integer or null"),
    [V_HASH] = KVR_SCALAR("an integer"),
    [V_PARENT] = KVR_SCALAR("an integer or null"),
    [V_DP_RANK] = KVR_SCALAR("an integer or null"),
    [V_TIER] = KVR_SCALAR("a string or null"),
    [V_WORKER_ID] = KVR_SCALAR("an integer"),
    [V_CLEARED] = KVR_SCALAR("null or an object"),
};

/* ---- errors ---------------------------------------------------------- */

/* str_quoted returns the string token, quoted for a message. */
static const char *
str_quoted(const kvr_parser *p, char *buf, size_t size)
{
	return kvi_log_quote(buf, size, p->lex.str);
}

static void
fail_type(kvr_parser *p, uint8_t want, const char *got)
{
	kvr_fail(p, "expected %s, got %s", kvr_shapes[want].what, got);
}

/* ---- output arrays --------------------------------------------------- */

static void *
grow(void *arr, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap) {
		return arr;
	}
	size_t n = *cap ? *cap * 2 : 64;
	while (n < need) {
		n *= 2;
	}
	arr = kvi_reallocarray(arr, n, elem);
	*cap = n;
	return arr;
}

static kvr_event *
cur_event(kvr_parser *p)
{
	return &p->events[p->events_len - 1];
}

static void
event_begin(kvr_parser *p)
{
	p->events = grow(p->events, &p->events_cap, p->events_len + 1,
			 sizeof(*p->events));
	kvr_event *ev = &p->events[p->events_len++];
	memset(ev, 0, sizeof(*ev));
	ev->tier = KVI_TIER_GPU;
	p->ev_blocks_off = p->blocks_len;
	p->ev_hashes_off = p->hashes_len;
}

static void
event_end(kvr_parser *p)
{
	kvr_event *ev = cur_event(p);
	/* The element cap keeps both counts far below 2^32. */
	ev->n_blocks = (uint32_t)(p->blocks_len - p->ev_blocks_off);
	ev->n_hashes = (uint32_t)(p->hashes_len - p->ev_hashes_off);
}

static void
hash_add(kvr_parser *p, uint64_t h)
{
	p->hashes = grow(p->hashes, &p->hashes_cap, p->hashes_len + 1,
			 sizeof(*p->hashes));
	p->hashes[p->hashes_len++] = h;
}

static void
block_begin(kvr_parser *p)
{
	p->blocks = grow(p->blocks, &p->blocks_cap, p->blocks_len + 1,
			 sizeof(*p->blocks));
	p->blocks[p->blocks_len++] = (kvr_block){0, 0};
}

/* ---- values ---------------------------------------------------------- */

/* tier_from_name maps a storage_tier (case-insensitive); see the
 * header for the table. */
static kvi_tier
tier_from_name(const char *s, size_t len)
{
	static const char *const gpu[] = {"device", "gpu"};
	static const char *const cpu[] = {
	    "host",       "hostpinned", "host_pinned", "cpu",
	    "cpu_pinned", "cpupinned",  "cpu_tier1"};
	for (size_t i = 0; i < KVR_NELEM(gpu); i++) {
		if (strlen(gpu[i]) == len && strncasecmp(s, gpu[i], len) == 0) {
			return KVI_TIER_GPU;
		}
	}
	for (size_t i = 0; i < KVR_NELEM(cpu); i++) {
		if (strlen(cpu[i]) == len && strncasecmp(s, cpu[i], len) == 0) {
			return KVI_TIER_CPU;
		}
	}
	return KVI_TIER_DISK;
}

/* tok_int checks that the token is an integer that fits want - a u64,
 * or for a hash also -2^63..-1, taken as its two's complement - and returns
 * it in *out; on failure it records why. */
static bool
tok_int(kvr_parser *p, uint8_t want, kvj_token tok, uint64_t *out)
{
	const kvj_lexer *lx = &p->lex;
	bool hash = want == V_HASH || want == V_PARENT;
	kvi_err rv = KVI_EINVAL;
	if (tok == KVJ_NUMBER) {
		rv =
		    hash ? kvj_lexer_u64_bits(lx, out) : kvj_lexer_u64(lx, out);
	}
	if (rv == KVI_EINVAL) {
		fail_type(p, want,
			  tok == KVJ_NUMBER ? "a non-integer number"
					    : kvj_token_name(tok));
		return false;
	}
	if (rv != KVI_OK) {
		char num[48];
		kvr_fail(p, "%s does not fit in %s",
			 kvj_lexer_number_text(lx, num, sizeof(num)),
			 hash && lx->num_neg && !lx->num_over ? "i64" : "u64");
		return false;
	}
	return true;
}

/* store_u64 puts an id where the current key says. */
static void
store_u64(kvr_parser *p, const kvr_frame *f, uint64_t v)
{
	switch (f->key) {
	case K_LAST_EVENT_ID:
		p->resp.has_last_event_id = true;
		p->resp.last_event_id = v;
		break;
	case K_REQUESTED_START:
		p->resp.requested_start = v;
		break;
	case K_REQUESTED_END:
		p->resp.requested_end = v;
		break;
	case K_NEWEST_AVAILABLE:
		p->resp.has_newest_available = true;
		p->resp.newest_available = v;
		break;
	case K_START_ID:
		p->resp.start_id = v;
		break;
	case K_END_ID:
		p->resp.end_id = v;
		break;
	case K_EVENT_ID:
		cur_event(p)->event_id = v;
		break;
	}
}

/* store_hash puts a hash where the current container says. */
static void
store_hash(kvr_parser *p, const kvr_frame *f, uint64_t h)
{
	if (f->node == V_HASH_LIST) {
		hash_add(p, h);
	} else if (f->key == K_PARENT_HASH) {
		kvr_event *ev = cur_event(p);
		ev->has_parent = true;
		ev->parent_hash = h;
	} else if (f->key == K_BLOCK_HASH) {
		p->blocks[p->blocks_len - 1].block_hash = h;
	} else if (f->key == K_TOKENS_HASH) {
		p->blocks[p->blocks_len - 1].tokens_hash = h;
	}
}

/* ---- schema ---------------------------------------------------------- */

/* want_next returns what the next value must be. */
static uint8_t
want_next(const kvr_parser *p)
{
	if (p->depth == 0) {
		return V_ROOT;
	}
	const kvr_frame *f = &p->frames[p->depth - 1];
	return f->is_array ? kvr_shapes[f->node].elem : f->want;
}

static void
value_done(kvr_parser *p)
{
	if (p->depth > 0 && p->frames[p->depth - 1].is_array) {
		p->frames[p->depth - 1].index++;
	}
}

static kvi_err
on_open(void *ctx, bool is_array)
{
	kvr_parser *p = ctx;
	uint8_t want = want_next(p);
	uint8_t node = want;
	uint8_t c = kvr_shapes[want].container;
	if (want == V_CLEARED && !is_array) {
		node = V_SKIP; /* {"cleared": {...}}: nothing in it matters */
	} else if (!(c == 3 || (c == 1 && !is_array) || (c == 2 && is_array))) {
		fail_type(p, want, is_array ? "an array" : "an object");
		return p->rv;
	}
	if (node == V_ROUTER_EVENT) {
		event_begin(p);
		kvj_lexer_span_begin(&p->lex, "RouterEvent", KVR_ELEMENT_MAX);
	} else if (node == V_BLOCK) {
		block_begin(p);
	}
	p->frames[p->depth++] = (kvr_frame){
	    .node = node, .key = K_NONE, .want = V_SKIP, .is_array = is_array};
	return KVI_OK;
}

static kvi_err
on_close(void *ctx)
{
	kvr_parser *p = ctx;
	kvr_frame *f = &p->frames[p->depth - 1];
	const kvr_shape *sh = &kvr_shapes[f->node];
	f->key = K_NONE; /* a message about f is about f, not its last key */
	uint32_t missing = sh->required & ~f->seen;
	if (missing != 0) {
		for (uint8_t k = 0; k < K_COUNT; k++) {
			if (missing & KB(k)) {
				kvr_fail(p, "missing \"%s\"", kvr_key_names[k]);
				return p->rv;
			}
		}
	}
	if (f->node == V_ROOT && f->seen == 0) {
		kvr_fail(p,
			 "no kind: expected one of Events, TreeDump, TooNew, "
			 "InvalidRange, Error");
		return p->rv;
	}
	if (f->node == V_DATA && f->seen == 0) {
		kvr_fail(p, "no event data: expected stored, removed or "
			    "cleared");
		return p->rv;
	}
	if (f->node == V_ROUTER_EVENT) {
		event_end(p);
		kvj_lexer_span_end(&p->lex);
	}
	p->depth--;
	value_done(p);
	return KVI_OK;
}

static kvi_err
on_key(void *ctx)
{
	kvr_parser *p = ctx;
	kvr_frame *f = &p->frames[p->depth - 1];
	const kvr_shape *sh = &kvr_shapes[f->node];
	char q[96];
	const kvr_field *fd = NULL;
	if (!p->lex.str_trunc) {
		for (uint8_t i = 0; i < sh->n_fields; i++) {
			const char *name = kvr_key_names[sh->fields[i].key];
			if (strlen(name) == p->lex.str_len &&
			    memcmp(name, p->lex.str, p->lex.str_len) == 0) {
				fd = &sh->fields[i];
				break;
			}
		}
	}
	if (fd == NULL) {
		if (f->node == V_ROOT) {
			kvr_fail(p, "unknown kind %s",
				 str_quoted(p, q, sizeof(q)));
			return p->rv;
		}
		if (f->node == V_DATA) {
			kvr_fail(p, "unknown event data %s",
				 str_quoted(p, q, sizeof(q)));
			return p->rv;
		}
		f->key = K_UNKNOWN;
		f->want = V_SKIP;
		return KVI_OK;
	}
	if (f->seen & KB(fd->key)) {
		kvr_fail(p, "duplicate key \"%s\"", kvr_key_names[fd->key]);
		return p->rv;
	}
	if ((f->node == V_ROOT || f->node == V_DATA) && f->seen != 0) {
		kvr_fail(p, "\"%s\" after another %s", kvr_key_names[fd->key],
			 f->node == V_ROOT ? "kind" : "event data variant");
		return p->rv;
	}
	f->seen |= KB(fd->key);
	f->key = fd->key;
	f->want = fd->want;
	if (f->node == V_ROOT) {
		p->resp.kind = (kvr_kind)fd->variant;
	} else if (f->node == V_DATA) {
		cur_event(p)->type = (kvi_event_type)fd->variant;
	}
	return KVI_OK;
}

static void
on_message(kvr_parser *p)
{
	memcpy(p->message, p->lex.str, p->lex.str_len);
	p->message[p->lex.str_len] = '\0';
	p->resp.message_len = p->lex.str_len;
	p->resp.message_truncated = p->lex.str_trunc;
}

static kvi_err
on_scalar(void *ctx, kvj_token tok)
{
	kvr_parser *p = ctx;
	uint8_t want = want_next(p);
	kvr_frame *f = p->depth > 0 ? &p->frames[p->depth - 1] : NULL;
	uint64_t v;
	char q[96];
	switch (want) {
	case V_SKIP:
		break;
	case V_MESSAGE:
		if (tok != KVJ_STRING) {
			fail_type(p, want, kvj_token_name(tok));
			return p->rv;
		}
		on_message(p);
		break;
	case V_ID_OR_NULL:
		if (tok == KVJ_NULL) {
			break; /* has_ stays false */
		}
		/* fall through */
	case V_U64:
		if (!tok_int(p, want, tok, &v)) {
			return p->rv;
		}
		store_u64(p, f, v);
		break;
	case V_PARENT:
		if (tok == KVJ_NULL) {
			break;
		}
		/* fall through */
	case V_HASH:
		if (!tok_int(p, want, tok, &v)) {
			return p->rv;
		}
		store_hash(p, f, v);
		break;
	case V_DP_RANK:
		if (tok == KVJ_NULL) {
			break;
		}
		if (!tok_int(p, want, tok, &v)) {
			return p->rv;
		}
		if (v > UINT16_MAX) {
			kvr_fail(p, "%" PRIu64 " does not fit in u16", v);
			return p->rv;
		}
		cur_event(p)->has_dp_rank = true;
		cur_event(p)->dp_rank = (uint16_t)v;
		break;
	case V_TIER:
		if (tok == KVJ_NULL) {
			break;
		}
		if (tok != KVJ_STRING) {
			fail_type(p, want, kvj_token_name(tok));
			return p->rv;
		}
		cur_event(p)->tier = tier_from_name(p->lex.str, p->lex.str_len);
		break;
	case V_WORKER_ID:
		if (tok != KVJ_NUMBER || !p->lex.num_int) {
			fail_type(p, want,
				  tok == KVJ_NUMBER ? "a non-integer number"
						    : kvj_token_name(tok));
			return p->rv;
		}
		break;
	case V_CLEARED:
		if (tok != KVJ_NULL) {
			fail_type(p, want, kvj_token_name(tok));
			return p->rv;
		}
		break;
	case V_DATA:
		if (tok != KVJ_STRING) {
			fail_type(p, want, kvj_token_name(tok));
			return p->rv;
		}
		if (p->lex.str_len != 7 ||
		    memcmp(p->lex.str, "cleared", 7) != 0) {
			kvr_fail(p, "unknown event data %s",
				 str_quoted(p, q, sizeof(q)));
			return p->rv;
		}
		cur_event(p)->type = KVI_EVENT_CLEARED;
		break;
	default: /* a container was expected */
		fail_type(p, want, kvj_token_name(tok));
		return p->rv;
	}
	value_done(p);
	return KVI_OK;
}

const kvj_handler kvr_handler = {
    .open = on_open,
    .close = on_close,
    .key = on_key,
    .scalar = on_scalar,
};
