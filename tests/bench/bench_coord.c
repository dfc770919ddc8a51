/*
 * bench_coord - /query end to end through HTTP: a real coordinator in
 * front of two real shards, holding the index of a simulated fleet.
 *
 * Starts kvindex-sim (--pods P with DP=2: 2P listeners, the conversation
 * trace with 32 blocks of 16 tokens per hash id, i.e. the trace's 512-token
 * blocks), two kvindex-shard processes and kvindex-coordinator (reading the
 * simulator's layout as its discovery file), the cluster of
 * bench_query_cluster.h: it runs the load until the shards hold --entries
 * (block, listener) entries, pauses it, waits until every listener has
 * applied all its rank published, and then sends /query requests built from the
 * conversation trace over persistent HTTP/1.1 connections, each connection a
 * closed loop (a request, its answer, the next). For 100- and 1,000-block
 * queries (a trace request's first blocks, padded with fresh tokens when
 * shorter, as a long prompt with a cached prefix is) it prints latency p50/p99
 * on one connection, then throughput and latency with --conns connections; then
 * the same for 1,000-block prompts of fresh tokens, which match no listener:
 * the cost of the query path without the answer's size. The conversation trace
 * opens every request with the same system prompt, so every listener matches a
 * trace query and its answer names all of them.
 *
 *   bench_coord [--pods P] [--entries N] [--seconds S] [--conns C]
 *               [--http-threads T] [--top-k K] [--query-batch-max N]
 *
 * --top-k K asks every query for the K best listeners only
 * (docs/api.md#post-query); --query-batch-max N is passed to the coordinator
 * (1: no coalescing).
 *
 * Every process shares this machine's cores with the load generator.
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"
#include "bench_query_cluster.h"
#include "bench_stream.h"
#include "kvitest.h"
#include "sim_load.h"

#define TRACE KVI_DATA_DIR "/traces/conversation_trace.jsonl"
#define BS    16
#define BPI   32 /* blocks per trace hash id */
#define NQ    2000

typedef struct bench {
	int port;
	char **bodies;
	size_t *lens;
	size_t n;
	int seconds;
	int top_k; /* 0: full answers */
} bench;

typedef struct worker {
	bench *b;
	pthread_t t;
	int idx;
	uint64_t *lat_ns;
	size_t n, cap;
	size_t errors, matched;
} worker;

static int
dial(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		perror("connect");
		exit(1);
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void
write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w <= 0) {
			perror("write");
			exit(1);
		}
		p += w;
		n -= (size_t)w;
	}
}

/* roundtrip sends one /query and reads the answer; returns the status and
 * whether the answer named a best listener. */
static int
roundtrip(int fd, const char *body, size_t len, bool *match, char *buf,
	  size_t cap)
{
	char head[256];
	int h = snprintf(head, sizeof(head),
			 "POST /query HTTP/1.1\r\nHost: bench\r\n"
			 "Content-Type: application/json\r\n"
			 "Content-Length: %zu\r\n\r\n",
			 len);
	write_all(fd, head, (size_t)h);
	write_all(fd, body, len);
	size_t got = 0;
	char *end = NULL;
	while (end == NULL) {
		ssize_t r = read(fd, buf + got, cap - 1 - got);
		if (r <= 0) {
			fprintf(stderr, "connection closed\n");
			exit(1);
		}
		got += (size_t)r;
		buf[got] = '\0';
		end = strstr(buf, "\r\n\r\n");
	}
	int status = atoi(buf + 9);
	const char *cl = strcasestr(buf, "Content-Length:");
	size_t blen = cl ? strtoul(cl + 15, NULL, 10) : 0;
	size_t hlen = (size_t)(end + 4 - buf);
	while (got < hlen + blen) {
		if (got >= cap - 1) {
			fprintf(stderr, "answer too large\n");
			exit(1);
		}
		ssize_t r = read(fd, buf + got, cap - 1 - got);
		if (r <= 0) {
			fprintf(stderr, "connection closed\n");
			exit(1);
		}
		got += (size_t)r;
	}
	buf[got] = '\0';
	/* "best" comes last but for "partial" and "shards" */
	size_t tail = blen > 160 ? blen - 160 : 0;
	*match = strstr(buf + hlen + tail, "\"best\":null") == NULL;
	return status;
}

