/*
 * recover_fetch_int.h - what the fetcher thread (recover_fetch.c) and one
 * transfer (recover_xfer.c) share: the transfer, its set-up, its
 * deadlines and its result. A transfer belongs to the fetcher thread from
 * the moment it runs; its callbacks run on that thread, inside
 * curl_multi_perform().
 */
#ifndef KVI_SHARD_RECOVER_FETCH_INT_H
#define KVI_SHARD_RECOVER_FETCH_INT_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>

#include "recover_fetch.h"

/* One fetch, waiting or running. */
typedef struct kvr_xfer {
	struct kvr_xfer *next;
	uint64_t token;
	uint64_t serial;
	uint64_t max_blocks;
	char *url;
	CURL *easy;
	kvr_parser *parser;
	long status;      /* -1 until the first body byte */
	int64_t sent_ms;  /* when the request went out; 0: not yet */
	int64_t heard_ms; /* when a byte of the answer last came; 0: none */
	kvi_err abort;    /* why the transfer was stopped: abort_msg */
	bool cut;         /* stopped after the snippet of an error body */
	uint64_t bytes;   /* body bytes received */
	size_t snippet_len;
	char snippet[KVR_FETCH_SNIPPET_MAX];
	char abort_msg[200];
	char errbuf[CURL_ERROR_SIZE];
} kvr_xfer;

/* kvr_xfer_setup prepares x's easy handle as o says. Returns KVI_EIO
 * when libcurl cannot. */
kvi_err kvr_xfer_setup(const kvr_fetch_opts *o, kvr_xfer *x);

/* kvr_xfer_stop records why x is stopped (the first reason wins) and
 * returns 0, which makes libcurl end the transfer when a callback returns
 * it. */
size_t kvr_xfer_stop(kvr_xfer *x, kvi_err why, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* kvr_xfer_due returns when x passes a deadline the fetcher thread keeps
 * (first byte, idle), or INT64_MAX while none applies (connecting:
 * libcurl's). */
int64_t kvr_xfer_due(const kvr_fetch_opts *o, const kvr_xfer *x);

/* kvr_xfer_result fills r with the outcome of the finished transfer x,
 * moving the parser into it on success. */
void kvr_xfer_result(kvr_xfer *x, CURLcode code, kvr_result *r);

/* kvr_xfer_free frees x, its handle and its parser; NULL is ignored. */
void kvr_xfer_free(kvr_xfer *x);

#endif /* KVI_SHARD_RECOVER_FETCH_INT_H */
