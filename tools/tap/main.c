/*
 * kvindex-tap - prints what an engine rank publishes, one JSON line per
 * batch.
 *
 * It subscribes to a rank's live event endpoint exactly as a shard does
 * (SUB, all topics or a prefix, unbounded receive queue), decodes every
 * batch with the shard's decoder and prints it with its seq; every seq gap
 * and every seq that goes backwards (an engine restart) gets a line of its
 * own. With --replay it closes gaps from the rank's replay socket, as a
 * shard would. With --hex it decodes hex payloads, one per line of standard
 * input, which is how to check a captured payload by hand.
 *
 * An event the decoder had to skip is printed as what it is,
 * {"type": "skipped", "reason"}, and its batch's line says why
 * ("skip_error"); the exit status is 1 when any batch printed was not
 * decoded whole.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "frame.h"
#include "wire.h"
#include "wire_json.h"

#define TAP_MAX_FRAMES 8

typedef struct tap_opts {
	const char *endpoint;
	const char *replay;
	const char *topic;
	long long count;   /* batches to print before exiting; 0 = all */
	long idle_exit_ms; /* exit after this long without a message */
	long replay_timeout_ms;
	bool has_from_seq;
	uint64_t from_seq;
	bool hex;
} tap_opts;

typedef struct tap {
	tap_opts o;
	void *zctx;
	void *sub;
	kvi_decoder *dec;
	bool started;
	uint64_t expected;  /* next seq to print, once started */
	uint64_t last_live; /* last seq received live */
	long long printed;
	long long failed; /* batches not decoded, or with skipped events */
} tap;

static volatile sig_atomic_t tap_stop;

static void
tap_on_signal(int sig)
{
	(void)sig;
	tap_stop = 1;
}

static void
tap_print(json_t *line)
{
	char *s = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (s != NULL) {
		fputs(s, stdout);
		fputc('\n', stdout);
		fflush(stdout);
		free(s);
	}
	json_decref(line);
}

/* tap_note_skipped adds to a decoded batch's line why its first skipped
 * event was skipped, and counts the batch as failed. */
static void
tap_note_skipped(tap *t, const kvi_batch *b, json_t *line)
{
	if (b->n_skipped == 0) {
		return;
	}
	json_object_set_new(line, "skipped", json_integer(b->n_skipped));
	json_object_set_new(line, "skip_error",
			    json_string(kvi_decoder_skip_error(t->dec)));
	t->failed++;
}

/* tap_emit decodes one payload and prints it, or its error. Returns true
 * when it decoded. */
static bool
tap_emit(tap *t, const char *source, const kvi_msg *m)
{
	kvi_batch b;
	json_t *line;
	bool ok = kvi_decoder_decode(t->dec, m->payload.ptr, m->payload.len,
				     &b) == KVI_OK;
	if (ok) {
		line = kvi_batch_to_json(&b);
		tap_note_skipped(t, &b, line);
		ok = b.n_skipped == 0;
	} else {
		line = json_object();
		json_object_set_new(line, "error",
				    json_string(kvi_decoder_error(t->dec)));
		t->failed++;
	}
	json_t *head = json_object();
	json_object_set_new(head, "seq", json_integer((json_int_t)m->seq));
	json_object_set_new(head, "source", json_string(source));
	json_object_set_new(
	    head, "topic",
	    json_stringn(m->topic.ptr ? m->topic.ptr : "", m->topic.len));
	json_object_update(head, line);
	json_decref(line);
	tap_print(head);
	t->printed++;
	return ok;
}

static void
tap_note(const char *what, uint64_t expected, uint64_t got)
{
	json_t *o = json_object();
	json_t *d = json_object();
	json_object_set_new(d, "expected", json_integer((json_int_t)expected));
	json_object_set_new(d, "got", json_integer((json_int_t)got));
	json_object_set_new(o, what, d);
	tap_print(o);
}

static void
tap_close_frames(zmq_msg_t *msgs, int n)
{
	for (int i = 0; i < n && i < TAP_MAX_FRAMES; i++) {
		zmq_msg_close(&msgs[i]);
	}
}

/* tap_recv_frames receives one multipart message: the first TAP_MAX_FRAMES
 * frames into msgs/frames, the rest discarded. Returns the number of frames
 * the message had, or -1 (errno set) when nothing was received. */
static int
tap_recv_frames(void *sock, zmq_msg_t *msgs, kvi_frame *frames)
{
	for (int n = 0;; n++) {
		zmq_msg_t scratch;
		zmq_msg_t *zm = n < TAP_MAX_FRAMES ? &msgs[n] : &scratch;
		zmq_msg_init(zm);
		if (zmq_msg_recv(zm, sock, 0) < 0) {
			zmq_msg_close(zm);
			tap_close_frames(msgs, n);
			return -1;
		}
		int more = zmq_msg_more(zm);
		if (n < TAP_MAX_FRAMES) {
			frames[n] =
			    (kvi_frame){zmq_msg_data(zm), zmq_msg_size(zm)};
		} else {
			zmq_msg_close(zm);
		}
		if (!more) {
			return n + 1;
		}
	}
}
/* tap_replay asks the replay socket for every batch from start on and prints
 * them. Returns the seq after the last batch printed (start if none). */
