/*
 * kvindexctl - the operator's client of the coordinator's HTTP API:
 *
 *   kvindexctl [--coordinator URL] [--token-file FILE] COMMAND [ARGS]
 *
 * main reads the program's flags up to the command, finds the command
 * (ctl_cmd.h), reads its flags and arguments, the coordinator's URL
 * (flag, else $KVINDEX_COORDINATOR, else http://127.0.0.1:8080) and, for
 * a command that sends it, the admin token (from --token-file, else
 * $KVINDEX_TOKEN_FILE, else none: a coordinator without an admin token),
 * then runs the command and exits with its status (ctl_exit).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cli.h"
#include "ctl_cmd.h"
#include "ctl_http.h"

#define CTL_DEFAULT_COORDINATOR "http://127.0.0.1:8080"
#define CTL_TOKEN_MAX           4096 /* as the coordinator reads its own */

typedef struct ctl_opts {
	const char *coordinator;
	const char *token_file;
	long timeout_ms;
} ctl_opts;

static const ctl_opts ctl_defaults = {.timeout_ms = 30000};

static const kvi_flag ctl_flag[] = {
    {"coordinator", "URL", "the coordinator's HTTP API",
     KVI_FLAG_STR(ctl_opts, coordinator),
     .def = "$KVINDEX_COORDINATOR, else " CTL_DEFAULT_COORDINATOR},
    {"token-file", "FILE",
     "the admin token (one word), sent as Authorization: Bearer by the "
     "commands of /admin, register and unregister; a follower's redirect "
     "to the leader is followed with it",
     KVI_FLAG_STR(ctl_opts, token_file),
     .def = "$KVINDEX_TOKEN_FILE, else none"},
    {"timeout-ms", "N", "each request, whole",
     KVI_FLAG_INT(ctl_opts, timeout_ms, 1, 3600000)},
    KVI_FLAG_NOTE("Exit status: 0 done; 1 the API answered with an error "
		  "(its message on standard error); 2 a usage error, or a "
		  "file named that cannot be read or is not what it must "
		  "be (the token file too); 3 the coordinator could not be "
		  "reached."),
};

static const ctl_cmd *const ctl_cmds[] = {
    &ctl_cmd_status,     &ctl_cmd_workers,      &ctl_cmd_query,
    &ctl_cmd_routed,     &ctl_cmd_register,     &ctl_cmd_unregister,
    &ctl_cmd_shards_add, &ctl_cmd_shards_drain, &ctl_cmd_move,
    &ctl_cmd_rebalance,  &ctl_cmd_moves,
};
#define N_CMDS (sizeof(ctl_cmds) / sizeof(ctl_cmds[0]))

static const kvi_flags *const ctl_cmd_flags[N_CMDS] = {
    &ctl_cmd_status.flags,     &ctl_cmd_workers.flags,
    &ctl_cmd_query.flags,      &ctl_cmd_routed.flags,
    &ctl_cmd_register.flags,   &ctl_cmd_unregister.flags,
    &ctl_cmd_shards_add.flags, &ctl_cmd_shards_drain.flags,
    &ctl_cmd_move.flags,       &ctl_cmd_rebalance.flags,
    &ctl_cmd_moves.flags,
};

static const kvi_flags ctl_flags = {
    .prog = "kvindexctl",
    .synopsis = "[--coordinator URL] [--token-file FILE] COMMAND [ARGS]",
    .summary = "The operator's client of kvindex-coordinator's HTTP API: "
	       "the cluster's state, queries, registrations and the admin "
	       "commands, as tables or as the API's own JSON (--json).",
    .flag = ctl_flag,
    .n = sizeof(ctl_flag) / sizeof(ctl_flag[0]),
    .defaults = &ctl_defaults,
    .size = sizeof(ctl_opts),
    .commands = ctl_cmd_flags,
    .n_commands = N_CMDS,
};

/* ctl_words says how many of argv[0..argc) spell the words of cmd (one
 * or two: "status", "shards add"); 0 when they do not. */
static int
ctl_words(const ctl_cmd *cmd, char **argv, int argc)
{
	const char *w = kvi_flags_command(&ctl_flags, &cmd->flags);
	int used = 0;
	while (*w != '\0') {
		size_t len = strcspn(w, " ");
		if (used == argc || strlen(argv[used]) != len ||
		    strncmp(argv[used], w, len) != 0) {
			return 0;
		}
		used++;
		w += len + (w[len] == ' ');
	}
	return used;
}

