/*
 * bench_httpd.c - requests per second of common/httpd with a trivial JSON
 * handler, with 1 and then 2 loop threads.
 *
 * The load comes from libcurl in this process: --client-threads threads,
 * each driving its share of --conns keep-alive connections with curl multi
 * and sending the next request on a connection as soon as its previous
 * answer arrived. Client and server share the machine's cores, so the
 * figures are a floor for the server alone; run a dedicated load generator
 * (wrk, h2load) from another host for absolute numbers.
 *
 *   bench_httpd [--conns 64] [--seconds 3] [--client-threads 1]
 *               [--deferred]
 *
 * --deferred answers every request from a separate replier thread instead
 * of inline, which measures the cross-thread reply path the coordinator
 * uses.
 *
 * Besides requests per second it prints the CPU time the loop threads
 * spent per request (their own CPU clocks, so other load on the machine
 * does not inflate it) and the requests one fully busy loop thread would
 * serve at that cost.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "httpd.h"

typedef struct options {
	int conns;
	double seconds;
	int client_threads;
	bool deferred;
} options;

typedef struct client {
	pthread_t thread;
	uint16_t port;
	int conns;
	double warmup_end;
	double end;
	uint64_t done; /* answered 200 after the warm-up */
	uint64_t errors;
} client;

/* The replier of --deferred: a queue drained by one thread. */
typedef struct replier {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	kvi_http_req **q;
	size_t n;
	size_t cap;
	bool quit;
} replier;

static replier rep = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

/* The loop threads seen by the handler, to read their CPU clocks. */
static pthread_mutex_t loops_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_t loops[KVI_HTTPD_MAX_THREADS];
static int n_loops;
static _Atomic uint64_t handled; /* every request, warm-up included */
static _Thread_local bool loop_seen;

static void
loop_note(void)
{
	atomic_fetch_add_explicit(&handled, 1, memory_order_relaxed);
	if (loop_seen) {
		return;
	}
	loop_seen = true;
	pthread_mutex_lock(&loops_mu);
	loops[n_loops++] = pthread_self();
	pthread_mutex_unlock(&loops_mu);
}