static uint64_t
tap_replay(tap *t, uint64_t start)
{
	void *d = zmq_socket(t->zctx, ZMQ_DEALER);
	int linger = 0;
	int timeout = (int)t->o.replay_timeout_ms;
	zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof(linger));
	zmq_setsockopt(d, ZMQ_RCVTIMEO, &timeout, sizeof(timeout));
	uint64_t next = start;
	if (zmq_connect(d, t->o.replay) != 0) {
		fprintf(stderr, "kvindex-tap: replay %s: %s\n", t->o.replay,
			zmq_strerror(errno));
		zmq_close(d);
		return next;
	}
	uint8_t seq8[8];
	kvi_seq_put(seq8, start);
	zmq_send(d, "", 0, ZMQ_SNDMORE);
	zmq_send(d, seq8, sizeof(seq8), 0);
	for (;;) {
		zmq_msg_t msgs[TAP_MAX_FRAMES];
		kvi_frame frames[TAP_MAX_FRAMES];
		int n = tap_recv_frames(d, msgs, frames);
		if (n < 0) {
			fprintf(stderr,
				"kvindex-tap: replay from %" PRIu64
				" ended without its end marker\n",
				start);
			break;
		}
		kvi_msg m;
		kvi_err rv =
		    kvi_frame_parse_replay(frames, (size_t)n, &m, NULL, 0);
		bool end = rv == KVI_OK && m.end;
		if (rv != KVI_OK) {
			fprintf(stderr,
				"kvindex-tap: malformed replay reply "
				"(%d frames)\n",
				n);
		} else if (!end && m.seq >= next) {
			if (m.seq > next) {
				tap_note("replay_gap", next, m.seq);
			}
			tap_emit(t, "replay", &m);
			next = m.seq + 1;
		}
		tap_close_frames(msgs, n);
		if (end) {
			break;
		}
	}
	zmq_close(d);
	return next;
}

static void
tap_on_live(tap *t, const kvi_msg *m)
{
	if (!t->started) {
		t->started = true;
		t->expected = m->seq;
		if (t->o.has_from_seq && t->o.replay != NULL &&
		    t->o.from_seq < m->seq) {
			t->expected = tap_replay(t, t->o.from_seq);
		}
	} else if (m->seq <= t->last_live) {
		/* The live seq went backwards: the engine restarted. */
		tap_note("restart", t->expected, m->seq);
		t->expected = m->seq;
	}
	t->last_live = m->seq;
	if (m->seq > t->expected) {
		tap_note("gap", t->expected, m->seq);
		if (t->o.replay != NULL) {
			t->expected = tap_replay(t, t->expected);
		}
	}
	if (m->seq < t->expected) {
		return; /* already printed from a replay */
	}
	tap_emit(t, "live", m);
	t->expected = m->seq + 1;
}

static int
tap_run_live(tap *t)
{
	t->zctx = zmq_ctx_new();
	t->sub = zmq_socket(t->zctx, ZMQ_SUB);
	int hwm = 0, linger = 0;
	int timeout = t->o.idle_exit_ms > 0 ? (int)t->o.idle_exit_ms : 200;
	zmq_setsockopt(t->sub, ZMQ_RCVHWM, &hwm, sizeof(hwm));
	zmq_setsockopt(t->sub, ZMQ_LINGER, &linger, sizeof(linger));
	zmq_setsockopt(t->sub, ZMQ_RCVTIMEO, &timeout, sizeof(timeout));
	zmq_setsockopt(t->sub, ZMQ_SUBSCRIBE, t->o.topic, strlen(t->o.topic));
	if (zmq_connect(t->sub, t->o.endpoint) != 0) {
		fprintf(stderr, "kvindex-tap: %s: %s\n", t->o.endpoint,
			zmq_strerror(errno));
		return 2;
	}
	while (!tap_stop && (t->o.count == 0 || t->printed < t->o.count)) {
		zmq_msg_t msgs[TAP_MAX_FRAMES];
		kvi_frame frames[TAP_MAX_FRAMES];
		int n = tap_recv_frames(t->sub, msgs, frames);
		if (n < 0) {
			if (errno == EAGAIN && t->o.idle_exit_ms > 0) {
				break;
			}
			continue;
		}
		kvi_msg m;
		if (kvi_frame_parse_live(frames, (size_t)n, &m, NULL, 0) ==
		    KVI_OK) {
			tap_on_live(t, &m);
		} else {
			json_t *o = json_object();
			json_object_set_new(
			    o, "error",
			    json_sprintf("malformed message of %d "
					 "frames",
					 n));
			tap_print(o);
		}
		tap_close_frames(msgs, n);
	}
	zmq_close(t->sub);
	zmq_ctx_term(t->zctx);
	return 0;
}

