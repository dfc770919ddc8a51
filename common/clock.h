/*
 * clock.h - timed waits on condition variables: one whose waits run on the
 * monotonic clock (not moved by a change of the wall clock), and the
 * absolute deadline a wait takes.
 */
#ifndef KVI_COMMON_CLOCK_H
#define KVI_COMMON_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* kvi_cond_init_monotonic initialises cv for waits against
 * CLOCK_MONOTONIC deadlines. */
void kvi_cond_init_monotonic(pthread_cond_t *cv);

/* kvi_deadline_ms returns the time ms milliseconds from now on clock. */
struct timespec kvi_deadline_ms(clockid_t clock, int64_t ms);

/* kvi_now_ms, kvi_now_us and kvi_now_s read the monotonic clock, in
 * milliseconds, microseconds and (fractional) seconds. */
int64_t kvi_now_ms(void);
uint64_t kvi_now_us(void);
double kvi_now_s(void);

/* kvi_since_s returns the seconds since t0, a reading of the monotonic
 * clock. */
double kvi_since_s(const struct timespec *t0);

#endif /* KVI_COMMON_CLOCK_H */
