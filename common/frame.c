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
kvi_frame_parse_tail(const kvi_frame *topic, const kvi_frame *f, kvi_msg *out,
		     char *err, size_t errlen)
{
	if (f[0].len != 8) {
		return kvi_errf(err, errlen, KVI_EPROTO,
				"a seq frame of %zu bytes, expected 8",
				f[0].len);
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
kvi_frame_parse_live(const kvi_frame *frames, size_t n, kvi_msg *out, char *err,
		     size_t errlen)
{
	if (n != 3) {
		return kvi_errf(err, errlen, KVI_EPROTO,
				"a live message of %zu frames, expected 3 "
				"[topic, seq, payload]",
				n);
	}
	kvi_msg m;
	kvi_err rv =
	    kvi_frame_parse_tail(&frames[0], &frames[1], &m, err, errlen);
	if (rv != KVI_OK) {
		return rv;
	}
	if (m.end) {
		/* The live stream has no end marker: such a message is
		 * malformed rather than the end of anything. */
		return kvi_errf(err, errlen, KVI_EPROTO,
				"a replay end marker on the live stream");
	}
	*out = m;
	return KVI_OK;
}

kvi_err
kvi_frame_parse_replay(const kvi_frame *frames, size_t n, kvi_msg *out,
		       char *err, size_t errlen)
{
	if (n < 3 || n > 4) {
		return kvi_errf(err, errlen, KVI_EPROTO,
				"a replay reply of %zu frames, expected 3 or 4 "
				"(\"\", [topic], seq, payload)",
				n);
	}
	if (frames[0].len != 0) {
		return kvi_errf(err, errlen, KVI_EPROTO,
				"a replay reply whose first frame is not the "
				"empty delimiter");
	}
	if (n == 4) {
		return kvi_frame_parse_tail(&frames[1], &frames[2], out, err,
					    errlen);
	}
	return kvi_frame_parse_tail(NULL, &frames[1], out, err, errlen);
}
