/*
 * ctl_cmd.h - kvindexctl's commands: what each is (its flag table, its
 * arguments, whether it sends the admin token, the function that runs
 * it) and what they share (a request whose error answers are printed,
 * the pages of GET /workers, the files they read).
 *
 * Every command's flags go into one ctl_args: each command's table names
 * the members it takes. A command returns the exit status of the program
 * (enum ctl_exit), having printed what it has to say: its result on
 * standard output, an error on standard error.
 *
 * With --json a command prints the body of the API's answer as it came
 * (a paged GET /workers: the entries of every page in one array, each as
 * the API wrote it; status: {"leader", "shards", "workers"}, the answers
 * of its three requests); an error answer's body is printed there too,
 * besides its message on standard error.
 */
#ifndef KVI_TOOLS_CTL_CMD_H
#define KVI_TOOLS_CTL_CMD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "cli.h"
#include "ctl_http.h"

/* The exit status of kvindexctl. */
enum ctl_exit {
	CTL_EXIT_OK = 0,
	CTL_EXIT_ANSWER = 1,      /* the API answered with an error */
	CTL_EXIT_USAGE = 2,       /* the command line or a file it names */
	CTL_EXIT_UNREACHABLE = 3, /* no answer from the coordinator */
};

/* The flags and arguments of every command; 0, -1 or NULL: not given. */
typedef struct ctl_args {
	bool json;
	const char *model, *pod, *state;       /* workers, query, routed */
	long limit;                            /* workers: instances a page */
	const char *tokens_file, *hashes_file; /* query, routed */
	long top_k, dp_rank;                   /* query, routed, unregister */
	/* register, unregister */
	const char *name, *ip, *file, *instance_id;
	long block_size, dp_size, dp_start_rank;
	long zmq_port, replay_port, recover_port, metrics_port;
	bool apply;  /* rebalance */
	char **argv; /* the arguments after the flags */
	int argc;
} ctl_args;

extern const ctl_args ctl_args_defaults;

/* Members of a command's kvi_flags. */
#define CTL_FLAGS(table)                                                       \
	.flag = (table), .n = sizeof(table) / sizeof((table)[0]),              \
	.defaults = &ctl_args_defaults, .size = sizeof(ctl_args)

/* ctl_flag_long is the callback of an integer flag whose default is
 * "not given" (-1), which the help must not show as a value: the long
 * at f->off gets the value, in f->min..f->max. */
int ctl_flag_long(const char *prog, const kvi_flag *f, const char *arg,
		  void *opts);

/* An entry's rest for such a flag, member m of ctl_args. */
#define CTL_FLAG_LONG(m, lo, hi)                                               \
	KVI_FLAG_FN(ctl_flag_long), .off = offsetof(ctl_args, m), .min = (lo), \
				    .max = (hi)

/* The --json entry every command has. */
#define CTL_FLAG_JSON                                                          \
	{                                                                      \
		"json", NULL, "print the API's answer, JSON as it came",       \
		    KVI_FLAG_BOOL(ctl_args, json)                              \
	}

typedef struct ctl_cmd {
	kvi_flags flags; /* its prog is "kvindexctl" and the command's words */
	int nargs;       /* the arguments it takes after its flags */
	bool token;      /* it sends the admin token */
	int (*run)(ctl_http *h, const ctl_args *a);
} ctl_cmd;

extern const ctl_cmd ctl_cmd_status, ctl_cmd_workers, ctl_cmd_query,
    ctl_cmd_routed, ctl_cmd_register, ctl_cmd_unregister, ctl_cmd_shards_add,
    ctl_cmd_shards_drain, ctl_cmd_move, ctl_cmd_rebalance, ctl_cmd_moves;

/* ctl_send sends body (taken, NULL: none) to path, and returns the exit
 * status: CTL_EXIT_OK with a 2xx answer, the others having printed why
 * (the API's message, or why the coordinator could not be reached). With
 * json the body of the answer, error or not, is printed as it came and
 * *ans is NULL; without, *ans gets a 2xx answer parsed (json_decref).
 * *r (may be NULL) gets the answer (ctl_resp_fini). */
int ctl_send(ctl_http *h, const char *method, const char *path, json_t *body,
	     bool json, json_t **ans, ctl_resp *r);

/* ctl_send_text is ctl_send with the body as text (NULL: none). */
int ctl_send_text(ctl_http *h, const char *method, const char *path,
		  const char *text, bool json, json_t **ans, ctl_resp *r);

/* The entries of GET /workers, over its pages. */
typedef struct ctl_items {
	char **text;  /* each as the API wrote it */
	json_t **val; /* each parsed */
	size_t n, cap;
} ctl_items;

/* ctl_workers_get fetches GET /workers with model_name model and name pod
 * (NULL: any), limit entries a page, following X-Next-Cursor until the
 * last page, into *out (ctl_items_fini, whatever it returns). Returns an
 * exit status as ctl_send, having printed why (with json, an error
 * answer's body too). */
int ctl_workers_get(ctl_http *h, const char *model, const char *pod, long limit,
		    bool json, ctl_items *out);
void ctl_items_fini(ctl_items *it);

/* ctl_items_join returns the entries of it for which keep[i] (keep NULL:
 * all) as one JSON array's text, "[e0,e1]" (kvi_free). */
char *ctl_items_join(const ctl_items *it, const bool *keep);

/* ctl_read reads the file at path ("-" or NULL: standard input) into *text
 * (NUL-terminated, kvi_free) and *len. Returns CTL_EXIT_OK, or
 * CTL_EXIT_USAGE having said why. */
int ctl_read(const char *path, char **text, size_t *len);

/* ctl_usage says on standard error what is wrong with the command line
 * of cmd, and its synopsis; returns CTL_EXIT_USAGE. */
int ctl_usage(const kvi_flags *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* KVI_TOOLS_CTL_CMD_H */