/* ctl_find returns the command argv[0..] names and its words in *used,
 * or NULL having said why on standard error. */
static const ctl_cmd *
ctl_find(char **argv, int argc, int *used)
{
	for (size_t i = 0; i < N_CMDS; i++) {
		if ((*used = ctl_words(ctl_cmds[i], argv, argc)) > 0) {
			return ctl_cmds[i];
		}
	}
	fprintf(stderr, "kvindexctl: %s is not a command; they are:", argv[0]);
	for (size_t i = 0; i < N_CMDS; i++) {
		fprintf(stderr, "%s %s", i ? "," : "",
			kvi_flags_command(&ctl_flags, &ctl_cmds[i]->flags));
	}
	fputc('\n', stderr);
	return NULL;
}

/* ctl_connect makes the client of the coordinator o names, with the admin
 * token when cmd sends it. Returns an exit status. */
static int
ctl_connect(const ctl_opts *o, const ctl_cmd *cmd, ctl_http **out)
{
	const char *env = getenv("KVINDEX_COORDINATOR");
	const char *url = o->coordinator != NULL ? o->coordinator
			  : env != NULL && env[0] != '\0'
			      ? env
			      : CTL_DEFAULT_COORDINATOR;
	if (!ctl_http_url_ok(url)) {
		fprintf(stderr,
			"kvindexctl: --coordinator: %s is not an http:// or "
			"https:// URL\n",
			url);
		return CTL_EXIT_USAGE;
	}
	char *base = kvi_strdup(url);
	for (size_t n = strlen(base); n > 0 && base[n - 1] == '/'; n--) {
		base[n - 1] = '\0';
	}
	*out = ctl_http_alloc(base, o->timeout_ms);
	kvi_free(base);
	env = getenv("KVINDEX_TOKEN_FILE");
	const char *file = o->token_file != NULL           ? o->token_file
			   : env != NULL && env[0] != '\0' ? env
							   : NULL;
	if (!cmd->token || file == NULL) {
		return CTL_EXIT_OK;
	}
	char token[CTL_TOKEN_MAX + 1], err[512];
	if (kvi_secret_read(file, token, sizeof(token), err, sizeof(err)) !=
	    KVI_OK) {
		fprintf(stderr, "kvindexctl: token file %s\n", err);
		return CTL_EXIT_USAGE;
	}
	ctl_http_set_token(*out, token);
	return CTL_EXIT_OK;
}

/* ctl_run reads the flags and arguments of cmd (argv[0] its last word)
 * and runs it. */
static int
ctl_run(const ctl_opts *o, const ctl_cmd *cmd, int argc, char **argv)
{
	ctl_args a;
	int first;
	int rc =
	    kvi_flags_parse_args(&cmd->flags, &a, argc, argv, false, &first);
	if (rc != 0) {
		return rc > 0 ? CTL_EXIT_OK : CTL_EXIT_USAGE;
	}
	a.argv = argv + first;
	a.argc = argc - first;
	if (a.argc != cmd->nargs) {
		return ctl_usage(&cmd->flags, "takes %d argument%s, not %d",
				 cmd->nargs, cmd->nargs == 1 ? "" : "s",
				 a.argc);
	}
	ctl_http *h = NULL;
	rc = ctl_connect(o, cmd, &h);
	if (rc == CTL_EXIT_OK) {
		rc = cmd->run(h, &a);
	}
	ctl_http_free(h);
	return rc;
}

int
main(int argc, char **argv)
{
	ctl_opts o;
	int first;
	int rc = kvi_flags_parse_args(&ctl_flags, &o, argc, argv, true, &first);
	if (rc != 0) {
		return rc > 0 ? CTL_EXIT_OK : CTL_EXIT_USAGE;
	}
	if (first == argc) {
		fprintf(stderr,
			"kvindexctl: no command\nusage: kvindexctl %s\n",
			ctl_flags.synopsis);
		return CTL_EXIT_USAGE;
	}
	int used;
	const ctl_cmd *cmd = ctl_find(argv + first, argc - first, &used);
	if (cmd == NULL) {
		return CTL_EXIT_USAGE;
	}
	int last = first + used - 1; /* getopt reads from argv[1] */
	return ctl_run(&o, cmd, argc - last, argv + last);
}
