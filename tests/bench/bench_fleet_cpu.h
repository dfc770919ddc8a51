/*
 * bench_fleet_cpu.h - the CPU a set of processes used, sampled over time,
 * so that bench_fleet can say what one registration cost in CPU in each
 * tenth of the fleet: a figure the VM's latency does not move the way it
 * moves a rate.
 *
 * A thread reads each process's CPU time (/proc/PID/stat) every few
 * milliseconds and keeps the samples; bfc_at() interpolates the total
 * between the two samples around a moment.
 */
#ifndef KVI_TESTS_BENCH_FLEET_CPU_H
#define KVI_TESTS_BENCH_FLEET_CPU_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>

#define BFC_PROCS 3

typedef struct bfc_sample {
	double t;              /* seconds on kvt_now_ms()'s clock */
	double cpu[BFC_PROCS]; /* CPU seconds of each process */
} bfc_sample;

typedef struct bfc {
	pid_t pids[BFC_PROCS];
	int n; /* processes */
	bfc_sample *s;
	size_t ns, cap;
	_Atomic int stop;
	pthread_t th;
} bfc;

/* bfc_start starts sampling the n (<= BFC_PROCS) processes pids. */
void bfc_start(bfc *c, const pid_t *pids, int n);

/* bfc_stop stops the sampling; the samples stay until bfc_free. */
void bfc_stop(bfc *c);

/* bfc_at returns the CPU seconds process i (or all of them, for i < 0)
 * had used at time t, interpolated between samples; the first or last
 * sample outside them. */
double bfc_at(const bfc *c, int i, double t);

void bfc_free(bfc *c);

#endif /* KVI_TESTS_BENCH_FLEET_CPU_H */
