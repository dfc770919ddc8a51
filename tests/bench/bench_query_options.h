/*
 * bench_query_options.h - bench_query's command line (the comment at the
 * top of bench_query.c says what each option means) and the names of the
 * query kinds, answer forms and request body forms it takes.
 */
#ifndef KVI_TESTS_BENCH_QUERY_OPTIONS_H
#define KVI_TESTS_BENCH_QUERY_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#define BQ_MAX_LIST 8 /* numbers of connections */
#define BQ_KINDS    3
#define BQ_FORMS    2
#define BQ_BODIES   2 /* request body forms */
#define BQ_JSON     0 /* bq_body_names[BQ_JSON] */
#define BQ_PACKED   1

/* "trace", "100", "1000" */
extern const char *const bq_kind_names[BQ_KINDS];
/* "full", "top8" */
extern const char *const bq_form_names[BQ_FORMS];
/* "json", "packed" */
extern const char *const bq_body_names[BQ_BODIES];

typedef struct bq_options {
	int pods;
	double entries;
	double seconds;
	int conns[BQ_MAX_LIST];
	int n_conns;
	bool kind[BQ_KINDS], form[BQ_FORMS], body[BQ_BODIES];
	bool redis, ipc;
	const char *out;
	int http_threads;
	size_t bodies, check;
} bq_options;

/* bq_options_parse fills *o from argv, defaults first; it exits with 2,
 * saying where the usage is, on an option it does not take. */
void bq_options_parse(int argc, char **argv, bq_options *o);

#endif /* KVI_TESTS_BENCH_QUERY_OPTIONS_H */
