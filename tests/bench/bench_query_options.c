/*
 * bench_query_options.c - bench_query's command line
 * (bench_query_options.h).
 */
#include "bench_query_options.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const bq_kind_names[BQ_KINDS] = {"trace", "100", "1000"};
const char *const bq_form_names[BQ_FORMS] = {"full", "top8"};
const char *const bq_body_names[BQ_BODIES] = {"json", "packed"};

static void
usage(void)
{
	fprintf(stderr, "see the comment at the top of bench_query.c\n");
	exit(2);
}

static void
parse_conns(bq_options *o, const char *s)
{
	o->n_conns = 0;
	for (char *end; *s != '\0'; s = end + (*end == ',')) {
		long v = strtol(s, &end, 10);
		if (end == s || v < 1 || v > 4096 ||
		    o->n_conns == BQ_MAX_LIST) {
			usage();
		}
		o->conns[o->n_conns++] = (int)v;
	}
}

/* parse_names marks which of names[0..n) the comma list s names. */
static void
parse_names(bool *on, const char *const *names, size_t n, const char *s)
{
	memset(on, 0, n * sizeof(bool));
	while (*s != '\0') {
		size_t len = strcspn(s, ",");
		size_t i = 0;
		while (i < n && (strlen(names[i]) != len ||
				 strncmp(names[i], s, len) != 0)) {
			i++;
		}
		if (i == n) {
			usage();
		}
		on[i] = true;
		s += len + (s[len] == ',');
	}
}

static bool
none(const bool *on, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (on[i]) {
			return false;
		}
	}
	return true;
}

void
bq_options_parse(int argc, char **argv, bq_options *o)
{
	*o = (bq_options){.pods = 100,
			  .entries = 1e6,
			  .seconds = 2,
			  .conns = {1, 4, 16, 64},
			  .n_conns = 4,
			  .kind = {true, true, true},
			  .form = {true, true},
			  .body = {true, true},
			  .redis = true,
			  .http_threads = 2,
			  .bodies = 256,
			  .check = 32};
	static const struct option longopts[] = {
	    {"pods", required_argument, NULL, 'p'},
	    {"entries", required_argument, NULL, 'e'},
	    {"seconds", required_argument, NULL, 's'},
	    {"conns", required_argument, NULL, 'c'},
	    {"queries", required_argument, NULL, 'q'},
	    {"forms", required_argument, NULL, 'f'},
	    {"bodies-form", required_argument, NULL, 'B'},
	    {"no-redis", no_argument, NULL, 'n'},
	    {"shard-url-scheme", required_argument, NULL, 'u'},
	    {"out", required_argument, NULL, 'o'},
	    {"http-threads", required_argument, NULL, 't'},
	    {"bodies", required_argument, NULL, 'b'},
	    {"check", required_argument, NULL, 'k'},
	    {NULL, 0, NULL, 0},
	};
	int ch;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'p':
			o->pods = atoi(optarg);
			break;
		case 'e':
			o->entries = atof(optarg);
			break;
		case 's':
			o->seconds = atof(optarg);
			break;
		case 'c':
			parse_conns(o, optarg);
			break;
		case 'q':
			parse_names(o->kind, bq_kind_names, BQ_KINDS, optarg);
			break;
		case 'f':
			parse_names(o->form, bq_form_names, BQ_FORMS, optarg);
			break;
		case 'B':
			parse_names(o->body, bq_body_names, BQ_BODIES, optarg);
			break;
		case 'n':
			o->redis = false;
			break;
		case 'u':
			if (strcmp(optarg, "tcp") != 0 &&
			    strcmp(optarg, "ipc") != 0) {
				usage();
			}
			o->ipc = strcmp(optarg, "ipc") == 0;
			break;
		case 'o':
			o->out = optarg;
			break;
		case 't':
			o->http_threads = atoi(optarg);
			break;
		case 'b':
			o->bodies = (size_t)atol(optarg);
			break;
		case 'k':
			o->check = (size_t)atol(optarg);
			break;
		default:
			usage();
		}
	}
	if (o->pods < 1 || o->seconds <= 0 || o->http_threads < 1 ||
	    o->bodies < 1 || optind != argc || none(o->kind, BQ_KINDS) ||
	    none(o->form, BQ_FORMS) || none(o->body, BQ_BODIES)) {
		usage();
	}
	o->check = o->check < o->bodies ? o->check : o->bodies;
}
