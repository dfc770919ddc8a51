/*
 * frame.h - the ZeroMQ framing of engine event messages
 * (docs/wire.md#live-event-stream, docs/wire.md#replay-socket).
 *
 * Pure functions over frames already received (pointer + length each), so
 * they are testable without sockets:
 *
 *   live message    [topic, seq8, payload]             (SUB side)
 *   replay request  [b"", seq8]                        (DEALER side)
 *   replay reply    [b"", topic, seq8, payload]        (vLLM >= 0.26)
 *                   [b"", seq8, payload]               (older vLLM, SGLang)
 *   end of replay   seq8 = 0xFFFFFFFFFFFFFFFF, payload empty
 *
 * seq8 is an unsigned 64-bit big-endian integer. The frames a parser returns
 * point into the caller's frames; nothing is copied.
 */
#ifndef KVI_COMMON_FRAME_H
#define KVI_COMMON_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define KVI_SEQ_END UINT64_MAX

typedef struct kvi_frame {
	const void *ptr;
	size_t len;
} kvi_frame;

/* One event message, live or replayed. */
typedef struct kvi_msg {
	kvi_frame topic; /* empty when the reply had no topic frame */
	uint64_t seq;
	kvi_frame payload;
	bool end; /* replay end marker: no payload to decode */
} kvi_msg;

/* kvi_frame_parse_live parses the n frames of a live message.
 * Returns KVI_EPROTO when there are not exactly 3 frames, the seq frame
 * is not 8 bytes or the message is a replay end marker, with err (may be
 * NULL) saying which; *out is written only on success. */
kvi_err kvi_frame_parse_live(const kvi_frame *frames, size_t n, kvi_msg *out,
			     char *err, size_t errlen);

/* kvi_frame_parse_replay parses the n frames of a replay reply as a DEALER
 * receives it (leading empty frame included), in either shape. The end marker
 * yields out->end = true. Returns KVI_EPROTO for anything else, with err
 * (may be NULL) saying what. */
kvi_err kvi_frame_parse_replay(const kvi_frame *frames, size_t n, kvi_msg *out,
			       char *err, size_t errlen);

/* kvi_seq_get reads a big-endian seq from 8 bytes; kvi_seq_put writes one. */
uint64_t kvi_seq_get(const void *p);
void kvi_seq_put(void *p, uint64_t seq);

#endif /* KVI_COMMON_FRAME_H */
