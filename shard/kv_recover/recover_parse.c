/*
 * recover_parse.c - the `/kv_recover` stream parser: the parser object and
 * its API.
 *
 * A parser holds a JSON lexer (json_lex.h) whose tokens go to the schema
 * layer of recover_parse_schema.c, one frame per open container, the
 * output arrays the schema fills and the first failure. This file makes,
 * resets and frees it, feeds it bytes, gives each failure a message that
 * says where (the byte, and the path through the open frames) and, once
 * the body is complete, points each event into the block and hash arrays,
 * which no longer move.
 */
#include "recover_parse.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "recover_parse_int.h"

/* ---- errors ---------------------------------------------------------- */

/* path_of writes where the parser is, such as
 * "Events.events[3].event.data.stored.blocks[0].block_hash". */
static void
path_of(const kvr_parser *p, char *buf, size_t size)
{
	size_t o = 0;
	buf[0] = '\0';
	for (uint8_t d = 0; d < p->depth && o < size; d++) {
		const kvr_frame *f = &p->frames[d];
		int n = 0;
		if (f->is_array) {
			n = snprintf(buf + o, size - o, "[%" PRIu64 "]",
				     f->index);
		} else if (f->key != K_NONE) {
			n = snprintf(buf + o, size - o, "%s%s", o ? "." : "",
				     kvr_key_names[f->key]);
		}
		if (n < 0) {
			break;
		}
		o += (size_t)n;
	}
}

/* kvr_fail records a KVI_EPROTO failure at the current byte; only the first
 * failure is kept. */
void
kvr_fail(kvr_parser *p, const char *fmt, ...)
{
	if (p->rv != KVI_OK) {
		return;
	}
	char path[192], msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	path_of(p, path, sizeof(path));
	snprintf(p->err, sizeof(p->err), "byte %" PRIu64 ": %s%s%s",
		 kvj_lexer_offset(&p->lex), path, path[0] ? ": " : "", msg);
	p->rv = KVI_EPROTO;
}

/* ---- API ------------------------------------------------------------- */

kvr_parser *
kvr_parser_alloc(void)
{
	kvr_parser *p = kvi_calloc(1, sizeof(*p));
	kvj_lexer_init(&p->lex, &kvr_handler, p);
	kvr_parser_reset(p);
	return p;
}

void
kvr_parser_free(kvr_parser *p)
{
	if (p == NULL) {
		return;
	}
	kvi_free(p->events);
	kvi_free(p->blocks);
	kvi_free(p->hashes);
	kvi_free(p);
}

void
kvr_parser_reset(kvr_parser *p)
{
	kvj_lexer_reset(&p->lex);
	p->depth = 0;
	p->finished = false;
	p->rv = KVI_OK;
	p->err[0] = '\0';
	p->events_len = 0;
	p->blocks_len = 0;
	p->hashes_len = 0;
	p->message[0] = '\0';
	memset(&p->resp, 0, sizeof(p->resp));
	p->resp.message = p->message;
}

/* lexed takes what the lexer returned: a failure it found itself gets
 * its message here, with the path of the frames it left, which are those
 * of the byte it failed at. */
static void
lexed(kvr_parser *p, kvi_err rv)
{
	if (rv != KVI_OK && p->rv == KVI_OK) {
		kvr_fail(p, "%s", kvj_lexer_error(&p->lex));
	}
}

kvi_err
kvr_parser_feed(kvr_parser *p, const void *buf, size_t len)
{
	if (p->rv != KVI_OK) {
		return p->rv;
	}
	if (p->finished) {
		return KVI_EINVAL;
	}
	lexed(p, kvj_lexer_feed(&p->lex, buf, len));
	return p->rv;
}

/* parser_link points each event at its blocks and hashes: the arrays
 * hold them in event order. */
static void
parser_link(kvr_parser *p)
{
	size_t b = 0, h = 0;
	for (size_t i = 0; i < p->events_len; i++) {
		kvr_event *ev = &p->events[i];
		ev->blocks = ev->n_blocks ? p->blocks + b : NULL;
		ev->block_hashes = ev->n_hashes ? p->hashes + h : NULL;
		b += ev->n_blocks;
		h += ev->n_hashes;
	}
	p->resp.events = p->events_len ? p->events : NULL;
	p->resp.n_events = p->events_len;
	p->resp.n_blocks = p->blocks_len;
	p->resp.n_hashes = p->hashes_len;
}

kvi_err
kvr_parser_finish(kvr_parser *p)
{
	if (p->rv != KVI_OK || p->finished) {
		return p->rv;
	}
	lexed(p, kvj_lexer_finish(&p->lex));
	if (p->rv != KVI_OK) {
		return p->rv;
	}
	parser_link(p);
	p->finished = true;
	return KVI_OK;
}

const kvr_response *
kvr_parser_result(const kvr_parser *p)
{
	return p->finished && p->rv == KVI_OK ? &p->resp : NULL;
}

const char *
kvr_parser_error(const kvr_parser *p)
{
	return p->err;
}

uint64_t
kvr_parser_bytes(const kvr_parser *p)
{
	return kvj_lexer_bytes(&p->lex);
}

size_t
kvr_parser_blocks(const kvr_parser *p)
{
	return p->blocks_len;
}

size_t
kvr_parser_footprint(const kvr_parser *p)
{
	return sizeof(*p) + p->events_cap * sizeof(*p->events) +
	       p->blocks_cap * sizeof(*p->blocks) +
	       p->hashes_cap * sizeof(*p->hashes);
}

const char *
kvr_kind_name(kvr_kind kind)
{
	static const char *const names[] = {
	    [KVR_KIND_EVENTS] = "Events",
	    [KVR_KIND_TREE_DUMP] = "TreeDump",
	    [KVR_KIND_TOO_NEW] = "TooNew",
	    [KVR_KIND_INVALID_RANGE] = "InvalidRange",
	    [KVR_KIND_ERROR] = "Error",
	};
	if (kind > KVR_KIND_NONE && kind <= KVR_KIND_ERROR) {
		return names[kind];
	}
	return "none";
}
