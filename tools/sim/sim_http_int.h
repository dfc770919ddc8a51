/*
 * sim_http_int.h - what the control API's files share (sim_http.c: the
 * servers, the replies, the other routes; sim_http_prefill.c: /prefill,
 * immediate or timed, and /hit). HTTP thread only.
 */
#ifndef KVI_SIM_HTTP_INT_H
#define KVI_SIM_HTTP_INT_H

#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>

#include "sim_engine.h"
#include "sim_http.h"

typedef struct recover_server {
	sim_http *h;
	size_t rank;
	struct evhttp *http;
	struct evhttp_bound_socket *bound;
} recover_server;

/* A /prefill waiting for its request's prefill (timed mode). */
typedef struct pending {
	sim_http *h;
	struct evhttp_request *req; /* NULL once the client went away */
	struct pending *prev, *next;
} pending;

typedef struct metrics_server {
	sim_http *h;
	uint32_t pod;
	struct evhttp *http;
	struct evhttp_bound_socket *bound;
} metrics_server;

struct sim_http {
	struct event_base *base;
	sim_http_config cfg;
	sim_engine *engine;
	sim_rank **ranks;
	size_t n;
	struct evhttp *control;
	recover_server *recover;
	const char *recover_ip;
	metrics_server *metrics; /* per pod */
	const char *metrics_ip;
	/* timed mode */
	pending *waiting; /* replies not sent yet (HTTP thread) */
	int done_fd;      /* the engine signals finished requests */
	struct event *done_ev;
	pthread_mutex_t done_mu;
	sim_job *done_head; /* under done_mu */
	sim_job *done_tail;
};

/* sim_http.c: replies and request fields */
void sim_http_reply_json(struct evhttp_request *req, int code, json_t *v);
void sim_http_reply_error(struct evhttp_request *req, int code,
			  const char *msg);
bool sim_http_json_u64(const json_t *o, const char *key, uint64_t max,
		       uint64_t *out);
bool sim_http_rank_of(const sim_http *h, const json_t *body, size_t *idx);
json_t *sim_http_seq_json(int64_t seq);

/* sim_http_prefill.c */
void sim_http_prefill(sim_http *h, struct evhttp_request *req, json_t *body);
void sim_http_hit(sim_http *h, struct evhttp_request *req, json_t *body);
/* sim_http_done_cb takes the engine's finished timed requests and
 * replies to their clients (the done_fd's event). */
void sim_http_done_cb(evutil_socket_t fd, short what, void *arg);
/* sim_http_job_done is the engine's callback for a finished job. */
void sim_http_job_done(void *arg, sim_job *j);
/* sim_http_pending_release drops the replies still waiting. */
void sim_http_pending_release(sim_http *h, pending *p);

#endif /* KVI_SIM_HTTP_INT_H */
