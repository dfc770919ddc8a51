/*
 * bench_zmq_sockets - what ZeroMQ itself costs a shard per listener whose
 * engine is absent: memory and descriptors of N SUB sockets connecting to
 * ports where nothing listens, in one process, with nothing else of the
 * shard's around them. The shard's own figure (bench_fleet: memory and
 * descriptors per listener) less this one is what the shard adds.
 *
 * Variants, each measured on a fresh context:
 *
 *   sub          a SUB socket, as the shard sets it up (unbounded
 *                receive queue, no linger, reconnect from 100 ms to the
 *                ceiling), connected;
 *   sub+monitor  the same with the monitor the shard keeps on it
 *                (CONNECTED and DISCONNECTED events, over inproc to a
 *                PAIR of ours): what the shard runs;
 *   io-threads=2 sub+monitor with two I/O threads instead of one;
 *   ivl=ceiling  sub+monitor with reconnecting at the 30 s ceiling from
 *                the start (no back-off steps).
 *
 * Each variant runs in a process of its own. For each it prints the
 * resident memory (VmRSS) and the open descriptors
 * per socket, after minus before, a second after the last connect, and
 * the CPU the process spent over the next --idle seconds.
 *
 *   bench_zmq_sockets [--sockets N] [--idle S]
 *
 * Defaults: 2,000 sockets, 2 s.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "kvitest.h"

typedef struct variant {
	const char *name;
	bool monitor;
	int io_threads;
	int ivl_ms; /* the first reconnect interval */
} variant;

static double
cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* measure opens n sockets of variant v, prints their cost, closes them;
 * false when one could not be opened. */
static bool
measure(const variant *v, int n, int idle_s)
{
	void *ctx = zmq_ctx_new();
	zmq_ctx_set(ctx, ZMQ_MAX_SOCKETS, 3 * n + 64);
	zmq_ctx_set(ctx, ZMQ_IO_THREADS, v->io_threads);
	void **sub = calloc((size_t)n, sizeof(*sub));
	void **mon = calloc((size_t)n, sizeof(*mon));
	/* the context's own threads and descriptors come with its first
	 * socket: one socket before the baseline */
	void *first = zmq_socket(ctx, ZMQ_SUB);
	kvt_sleep_ms(100);
	long rss0 = kvt_pid_rss_kib(getpid()), fds0 = kvt_pid_fds(getpid());
	bool ok = first != NULL;
	int zero = 0, ivl_max = 30000;
	for (int i = 0; i < n && ok; i++) {
		sub[i] = zmq_socket(ctx, ZMQ_SUB);
		ok = sub[i] != NULL;
		if (!ok) {
			fprintf(stderr, "socket %d: %s\n", i,
				zmq_strerror(zmq_errno()));
			break;
		}
		zmq_setsockopt(sub[i], ZMQ_RCVHWM, &zero, sizeof(zero));
		zmq_setsockopt(sub[i], ZMQ_LINGER, &zero, sizeof(zero));
		zmq_setsockopt(sub[i], ZMQ_RECONNECT_IVL, &v->ivl_ms,
			       sizeof(v->ivl_ms));
		zmq_setsockopt(sub[i], ZMQ_RECONNECT_IVL_MAX, &ivl_max,
			       sizeof(ivl_max));
		zmq_setsockopt(sub[i], ZMQ_SUBSCRIBE, "", 0);
		if (v->monitor) {
			char addr[64];
			snprintf(addr, sizeof(addr), "inproc://mon-%d", i);
			ok = zmq_socket_monitor(sub[i], addr,
						ZMQ_EVENT_CONNECTED |
						    ZMQ_EVENT_DISCONNECTED) ==
				 0 &&
			     (mon[i] = zmq_socket(ctx, ZMQ_PAIR)) != NULL &&
			     zmq_setsockopt(mon[i], ZMQ_LINGER, &zero,
					    sizeof(zero)) == 0 &&
			     zmq_connect(mon[i], addr) == 0;
		}
		/* 127.0.0.2-254, ports where nothing listens */
		char ep[64];
		snprintf(ep, sizeof(ep), "tcp://127.0.%d.%d:%d", 1 + i / 250,
			 2 + i % 250, 20000 + i % 7);
		ok = ok && zmq_connect(sub[i], ep) == 0;
		if (!ok) {
			fprintf(stderr, "socket %d: %s\n", i,
				zmq_strerror(zmq_errno()));
		}
	}
	kvt_sleep_ms(1000);
	long rss = kvt_pid_rss_kib(getpid()), fds = kvt_pid_fds(getpid());
	double c0 = cpu_s();
	kvt_sleep_ms(idle_s * 1000);
	double c1 = cpu_s();
	if (ok) {
		printf("%-13s %6d sockets: %6.1f KiB and %4.2f descriptors a "
		       "socket, idle %.1f%% of a core\n",
		       v->name, n, (double)(rss - rss0) / n,
		       (double)(fds - fds0) / n,
		       (c1 - c0) / (double)idle_s * 100);
		fflush(stdout);
	}
	for (int i = 0; i < n; i++) {
		if (sub[i] != NULL) {
			if (v->monitor) {
				zmq_socket_monitor(sub[i], NULL, 0);
			}
			zmq_close(sub[i]);
		}
		if (mon[i] != NULL) {
			zmq_close(mon[i]);
		}
	}
	if (first != NULL) {
		zmq_close(first);
	}
	zmq_ctx_term(ctx);
	free(sub);
	free(mon);
	return ok;
}

int
main(int argc, char **argv)
{
	int n = 2000, idle = 2;
	static const struct option opts[] = {
	    {"sockets", required_argument, NULL, 'n'},
	    {"idle", required_argument, NULL, 'i'},
	    {NULL, 0, NULL, 0},
	};
	for (int o; (o = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
		switch (o) {
		case 'n':
			n = atoi(optarg);
			break;
		case 'i':
			idle = atoi(optarg);
			break;
		default:
			fprintf(stderr,
				"usage: bench_zmq_sockets [--sockets N] "
				"[--idle S]\n");
			return 2;
		}
	}
	if (n < 1 || idle < 1) {
		fprintf(stderr, "bench_zmq_sockets: --sockets >= 1, --idle >= "
				"1\n");
		return 2;
	}
	struct rlimit lim;
	getrlimit(RLIMIT_NOFILE, &lim);
	lim.rlim_cur = lim.rlim_max;
	setrlimit(RLIMIT_NOFILE, &lim);
	int major, minor, patch;
	zmq_version(&major, &minor, &patch);
	printf("bench_zmq_sockets: libzmq %d.%d.%d, open-file limit %llu\n",
	       major, minor, patch, (unsigned long long)lim.rlim_cur);
	static const variant vs[] = {
	    {"sub", false, 1, 100},
	    {"sub+monitor", true, 1, 100},
	    {"io-threads=2", true, 2, 100},
	    {"ivl=ceiling", true, 1, 30000},
	};
	bool ok = true;
	for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); i++) {
		/* each in a process of its own: memory freed by one variant
		 * and kept by the allocator would make the next look cheap */
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			_exit(measure(&vs[i], n, idle) ? 0 : 1);
		}
		int st = 0;
		ok = pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
		     WEXITSTATUS(st) == 0 && ok;
	}
	return ok ? 0 : 1;
}
