/*
 * kvindex-kubeapi - a test Kubernetes API server for pods (README.md).
 *
 * main parses the flags, loads the state file, binds the HTTP server,
 * writes the port file, then runs the event loop until SIGTERM or SIGINT,
 * and frees everything on the way out.
 */
#include <event2/event.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "kube_http.h"
#include "kube_state.h"
#include "kube_store.h"
#include "log.h"

#define DEFAULT_BOOKMARK_MS 1000

static const char usage[] =
    "usage: kvindex-kubeapi [flags]\n"
    "\n"
    "Serves the pods of a Kubernetes API server (core v1 list, get and\n"
    "watch) over plain HTTP, plus a test-only control API under /control/.\n"
    "\n"
    "  --http HOST:PORT      listen address; port 0 = ephemeral\n"
    "                        (127.0.0.1:0)\n"
    "  --port-file PATH      once listening, write {\"url\": ..., \"port\": "
    "N}\n"
    "                        (atomically: PATH.tmp + rename)\n"
    "  --token TOKEN         require \"Authorization: Bearer TOKEN\" on /api\n"
    "  --state FILE          load pods and resourceVersion from FILE at\n"
    "                        start (if it exists) and save them after every\n"
    "                        change\n"
    "  --bookmark-ms N       BOOKMARK period of watches (1000)\n"
    "  --log-file PATH       append the log to PATH (standard error)\n"
    "  --log-level LEVEL     debug, info, warn or error (info)\n"
    "  --help\n";

typedef struct config {
	char host[256];
	int port;
	const char *port_file;
	const char *token;
	const char *state;
	int bookmark_ms;
	const char *log_file;
	kvi_log_level log_level;
} config;

static bool
parse_int(const char *s, int min, int max, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || v < min || v > max) {
		return false;
	}
	*out = (int)v;
	return true;
}

/* parse_addr splits HOST:PORT ("[::1]:PORT" for IPv6). */
static bool
parse_addr(const char *s, config *c)
{
	const char *colon = strrchr(s, ':');
	if (colon == NULL || !parse_int(colon + 1, 0, 65535, &c->port)) {
		return false;
	}
	size_t n = (size_t)(colon - s);
	if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
		s++;
		n -= 2;
	}
	if (n == 0 || n >= sizeof(c->host)) {
		return false;
	}
	memcpy(c->host, s, n);
	c->host[n] = '\0';
	return true;
}

/* parse_flags returns 0 to run, 1 after --help, -1 on a bad flag. */
static int
parse_flags(int argc, char **argv, config *c)
{
	static const struct option opts[] = {
	    {"http", required_argument, NULL, 'H'},
	    {"port-file", required_argument, NULL, 'p'},
	    {"token", required_argument, NULL, 't'},
	    {"state", required_argument, NULL, 's'},
	    {"bookmark-ms", required_argument, NULL, 'b'},
	    {"log-file", required_argument, NULL, 'l'},
	    {"log-level", required_argument, NULL, 'L'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0}};
	*c = (config){.host = "127.0.0.1",
		      .bookmark_ms = DEFAULT_BOOKMARK_MS,
		      .log_level = KVI_LOG_INFO};
	int opt;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		bool ok = true;
		switch (opt) {
		case 'H':
			ok = parse_addr(optarg, c);
			break;
		case 'p':
			c->port_file = optarg;
			break;
		case 't':
			c->token = optarg;
			break;
		case 's':
			c->state = optarg;
			break;
		case 'b':
			ok = parse_int(optarg, 1, 3600000, &c->bookmark_ms);
			break;
		case 'l':
			c->log_file = optarg;
			break;
		case 'L':
			ok = kvi_log_parse_level(optarg, &c->log_level) ==
			     KVI_OK;
			break;
		case 'h':
			return 1;
		default:
			return -1;
		}
		if (!ok) {
			fprintf(stderr, "kvindex-kubeapi: bad value '%s'\n",
				optarg);
			return -1;
		}
	}
	return optind == argc ? 0 : -1;
}

static kvi_err
write_port_file(const config *c, int port)
{
	bool v6 = strchr(c->host, ':') != NULL;
	char url[300];
	snprintf(url, sizeof(url), "http://%s%s%s:%d", v6 ? "[" : "", c->host,
		 v6 ? "]" : "", port);
	json_t *v = json_pack("{s:s,s:i}", "url", url, "port", port);
	char *text = json_dumps(v, JSON_COMPACT);
	json_decref(v);
	kvi_err rv = kube_write_file_atomic(c->port_file, text, strlen(text));
	free(text); /* allocated by jansson */
	return rv;
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	KVI_INFO("quit", "signal=%d", (int)sig);
	event_base_loopexit(arg, NULL);
}

/* serve runs the event loop until SIGTERM or SIGINT. */
static void
serve(struct event_base *base)
{
	struct event *sigterm = evsignal_new(base, SIGTERM, on_signal, base);
	struct event *sigint = evsignal_new(base, SIGINT, on_signal, base);
	event_add(sigterm, NULL);
	event_add(sigint, NULL);
	event_base_dispatch(base);
	event_free(sigterm);
	event_free(sigint);
}

static int
run(const config *c, struct event_base *base, kube_store *store)
{
	if (c->state != NULL) {
		kvi_err rv = kube_state_load(c->state, store);
		if (rv != KVI_OK && rv != KVI_ENOENT) {
			KVI_ERROR("state_load_failed", "path=%s error=%s",
				  c->state, kvi_strerror(rv));
			return 1;
		}
	}
	kube_http_config hc = {.token = c->token,
			       .state_path = c->state,
			       .bookmark_ms = c->bookmark_ms};
	kube_http *http = kube_http_alloc(base, store, &hc);
	int port;
	int rc = 1;
	if (kube_http_bind(http, c->host, c->port, &port) != KVI_OK) {
		KVI_ERROR("bind_failed", "host=%s port=%d", c->host, c->port);
		goto out;
	}
	if (c->port_file != NULL && write_port_file(c, port) != KVI_OK) {
		KVI_ERROR("port_file_failed", "path=%s", c->port_file);
		goto out;
	}
	KVI_INFO("started", "host=%s port=%d rv=%llu auth=%d", c->host, port,
		 (unsigned long long)kube_store_rv(store), c->token != NULL);
	serve(base);
	rc = 0;
out:
	kube_http_free(http);
	return rc;
}

int
main(int argc, char **argv)
{
	config c;
	int parsed = parse_flags(argc, argv, &c);
	if (parsed != 0) {
		fputs(usage, parsed > 0 ? stdout : stderr);
		return parsed > 0 ? 0 : 2;
	}
	int log_fd = kvi_log_open_fd(c.log_file);
	if (log_fd < 0) {
		return 1;
	}
	kvi_log_setup("kubeapi", c.log_level, log_fd);
	signal(SIGPIPE, SIG_IGN);
	srand((unsigned)time(NULL) ^ (unsigned)getpid());
	struct event_base *base = event_base_new();
	if (base == NULL) {
		KVI_ERROR("event_base_failed", "%s", "");
		return 1;
	}
	kube_store *store = kube_store_alloc();
	int rc = run(&c, base, store);
	KVI_INFO("exit", "code=%d", rc);
	kube_store_free(store);
	event_base_free(base);
	libevent_global_shutdown();
	if (log_fd > 2) {
		close(log_fd);
	}
	return rc;
}
