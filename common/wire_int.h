/*
 * wire_int.h - the event batch decoder's internals, private to wire.c (the
 * decoder, the raw msgpack check of pass 1 and the batch around the events)
 * and wire_event.c (pass 2 for the events themselves). Not a public header;
 * wire.h says what the decoder accepts and who owns a batch.
 */
#ifndef KVI_COMMON_WIRE_INT_H
#define KVI_COMMON_WIRE_INT_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hash.h"
#include "wire.h"

#define KVI_NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* Where each event's arrays start in the decoder's arenas; pointers are set
 * once decoding is done, since the arenas may move while they grow. */
typedef struct kvi_event_span {
	size_t hash_off;
	size_t token_off;
	size_t xoff_off;  /* extra_off's start in xoffs; SIZE_MAX: none */
	size_t xbyte_off; /* the event's extra bytes' start in xbytes */
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
	kvi_xbuf xbytes; /* blocks' extra bytes */
	uint32_t *xoffs; /* per event with extras: n_hashes + 1 offsets */
	size_t xoffs_len, xoffs_cap;
	char err[256];
	char skip_err[256];
	bool skip_malformed; /* skip_err is a malformed event's */
};

/* wire.c */
kvi_err kvi_fail(kvi_decoder *dec, kvi_err rv, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *kvi_mp_type_name(const msgpack_object *o);
const char *kvi_int_text(const msgpack_object *o, char *buf, size_t size);

/* wire_event.c */
bool kvi_str_eq(const msgpack_object *o, const char *s);
/* kvi_decode_events decodes the events array o into the decoder's arenas
 * and points b's events at them. Returns KVI_OK, KVI_EPROTO or KVI_ERANGE
 * with the decoder's message set. */
kvi_err kvi_decode_events(kvi_decoder *dec, const msgpack_object *o,
			  kvi_batch *b);

#endif /* KVI_COMMON_WIRE_INT_H */