static void *
work(void *arg)
{
	worker *w = arg;
	bench *b = w->b;
	int fd = dial(b->port);
	size_t cap = 1 << 20;
	char *buf = kvi_malloc(cap);
	uint64_t stop = bs_now_ns() + (uint64_t)b->seconds * 1000000000u;
	size_t i = (size_t)w->idx * 7919;
	while (bs_now_ns() < stop) {
		size_t q = i++ % b->n;
		bool match;
		uint64_t t0 = bs_now_ns();
		int st =
		    roundtrip(fd, b->bodies[q], b->lens[q], &match, buf, cap);
		uint64_t t1 = bs_now_ns();
		if (w->n == w->cap) {
			w->cap = w->cap ? w->cap * 2 : 4096;
			w->lat_ns = kvi_reallocarray(w->lat_ns, w->cap,
						     sizeof(*w->lat_ns));
		}
		w->lat_ns[w->n++] = t1 - t0;
		w->errors += st != 200;
		w->matched += match;
	}
	close(fd);
	kvi_free(buf);
	return NULL;
}

static void
run(bench *b, int conns, const char *label)
{
	worker *w = kvi_calloc((size_t)conns, sizeof(*w));
	uint64_t t0 = bs_now_ns();
	for (int i = 0; i < conns; i++) {
		w[i].b = b;
		w[i].idx = i;
		pthread_create(&w[i].t, NULL, work, &w[i]);
	}
	size_t total = 0, errors = 0, matched = 0;
	for (int i = 0; i < conns; i++) {
		pthread_join(w[i].t, NULL);
		total += w[i].n;
		errors += w[i].errors;
		matched += w[i].matched;
	}
	double secs = (double)(bs_now_ns() - t0) / 1e9;
	uint64_t *all = kvi_calloc(total + 1, sizeof(*all));
	size_t k = 0;
	for (int i = 0; i < conns; i++) {
		memcpy(all + k, w[i].lat_ns, w[i].n * sizeof(*all));
		k += w[i].n;
		kvi_free(w[i].lat_ns);
	}
	qsort(all, total, sizeof(*all), bs_cmp_u64);
	double p50 = total ? (double)all[total / 2] / 1e3 : 0;
	double p99 = total ? (double)all[total * 99 / 100] / 1e3 : 0;
	printf("coord: %s conns=%d queries=%zu errors=%zu matched=%.1f%% "
	       "qps=%.0f p50_us=%.0f p99_us=%.0f\n",
	       label, conns, total, errors,
	       total ? 100.0 * (double)matched / (double)total : 0,
	       (double)total / secs, p50, p99);
	kvi_free(all);
	kvi_free(w);
}

/* bodies builds NQ /query bodies of exactly blocks blocks from the trace. */
static void
bodies(bench *b, uint32_t blocks, bool fresh)
{
	sim_load_config lc = {.trace_path = TRACE,
			      .block_size = BS,
			      .blocks_per_id = BPI,
			      .copies = 1,
			      .requests = NQ};
	sim_load *load;
	char err[256];
	if (sim_load_open(&lc, &load, err, sizeof(err)) != KVI_OK) {
		fprintf(stderr, "trace: %s\n", err);
		exit(1);
	}
	b->n = 0;
	b->bodies = kvi_calloc(NQ, sizeof(char *));
	b->lens = kvi_calloc(NQ, sizeof(size_t));
	const uint32_t *tokens;
	uint32_t nb;
	uint32_t rnd = 7;
	size_t cap = (size_t)blocks * BS * 12 + 128;
	while (sim_load_next(load, &tokens, &nb) && b->n < NQ) {
		char *s = kvi_malloc(cap);
		size_t len = (size_t)snprintf(
		    s, cap, "{\"model_name\":\"sim-model\",\"token_ids\":[");
		for (uint32_t i = 0; i < blocks * BS; i++) {
			uint32_t t = i < nb * BS && !fresh
					 ? tokens[i]
					 : (rnd = rnd * 1103515245u + 12345u) %
					       SIM_VOCAB;
			len += (size_t)snprintf(s + len, cap - len, "%s%u",
						i ? "," : "", t);
		}
		len += (size_t)snprintf(s + len, cap - len, "]");
		if (b->top_k > 0) {
			len += (size_t)snprintf(s + len, cap - len,
						",\"top_k\":%d", b->top_k);
		}
		len += (size_t)snprintf(s + len, cap - len, "}");
		b->bodies[b->n] = s;
		b->lens[b->n] = len;
		b->n++;
	}
	sim_load_free(load);
}

