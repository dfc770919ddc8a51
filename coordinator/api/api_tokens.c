#include "api_tokens.h"

#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "alloc.h"

#define TOK_BLOCK 64
/* bytes readable past a block: the next block's, which the VBMI
 * converter reads in a second vector (an 8-byte load from a block's last
 * byte needs 7) */
#define TOK_PAD 64

/* The classes of one block's bytes, bit i for byte i. */
typedef struct tok_masks {
	uint64_t digit, comma, space, zero;
} tok_masks;

static inline void
tok_classify_portable(const char *p, tok_masks *m)
{
	uint64_t d = 0, c = 0, s = 0, z = 0;
	for (unsigned i = 0; i < TOK_BLOCK; i++) {
		unsigned char ch = (unsigned char)p[i];
		d |= (uint64_t)((unsigned)(ch - '0') <= 9) << i;
		z |= (uint64_t)(ch == '0') << i;
		c |= (uint64_t)(ch == ',') << i;
		s |= (uint64_t)(ch == ' ' || ch == '\n' || ch == '\r' ||
				ch == '\t')
		     << i;
	}
	m->digit = d;
	m->comma = c;
	m->space = s;
	m->zero = z;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define TOK_X86 1

static inline uint64_t
tok_bits(__m128i x, unsigned shift)
{
	return (uint64_t)(unsigned)_mm_movemask_epi8(x) << shift;
}

static inline void
tok_classify_sse2(const char *p, tok_masks *m)
{
	const __m128i below = _mm_set1_epi8('0' - 1);
	const __m128i above = _mm_set1_epi8('9' + 1);
	uint64_t d = 0, c = 0, s = 0, z = 0;
	for (unsigned k = 0; k < TOK_BLOCK; k += 16) {
		__m128i b =
		    _mm_loadu_si128((const __m128i *)(const void *)(p + k));
		/* signed compares: bytes from 0x80 are below '0' */
		__m128i dg = _mm_and_si128(_mm_cmpgt_epi8(b, below),
					   _mm_cmplt_epi8(b, above));
		__m128i cm = _mm_cmpeq_epi8(b, _mm_set1_epi8(','));
		__m128i ws = _mm_or_si128(
		    _mm_or_si128(_mm_cmpeq_epi8(b, _mm_set1_epi8(' ')),
				 _mm_cmpeq_epi8(b, _mm_set1_epi8('\n'))),
		    _mm_or_si128(_mm_cmpeq_epi8(b, _mm_set1_epi8('\r')),
				 _mm_cmpeq_epi8(b, _mm_set1_epi8('\t'))));
		d |= tok_bits(dg, k);
		z |= tok_bits(_mm_cmpeq_epi8(b, _mm_set1_epi8('0')), k);
		c |= tok_bits(cm, k);
		s |= tok_bits(ws, k);
	}
	m->digit = d;
	m->comma = c;
	m->space = s;
	m->zero = z;
}

static inline __attribute__((target("avx2"))) uint64_t
tok_bits256(__m256i x, unsigned shift)
{
	return (uint64_t)(uint32_t)_mm256_movemask_epi8(x) << shift;
}

static inline __attribute__((target("avx2"))) void
tok_classify_avx2(const char *p, tok_masks *m)
{
	const __m256i below = _mm256_set1_epi8('0' - 1);
	const __m256i above = _mm256_set1_epi8('9' + 1);
	/* white space by its low nibble: the byte that has it, or one whose
	 * low nibble differs (bytes from 0x80 look up 0, and are not 0) */
	const __m256i spaces = _mm256_setr_epi8(
	    ' ', 0, 0, 0, 0, 0, 0, 0, 0, '\t', '\n', 0, 0, '\r', 0, 0, ' ', 0,
	    0, 0, 0, 0, 0, 0, 0, '\t', '\n', 0, 0, '\r', 0, 0);
	uint64_t d = 0, c = 0, s = 0, z = 0;
	for (unsigned k = 0; k < TOK_BLOCK; k += 32) {
		__m256i b =
		    _mm256_loadu_si256((const __m256i *)(const void *)(p + k));
		__m256i dg = _mm256_and_si256(_mm256_cmpgt_epi8(b, below),
					      _mm256_cmpgt_epi8(above, b));
		__m256i cm = _mm256_cmpeq_epi8(b, _mm256_set1_epi8(','));
		__m256i ws =
		    _mm256_cmpeq_epi8(_mm256_shuffle_epi8(spaces, b), b);
		d |= tok_bits256(dg, k);
		z |=
		    tok_bits256(_mm256_cmpeq_epi8(b, _mm256_set1_epi8('0')), k);
		c |= tok_bits256(cm, k);
		s |= tok_bits256(ws, k);
	}
	m->digit = d;
	m->comma = c;
	m->space = s;
	m->zero = z;
}
#endif

/* tok_prefix_xor sets bit i to the parity of bits 0..i of x. */
static inline uint64_t
tok_prefix_xor(uint64_t x)
{
	x ^= x << 1;
	x ^= x << 2;
	x ^= x << 4;
	x ^= x << 8;
	x ^= x << 16;
	x ^= x << 32;
	return x;
}

/* tok_long reads an id of 8 digits or more at p, up to lim. */
static __attribute__((noinline)) bool
tok_long(const char *p, const char *lim, uint32_t *out)
{
	uint64_t v = 0;
	const char *q = p;
	while (q < lim && (unsigned)(*q - '0') <= 9 && q - p < 11) {
		v = v * 10 + (unsigned)(*q++ - '0');
	}
	if (q - p > 10 || v > UINT32_MAX || *p == '0') {
		return false;
	}
	*out = (uint32_t)v;
	return true;
}

/* tok_id converts the id that starts at p (8 bytes readable; lim
 * bounds a long one), eight bytes at a time with no loop for ids of up to
 * 7 digits: the length of its digit run is where the first byte above 9
 * is. A leading zero was ruled out on the masks. */
static inline bool
tok_id(const char *p, const char *lim, uint32_t *out)
{
	uint64_t w;
	memcpy(&w, p, 8);
	uint64_t x = w ^ UINT64_C(0x3030303030303030); /* digits: 0..9 */
	uint64_t big = (((x & UINT64_C(0x7f7f7f7f7f7f7f7f)) +
			 UINT64_C(0x7676767676767676)) |
			x) &
		       UINT64_C(0x8080808080808080); /* bytes above 9 */
	if (__builtin_expect(big == 0, 0)) {
		return tok_long(p, lim, out);
	}
	/* the digits to the top bytes, as "000...d1d2" in string order:
	 * the first byte above 9 has its bit 7 at 8 * length + 7 */
	x <<= 64 - ((unsigned)__builtin_ctzll(big) & 56);
	x = ((x & UINT64_C(0x0f0f0f0f0f0f0f0f)) * 2561) >> 8;
	x = ((x & UINT64_C(0x00ff00ff00ff00ff)) * 6553601) >> 16;
	x = ((x & UINT64_C(0x0000ffff0000ffff)) * UINT64_C(42949672960001)) >>
	    32;
	*out = (uint32_t)x;
	return true;
}

typedef void (*tok_classifier)(const char *p, tok_masks *m);

/* A converter writes the ids that start at the bits of starts in blk to
 * out (room for 64), and returns how many, or -1 when one is not an id. */
typedef int (*tok_converter)(const char *blk, const char *lim, uint64_t starts,
			     uint32_t *out);

static inline int
tok_convert(const char *blk, const char *lim, uint64_t starts, uint32_t *out)
{
	bool ok = true;
	int n = 0;
	while (starts != 0) {
		unsigned i = (unsigned)__builtin_ctzll(starts);
		starts &= starts - 1;
		ok &= tok_id(blk + i, lim, &out[n++]);
	}
	return ok ? n : -1;
}

#if TOK_X86
#define TOK_AVX512 "avx512f,avx512bw,avx512cd,avx512dq,avx2,bmi,bmi2"

/* tok_classify_avx512 classifies a block in one vector, straight
 * into mask registers. */
static inline __attribute__((target(TOK_AVX512))) void
tok_classify_avx512(const char *p, tok_masks *m)
{
	/* white space by its low nibble, as tok_classify_avx2 */
	const __m512i spaces = _mm512_broadcast_i32x4(_mm_setr_epi8(
	    ' ', 0, 0, 0, 0, 0, 0, 0, 0, '\t', '\n', 0, 0, '\r', 0, 0));
	__m512i b = _mm512_loadu_si512(p);
	m->digit = _mm512_cmplt_epu8_mask(
	    _mm512_sub_epi8(b, _mm512_set1_epi8('0')), _mm512_set1_epi8(10));
	m->zero = _mm512_cmpeq_epi8_mask(b, _mm512_set1_epi8('0'));
	m->comma = _mm512_cmpeq_epi8_mask(b, _mm512_set1_epi8(','));
	m->space = _mm512_cmpeq_epi8_mask(_mm512_shuffle_epi8(spaces, b), b);
}

/* tok_digits8 converts the ids whose text starts each 64-bit lane of w
 * as tok_id does; false when one has 8 digits or more. */
static inline __attribute__((target(TOK_AVX512))) bool
tok_digits8(__m512i w, uint32_t *out)
{
	__m512i x = _mm512_xor_si512(w, _mm512_set1_epi8(0x30));
	__m512i big = _mm512_and_si512(
	    _mm512_or_si512(
		_mm512_add_epi64(_mm512_and_si512(x, _mm512_set1_epi8(0x7f)),
				 _mm512_set1_epi8(0x76)),
		x),
	    _mm512_set1_epi8((char)0x80));
	if (_mm512_test_epi64_mask(big, big) != 0xff) {
		return false;
	}
	/* the lowest byte above 9 has its bit 7 at 8 * length + 7 */
	__m512i low = _mm512_and_si512(
	    big, _mm512_sub_epi64(_mm512_setzero_si512(), big));
	__m512i tz =
	    _mm512_sub_epi64(_mm512_set1_epi64(63), _mm512_lzcnt_epi64(low));
	__m512i shift = _mm512_sub_epi64(
	    _mm512_set1_epi64(64), _mm512_and_si512(tz, _mm512_set1_epi64(56)));
	x = _mm512_sllv_epi64(x, shift);
	/* digits in string order from the top: pairs, quads, then 8 */
	__m512i t = _mm512_maddubs_epi16(x, _mm512_set1_epi16(0x010a));
	t = _mm512_madd_epi16(t, _mm512_set1_epi32(0x00010064));
	t = _mm512_add_epi64(_mm512_mul_epu32(t, _mm512_set1_epi64(10000)),
			     _mm512_srli_epi64(t, 32));
	_mm256_storeu_si256((__m256i *)(void *)out, _mm512_cvtepi64_epi32(t));
	return true;
}

/* tok_convert8 converts the ids at p[0..8), each from an 8-byte load. */
static inline __attribute__((target(TOK_AVX512))) bool
tok_convert8(const char *const *p, uint32_t *out)
{
	uint64_t w[8];
	for (int k = 0; k < 8; k++) {
		memcpy(&w[k], p[k], 8);
	}
	return tok_digits8(_mm512_loadu_si512(w), out);
}

static inline __attribute__((target(TOK_AVX512))) int
tok_convert_avx512(const char *blk, const char *lim, uint64_t starts,
		   uint32_t *out)
{
	/* lanes past the ids read a text that converts to 0 */
	static const char nothing[8] = {'0', ',', ',', ',', ',', ',', ',', ','};
	const char *at[72];
	int n = 0;
	while (starts != 0) {
		at[n++] = blk + __builtin_ctzll(starts);
		starts &= starts - 1;
	}
	for (int k = n; k % 8 != 0; k++) {
		at[k] = nothing;
	}
	for (int k = 0; k < n; k += 8) {
		if (!tok_convert8(at + k, out + k)) {
			/* an id of 8 digits or more in this group */
			for (int j = k; j < k + 8 && j < n; j++) {
				if (!tok_id(at[j], lim, &out[j])) {
					return -1;
				}
			}
		}
	}
	return n;
}

#define TOK_VBMI TOK_AVX512 ",avx512vbmi,avx512vbmi2"

/* tok_convert_vbmi converts as tok_convert_avx512, without a load per
 * id: the ids' starts are compressed into one vector of byte offsets, and
 * each group of eight ids is permuted out of the block and the next one
 * (which TOK_PAD makes readable) into the lanes of a vector. */
static inline __attribute__((target(TOK_VBMI))) int
tok_convert_vbmi(const char *blk, const char *lim, uint64_t starts,
		 uint32_t *out)
{
	int n = __builtin_popcountll(starts);
	if (n == 0) {
		return 0;
	}
	const __m512i iota = _mm512_set_epi8(
	    63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47,
	    46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30,
	    29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13,
	    12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
	/* lanes past the ids read "0,,,,,,," which converts to 0 */
	const __m512i nothing = _mm512_set1_epi64(0x2c2c2c2c2c2c2c30);
	const __m512i bytes = _mm512_set1_epi64(0x0706050403020100);
	__m512i pos = _mm512_maskz_compress_epi8(starts, iota);
	__m512i lo = _mm512_loadu_si512(blk);
	__m512i hi = _mm512_loadu_si512(blk + TOK_BLOCK);
	/* lane k of sel: byte 8g + k of pos, in every byte */
	__m512i sel = _mm512_set_epi64(0x0707070707070707, 0x0606060606060606,
				       0x0505050505050505, 0x0404040404040404,
				       0x0303030303030303, 0x0202020202020202,
				       0x0101010101010101, 0);
	for (int k = 0; k < n; k += 8) {
		__m512i idx =
		    _mm512_add_epi8(_mm512_permutexvar_epi8(sel, pos), bytes);
		__mmask8 live =
		    n - k >= 8 ? 0xff : (__mmask8)((1u << (n - k)) - 1);
		__m512i w = _mm512_mask_blend_epi64(
		    live, nothing, _mm512_permutex2var_epi8(lo, idx, hi));
		if (!tok_digits8(w, out + k)) {
			/* an id of 8 digits or more in this group */
			uint8_t at[64];
			_mm512_storeu_si512(at, pos);
			for (int j = k; j < k + 8 && j < n; j++) {
				if (!tok_id(blk + at[j], lim, &out[j])) {
					return -1;
				}
			}
		}
		sel = _mm512_add_epi8(sel, _mm512_set1_epi8(8));
	}
	return n;
}
#endif

/* tok_read is the reader, inlined once per classifier. */
static inline __attribute__((always_inline)) bool
tok_read(const char *p, const char *end, size_t max, uint32_t **ids,
	 size_t *n_out, const char **after, tok_classifier classify,
	 tok_converter convert)
{
	/* a guess that fits real prompts (ids of 5-6 digits): grown when
	 * short */
	size_t cap = (size_t)(end - p) / 6 + TOK_BLOCK;
	if (cap > max + TOK_BLOCK) {
		cap = max + TOK_BLOCK;
	}
	uint32_t *v = kvi_reallocarray(NULL, cap, sizeof(*v));
	size_t n = 0;
	/* a decline hands back the ids before the last comma of the bytes
	 * up to ok, all read and converted into v[0..n) */
	const char *ok = p;
	uint64_t prev_digit = 0; /* 1: the byte before the block is a digit */
	uint64_t parity = 0;     /* all ones: an odd count of ids + commas */
	uint64_t zero_last = 0;  /* 1: an id starts with '0' at the last byte */
	char tail[TOK_BLOCK + TOK_PAD];
	for (const char *base = p;; base += TOK_BLOCK) {
		/* the last bytes are copied, with NULs after them, so that
		 * every load stays inside what may be read */
		const char *blk = base, *lim = end;
		size_t left = (size_t)(end - base);
		if (left < sizeof(tail)) {
			memset(tail, 0, sizeof(tail));
			memcpy(tail, base, left);
			blk = tail;
			lim = tail + sizeof(tail);
		}
		tok_masks m;
		classify(blk, &m);
		/* the array ends at the first byte of no class */
		uint64_t other = ~(m.digit | m.comma | m.space);
		unsigned stop = TOK_BLOCK;
		if (other != 0) {
			stop = (unsigned)__builtin_ctzll(other);
			uint64_t keep =
			    stop == 0 ? 0 : ~UINT64_C(0) >> (64 - stop);
			m.digit &= keep;
			m.comma &= keep;
		}
		uint64_t starts = m.digit & ~((m.digit << 1) | prev_digit);
		prev_digit = m.digit >> 63;
		/* an id of two digits or more that starts with '0' */
		uint64_t zeros = starts & m.zero;
		uint64_t lead0 =
		    (zeros & (m.digit >> 1)) | (zero_last & m.digit);
		zero_last = zeros >> 63;
		uint64_t px = tok_prefix_xor(starts | m.comma) ^ parity;
		parity = -(px >> 63);
		if ((starts & ~px) != 0 || (m.comma & px) != 0 || lead0 != 0) {
			ok = base;
			goto fail;
		}
		if (cap - n < TOK_BLOCK) {
			cap *= 2;
			v = kvi_reallocarray(v, cap, sizeof(*v));
		}
		int got = convert(blk, lim, starts, v + n);
		if (got < 0 || n + (size_t)got > max) {
			ok = base;
			goto fail;
		}
		n += (size_t)got;
		if (stop < TOK_BLOCK) {
			/* closed by ']' after an id (not a comma, not the
			 * end of the body) */
			if (blk[stop] != ']' || parity == 0) {
				ok = base + stop;
				goto fail;
			}
			*ids = v;
			*n_out = n;
			*after = base + stop + 1;
			return true;
		}
	}
fail:
	/* found only now, so that reading costs nothing for it: the bytes
	 * up to ok are ids, commas and white space, and after their last
	 * comma is at most one id, whose start is in v */
	while (ok > p && ok[-1] != ',') {
		ok--;
		if (*ok >= '0' && *ok <= '9') {
			n = n > 0 ? n - 1 : 0;
			while (ok > p && ok[-1] >= '0' && ok[-1] <= '9') {
				ok--;
			}
		}
	}
	if (ok == p) {
		kvi_free(v);
		v = NULL;
		n = 0;
	}
	*ids = v;
	*n_out = n;
	*after = ok;
	return false;
}

#if TOK_X86
static __attribute__((target("avx2,bmi,bmi2"))) bool
tok_read_avx2(const char *p, const char *end, size_t max, uint32_t **ids,
	      size_t *n, const char **after)
{
	return tok_read(p, end, max, ids, n, after, tok_classify_avx2,
			tok_convert);
}

static __attribute__((target(TOK_AVX512))) bool
tok_read_avx512(const char *p, const char *end, size_t max, uint32_t **ids,
		size_t *n, const char **after)
{
	return tok_read(p, end, max, ids, n, after, tok_classify_avx512,
			tok_convert_avx512);
}

static __attribute__((target(TOK_VBMI))) bool
tok_read_vbmi(const char *p, const char *end, size_t max, uint32_t **ids,
	      size_t *n, const char **after)
{
	return tok_read(p, end, max, ids, n, after, tok_classify_avx512,
			tok_convert_vbmi);
}
#endif

bool
kvc_tokens_supported(kvc_tokens_level level)
{
	switch (level) {
	case KVC_TOKENS_PORTABLE:
		return true;
#if TOK_X86
	case KVC_TOKENS_SSE2:
		return true;
	case KVC_TOKENS_AVX2:
		return __builtin_cpu_supports("avx2") &&
		       __builtin_cpu_supports("bmi2");
	case KVC_TOKENS_AVX512:
		return kvc_tokens_supported(KVC_TOKENS_AVX2) &&
		       __builtin_cpu_supports("avx512bw") &&
		       __builtin_cpu_supports("avx512cd") &&
		       __builtin_cpu_supports("avx512dq");
	case KVC_TOKENS_AVX512_VBMI:
		return kvc_tokens_supported(KVC_TOKENS_AVX512) &&
		       __builtin_cpu_supports("avx512vbmi") &&
		       __builtin_cpu_supports("avx512vbmi2");
#endif
	default:
		return false;
	}
}

bool
kvc_tokens_read_as(kvc_tokens_level level, const char *p, const char *end,
		   size_t max, uint32_t **ids, size_t *n, const char **after)
{
	switch (level) {
#if TOK_X86
	case KVC_TOKENS_AVX512_VBMI:
		return tok_read_vbmi(p, end, max, ids, n, after);
	case KVC_TOKENS_AVX512:
		return tok_read_avx512(p, end, max, ids, n, after);
	case KVC_TOKENS_AVX2:
		return tok_read_avx2(p, end, max, ids, n, after);
	case KVC_TOKENS_SSE2:
		return tok_read(p, end, max, ids, n, after, tok_classify_sse2,
				tok_convert);
#endif
	default:
		return tok_read(p, end, max, ids, n, after,
				tok_classify_portable, tok_convert);
	}
}

bool
kvc_tokens_read(const char *p, const char *end, size_t max, uint32_t **ids,
		size_t *n, const char **after)
{
	/* the best the machine has, chosen once */
	static _Atomic int best = -1;
	int level = best;
	if (level < 0) {
		level = KVC_TOKENS_PORTABLE;
		for (int l = KVC_TOKENS_PORTABLE; l < KVC_TOKENS_LEVELS; l++) {
			if (kvc_tokens_supported((kvc_tokens_level)l)) {
				level = l;
			}
		}
		best = level;
	}
	return kvc_tokens_read_as((kvc_tokens_level)level, p, end, max, ids, n,
				  after);
}