/* loops_cpu_s returns the CPU time the loop threads used so far. */
static double
loops_cpu_s(void)
{
	double total = 0;
	pthread_mutex_lock(&loops_mu);
	for (int i = 0; i < n_loops; i++) {
		clockid_t cid;
		struct timespec ts;
		if (pthread_getcpuclockid(loops[i], &cid) == 0 &&
		    clock_gettime(cid, &ts) == 0) {
			total += (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
		}
	}
	pthread_mutex_unlock(&loops_mu);
	return total;
}

static double
now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
reply_ok(kvi_http_req *req)
{
	kvi_http_reply_json(req, 200, json_pack("{s:b}", "ok", 1));
}

static void
h_inline(void *arg, kvi_http_req *req)
{
	(void)arg;
	loop_note();
	reply_ok(req);
}

static void
h_deferred(void *arg, kvi_http_req *req)
{
	(void)arg;
	loop_note();
	pthread_mutex_lock(&rep.mu);
	if (rep.n == rep.cap) {
		rep.cap = rep.cap ? rep.cap * 2 : 256;
		rep.q = kvi_reallocarray(rep.q, rep.cap, sizeof(*rep.q));
	}
	rep.q[rep.n++] = req;
	pthread_cond_signal(&rep.cv);
	pthread_mutex_unlock(&rep.mu);
}

static void *
replier_main(void *arg)
{
	(void)arg;
	kvi_http_req *batch[256];
	pthread_mutex_lock(&rep.mu);
	while (!rep.quit || rep.n > 0) {
		if (rep.n == 0) {
			pthread_cond_wait(&rep.cv, &rep.mu);
			continue;
		}
		size_t n = rep.n < 256 ? rep.n : 256;
		rep.n -= n;
		memcpy(batch, rep.q + rep.n, n * sizeof(*batch));
		pthread_mutex_unlock(&rep.mu);
		for (size_t i = 0; i < n; i++) {
			reply_ok(batch[i]);
		}
		pthread_mutex_lock(&rep.mu);
	}
	pthread_mutex_unlock(&rep.mu);
	return NULL;
}

static size_t
discard(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

static void *
client_main(void *arg)
{
	client *c = arg;
	char url[128];
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/bench", c->port);
	CURLM *m = curl_multi_init();
	curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)c->conns);
	CURL **e = kvi_calloc((size_t)c->conns, sizeof(*e));
	for (int i = 0; i < c->conns; i++) {
		e[i] = curl_easy_init();
		curl_easy_setopt(e[i], CURLOPT_URL, url);
		curl_easy_setopt(e[i], CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(e[i], CURLOPT_WRITEFUNCTION, discard);
		curl_multi_add_handle(m, e[i]);
	}
	int running = 1;
	double now = now_s();
	while (now < c->end) {
		curl_multi_perform(m, &running);
		CURLMsg *msg;
		int left;
		while ((msg = curl_multi_info_read(m, &left)) != NULL) {
			if (msg->msg != CURLMSG_DONE) {
				continue;
			}
			CURL *h = msg->easy_handle;
			long status = 0;
			curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
			bool ok = msg->data.result == CURLE_OK && status == 200;
			if (now >= c->warmup_end) {
				if (ok) {
					c->done++;
				} else {
					c->errors++;
				}
			}
			/* the same handle again: it reuses its connection */
			curl_multi_remove_handle(m, h);
			curl_multi_add_handle(m, h);
		}
		curl_multi_poll(m, NULL, 0, 10, NULL);
		now = now_s();
	}
	for (int i = 0; i < c->conns; i++) {
		curl_multi_remove_handle(m, e[i]);
		curl_easy_cleanup(e[i]);
	}
	kvi_free(e);
	curl_multi_cleanup(m);
	return NULL;
}

static int
run(const options *o, int loop_threads)
{
	kvi_httpd *h = kvi_httpd_alloc(NULL);
	kvi_httpd_route(h, "GET", "/bench", o->deferred ? h_deferred : h_inline,
			NULL);
	char err[256];
	if (kvi_httpd_start(h, "127.0.0.1:0", loop_threads, err, sizeof(err)) !=
	    KVI_OK) {
		fprintf(stderr, "bench_httpd: %s\n", err);
		kvi_httpd_free(h);
		return 1;
	}
	pthread_t rt;
	rep.quit = false;
	if (o->deferred) {
		pthread_create(&rt, NULL, replier_main, NULL);
	}
	const double warmup = 0.5;
	double start = now_s();
	client *cs = kvi_calloc((size_t)o->client_threads, sizeof(*cs));
	for (int i = 0; i < o->client_threads; i++) {
		cs[i].port = kvi_httpd_port(h);
		cs[i].conns = o->conns / o->client_threads +
			      (i < o->conns % o->client_threads);
		cs[i].warmup_end = start + warmup;
		cs[i].end = start + warmup + o->seconds;
		pthread_create(&cs[i].thread, NULL, client_main, &cs[i]);
	}
	uint64_t done = 0, errors = 0;
	for (int i = 0; i < o->client_threads; i++) {
		pthread_join(cs[i].thread, NULL);
		done += cs[i].done;
		errors += cs[i].errors;
	}
	kvi_free(cs);
	/* before the loop threads exit */
	double cpu = loops_cpu_s();
	uint64_t all = atomic_load(&handled);
	kvi_httpd_free(h);
	if (o->deferred) {
		pthread_mutex_lock(&rep.mu);
		rep.quit = true;
		pthread_cond_signal(&rep.cv);
		pthread_mutex_unlock(&rep.mu);
		pthread_join(rt, NULL);
	}
	double us = all > 0 ? cpu * 1e6 / (double)all : 0;
	printf("loop_threads=%d conns=%d client_threads=%d reply=%s "
	       "seconds=%.1f requests=%llu errors=%llu req_per_s=%.0f "
	       "loop_cpu_us_per_req=%.1f req_per_loop_cpu_s=%.0f\n",
	       loop_threads, o->conns, o->client_threads,
	       o->deferred ? "deferred" : "inline", o->seconds,
	       (unsigned long long)done, (unsigned long long)errors,
	       (double)done / o->seconds, us, us > 0 ? 1e6 / us : 0);
	pthread_mutex_lock(&loops_mu);
	n_loops = 0;
	pthread_mutex_unlock(&loops_mu);
	atomic_store(&handled, 0);
	return errors > 0;
}

static int
usage(void)
{
	fprintf(stderr, "usage: bench_httpd [--conns N] [--seconds S] "
			"[--client-threads C] [--deferred]\n");
	return 2;
}

int
main(int argc, char **argv)
{
	options o = {.conns = 64, .seconds = 3, .client_threads = 1};
	for (int i = 1; i < argc; i++) {
		bool has = i + 1 < argc;
		if (strcmp(argv[i], "--conns") == 0 && has) {
			o.conns = atoi(argv[++i]);
		} else if (strcmp(argv[i], "--seconds") == 0 && has) {
			o.seconds = atof(argv[++i]);
		} else if (strcmp(argv[i], "--client-threads") == 0 && has) {
			o.client_threads = atoi(argv[++i]);
		} else if (strcmp(argv[i], "--deferred") == 0) {
			o.deferred = true;
		} else {
			return usage();
		}
	}
	if (o.conns < 1 || o.seconds <= 0 || o.client_threads < 1 ||
	    o.client_threads > o.conns) {
		return usage();
	}
	curl_global_init(CURL_GLOBAL_ALL);
	int rc = run(&o, 1) | run(&o, 2);
	curl_global_cleanup();
	kvi_free(rep.q);
	return rc;
}