static void
bodies_free(bench *b)
{
	for (size_t i = 0; i < b->n; i++) {
		kvi_free(b->bodies[i]);
	}
	kvi_free(b->bodies);
	kvi_free(b->lens);
}

int
main(int argc, char **argv)
{
	int pods = 500, seconds = 10, conns = 4, threads = 2, top_k = 0;
	const char *batch = "64";
	double want = 10e6;
	static const struct option longopts[] = {
	    {"pods", required_argument, NULL, 'p'},
	    {"entries", required_argument, NULL, 'e'},
	    {"seconds", required_argument, NULL, 's'},
	    {"conns", required_argument, NULL, 'c'},
	    {"http-threads", required_argument, NULL, 't'},
	    {"top-k", required_argument, NULL, 'k'},
	    {"query-batch-max", required_argument, NULL, 'b'},
	    {NULL, 0, NULL, 0},
	};
	int ch;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'p':
			pods = atoi(optarg);
			break;
		case 'e':
			want = atof(optarg);
			break;
		case 's':
			seconds = atoi(optarg);
			break;
		case 'c':
			conns = atoi(optarg);
			break;
		case 't':
			threads = atoi(optarg);
			break;
		case 'k':
			top_k = atoi(optarg);
			break;
		case 'b':
			batch = optarg;
			break;
		default:
			fprintf(stderr, "see the comment at the top of "
					"bench_coord.c\n");
			return 2;
		}
	}
	const char *coord_args[] = {"--query-batch-max", batch, NULL};
	bq_cluster_config cc = {.pods = pods,
				.entries = want,
				.http_threads = threads,
				.trace = TRACE,
				.block_size = BS,
				.blocks_per_id = BPI,
				.fill_timeout_s = 600,
				.coord_args = coord_args};
	char *dir;
	kvt_tmpdir_make("kvi-bench", &dir);
	bq_cluster cl;
	if (bq_cluster_start(&cc, dir, &cl) != KVI_OK) {
		fprintf(stderr, "the cluster did not start or fill; see %s\n",
			dir);
		return 1;
	}
	printf("coord: listeners=%d entries=%.0f fill_seconds=%.1f "
	       "http_threads=%d\n",
	       2 * pods, cl.entries, cl.fill_seconds, threads);
	fflush(stdout);
	bench b = {.port = cl.port, .seconds = seconds, .top_k = top_k};

	/* trace requests (a prefix every listener holds, and more), then
	 * prompts no listener holds: the cost of the machinery alone */
	static const uint32_t sizes[] = {100, 1000, 1000};
	for (size_t s = 0; s < 3; s++) {
		char label[48];
		bool fresh = s == 2;
		snprintf(label, sizeof(label), "blocks=%u%s", sizes[s],
			 fresh ? ",no_match" : "");
		bodies(&b, sizes[s], fresh);
		run(&b, 1, label);
		fflush(stdout);
		run(&b, conns, label);
		fflush(stdout);
		bodies_free(&b);
	}

	bq_cluster_stop(&cl);
	kvt_tmpdir_remove(dir);
	free(dir);
	return 0;
}