static int
tap_hexval(int c)
{
	if (c >= '0' && c <= '9') {
		return c - '0';
	}
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int
tap_run_hex(tap *t)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	long lineno = 0;
	int failed = 0;
	while ((len = getline(&line, &cap, stdin)) >= 0) {
		lineno++;
		while (len > 0 &&
		       (line[len - 1] == '\n' || line[len - 1] == '\r' ||
			line[len - 1] == ' '))
			len--;
		if (len == 0) {
			continue;
		}
		json_t *out = json_object();
		json_object_set_new(out, "line", json_integer(lineno));
		size_t n = (size_t)len / 2;
		uint8_t *buf = malloc(n ? n : 1);
		bool hex_ok = len % 2 == 0;
		for (size_t i = 0; hex_ok && i < n; i++) {
			int hi = tap_hexval(line[2 * i]);
			int lo = tap_hexval(line[2 * i + 1]);
			hex_ok = hi >= 0 && lo >= 0;
			buf[i] = (uint8_t)(hi << 4 | lo);
		}
		kvi_batch b;
		if (!hex_ok) {
			json_object_set_new(out, "error",
					    json_string("not a hex string"));
			failed = 1;
		} else if (kvi_decoder_decode(t->dec, buf, n, &b) != KVI_OK) {
			json_object_set_new(
			    out, "error",
			    json_string(kvi_decoder_error(t->dec)));
			failed = 1;
		} else {
			json_t *bj = kvi_batch_to_json(&b);
			tap_note_skipped(t, &b, bj);
			failed |= b.n_skipped > 0;
			json_object_update(out, bj);
			json_decref(bj);
		}
		free(buf);
		tap_print(out);
	}
	free(line);
	return failed;
}

static void
tap_usage(FILE *f)
{
	fputs("usage: kvindex-tap --endpoint tcp://HOST:PORT [options]\n"
	      "       kvindex-tap --hex < payloads.hex\n"
	      "\n"
	      "Prints one JSON line per event batch an engine rank "
	      "publishes.\n"
	      "\n"
	      "  --endpoint URL        the rank's live PUB endpoint\n"
	      "  --replay URL          its replay ROUTER endpoint: gaps are "
	      "closed from it\n"
	      "  --from-seq N          with --replay, start from seq N "
	      "instead of the\n"
	      "                        first live message\n"
	      "  --topic PREFIX        subscribe to this topic prefix "
	      "(default: all)\n"
	      "  --count N             exit after N batches\n"
	      "  --idle-exit-ms N      exit after N ms without a message\n"
	      "  --replay-timeout-ms N give up on a replay after N ms "
	      "(default 5000)\n"
	      "  --hex                 decode hex payloads from standard "
	      "input, one per line;\n"
	      "                        exit status 1 if any failed or had an\n"
	      "                        event it had to skip (printed as\n"
	      "                        {\"type\": \"skipped\", \"reason\"})\n",
	      f);
}

static int
tap_parse(int argc, char **argv, tap_opts *o)
{
	static const struct option longopts[] = {
	    {"endpoint", required_argument, NULL, 'e'},
	    {"replay", required_argument, NULL, 'r'},
	    {"from-seq", required_argument, NULL, 'f'},
	    {"topic", required_argument, NULL, 't'},
	    {"count", required_argument, NULL, 'c'},
	    {"idle-exit-ms", required_argument, NULL, 'i'},
	    {"replay-timeout-ms", required_argument, NULL, 'T'},
	    {"hex", no_argument, NULL, 'x'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	*o = (tap_opts){.topic = "", .replay_timeout_ms = 5000};
	int c;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		char *end = NULL;
		switch (c) {
		case 'e':
			o->endpoint = optarg;
			break;
		case 'r':
			o->replay = optarg;
			break;
		case 't':
			o->topic = optarg;
			break;
		case 'x':
			o->hex = true;
			break;
		case 'f':
			o->has_from_seq = true;
			o->from_seq = strtoull(optarg, &end, 10);
			break;
		case 'c':
			o->count = strtoll(optarg, &end, 10);
			break;
		case 'i':
			o->idle_exit_ms = strtol(optarg, &end, 10);
			break;
		case 'T':
			o->replay_timeout_ms = strtol(optarg, &end, 10);
			break;
		case 'h':
			tap_usage(stdout);
			exit(0);
		default:
			return -1;
		}
		if (end != NULL && (*end != '\0' || end == optarg)) {
			fprintf(stderr, "kvindex-tap: not a number: %s\n",
				optarg);
			return -1;
		}
	}
	if (optind != argc || (!o->hex && o->endpoint == NULL)) {
		return -1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	tap t = {0};
	if (tap_parse(argc, argv, &t.o) != 0) {
		tap_usage(stderr);
		return 2;
	}
	signal(SIGINT, tap_on_signal);
	signal(SIGTERM, tap_on_signal);
	t.dec = kvi_decoder_alloc();
	int rv = t.o.hex ? tap_run_hex(&t) : tap_run_live(&t);
	if (rv == 0 && t.failed > 0) {
		rv = 1; /* something it printed was not decoded whole */
	}
	kvi_decoder_free(t.dec);
	return rv;
}
