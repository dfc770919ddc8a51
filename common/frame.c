#include "frame.h"

uint64_t
kvi_seq_get(const void *p)
{
	const uint8_t *b = p;
	uint64_t v = 0;
	for (int i = 0; i < 8; i++) {
		v = (v << 8) | b[i];
	}
	return v;
}

void
kvi_seq_put(void *p, uint64_t seq)
{
	uint8_t *b = p;
	for (int i = 7; i >= 0; i--) {
		b[i] = (uint8_t)seq;
		seq >>= 8;
	}
}

/* kvi_frame_parse_tail parses [topic?, seq8, payload] ending at the last
 * frame: f points at the seq frame. */
static kvi_err
kvi_frame_parse_tail(const kvi_frame *topic, const kvi_frame *f, kvi_msg *out)
{
	if (f[0].len != 8) {
		return KVI_EPROTO;
	}
	kvi_msg m = {0};
	if (topic != NULL) {
		m.topic = *topic;
	}
	m.seq = kvi_seq_get(f[0].ptr);
	m.payload = f[1];
	m.end = m.seq == KVI_SEQ_END && f[1].len == 0;
	*out = m;
	return KVI_OK;
}

kvi_err
kvi_frame_parse_live(const kvi_frame *frames, size_t n, kvi_msg *out)
{
	if (n != 3) {
		return KVI_EPROTO;
	}
	kvi_msg m;
	kvi_err rv = kvi_frame_parse_tail(&frames[0], &frames[1], &m);
	if (rv != KVI_OK || m.end) {
		/* The live stream has no end marker: such a message is
		 * malformed rather than the end of anything. */
		return KVI_EPROTO;
	}
	*out = m;
	return KVI_OK;
}

kvi_err
kvi_frame_parse_replay(const kvi_frame *frames, size_t n, kvi_msg *out)
{
	if (n < 3 || n > 4 || frames[0].len != 0) {
		return KVI_EPROTO;
	}
	if (n == 4) {
		return kvi_frame_parse_tail(&frames[1], &frames[2], out);
	}
	return kvi_frame_parse_tail(NULL, &frames[1], out);
}
