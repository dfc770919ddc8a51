/*
 * xorshift.h - a seeded xorshift64 generator for the unit tests' random
 * walks: the same seed gives the same walk on every machine.
 */
#ifndef KVI_TESTS_XORSHIFT_H
#define KVI_TESTS_XORSHIFT_H

#include <stdint.h>

/* xorshift64 advances *s (never 0) and returns it. */
static inline uint64_t
xorshift64(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

#endif /* KVI_TESTS_XORSHIFT_H */
