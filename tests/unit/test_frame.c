/*
 * test_frame.c - live and replay message framing
 * (docs/wire.md#live-event-stream, docs/wire.md#replay-socket).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "frame.h"

static const uint8_t seq_42[8] = {0, 0, 0, 0, 0, 0, 0, 42};
static const uint8_t seq_big[8] = {0x80, 1, 2, 3, 4, 5, 6, 7};
static const uint8_t seq_end[8] = {0xff, 0xff, 0xff, 0xff,
				   0xff, 0xff, 0xff, 0xff};

static void
test_seq_big_endian(void **state)
{
	(void)state;
	assert_true(kvi_seq_get(seq_42) == 42);
	assert_true(kvi_seq_get(seq_big) == 0x8001020304050607ull);
	uint8_t b[8];
	kvi_seq_put(b, 0x8001020304050607ull);
	assert_memory_equal(b, seq_big, 8);
}

static void
test_live(void **state)
{
	(void)state;
	kvi_frame f[3] = {{"kv", 2}, {seq_42, 8}, {"\x90", 1}};
	kvi_msg m;
	assert_int_equal(kvi_frame_parse_live(f, 3, &m, NULL, 0), KVI_OK);
	assert_true(m.seq == 42);
	assert_int_equal(m.topic.len, 2);
	assert_int_equal(m.payload.len, 1);
	assert_false(m.end);
	/* wrong frame counts, a short seq frame */
	assert_int_equal(kvi_frame_parse_live(f, 2, &m, NULL, 0), KVI_EPROTO);
	kvi_frame four[4] = {f[0], f[1], f[2], f[2]};
	assert_int_equal(kvi_frame_parse_live(four, 4, &m, NULL, 0),
			 KVI_EPROTO);
	kvi_frame shortseq[3] = {f[0], {seq_42, 7}, f[2]};
	assert_int_equal(kvi_frame_parse_live(shortseq, 3, &m, NULL, 0),
			 KVI_EPROTO);
	/* an end marker has no business on the live stream */
	kvi_frame end[3] = {f[0], {seq_end, 8}, {"", 0}};
	assert_int_equal(kvi_frame_parse_live(end, 3, &m, NULL, 0), KVI_EPROTO);
}

static void
test_replay_shapes(void **state)
{
	(void)state;
	kvi_msg m;
	/* current vLLM: [b"", topic, seq, payload] */
	kvi_frame cur[4] = {{"", 0}, {"t", 1}, {seq_big, 8}, {"\x90", 1}};
	assert_int_equal(kvi_frame_parse_replay(cur, 4, &m, NULL, 0), KVI_OK);
	assert_true(m.seq == 0x8001020304050607ull);
	assert_int_equal(m.topic.len, 1);
	assert_false(m.end);
	/* older vLLM and SGLang: [b"", seq, payload] */
	kvi_frame old[3] = {{"", 0}, {seq_42, 8}, {"\x90", 1}};
	assert_int_equal(kvi_frame_parse_replay(old, 3, &m, NULL, 0), KVI_OK);
	assert_true(m.seq == 42);
	assert_int_equal(m.topic.len, 0);
	/* end markers in both shapes */
	kvi_frame end4[4] = {{"", 0}, {"t", 1}, {seq_end, 8}, {"", 0}};
	assert_int_equal(kvi_frame_parse_replay(end4, 4, &m, NULL, 0), KVI_OK);
	assert_true(m.end);
	kvi_frame end3[3] = {{"", 0}, {seq_end, 8}, {"", 0}};
	assert_int_equal(kvi_frame_parse_replay(end3, 3, &m, NULL, 0), KVI_OK);
	assert_true(m.end);
	/* no delimiter, too few or too many frames, bad seq */
	kvi_frame nodelim[3] = {{"x", 1}, {seq_42, 8}, {"\x90", 1}};
	assert_int_equal(kvi_frame_parse_replay(nodelim, 3, &m, NULL, 0),
			 KVI_EPROTO);
	assert_int_equal(kvi_frame_parse_replay(old, 2, &m, NULL, 0),
			 KVI_EPROTO);
	kvi_frame five[5] = {cur[0], cur[1], cur[2], cur[3], cur[3]};
	assert_int_equal(kvi_frame_parse_replay(five, 5, &m, NULL, 0),
			 KVI_EPROTO);
	kvi_frame badseq[3] = {{"", 0}, {seq_42, 9}, {"\x90", 1}};
	assert_int_equal(kvi_frame_parse_replay(badseq, 3, &m, NULL, 0),
			 KVI_EPROTO);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_seq_big_endian),
	    cmocka_unit_test(test_live),
	    cmocka_unit_test(test_replay_shapes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
