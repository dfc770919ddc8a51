/*
 * ingest_int.h - what the ingest thread's modules share (not a public
 * header): ingest.c (the thread, its listeners, requests), ingest_load.c
 * (building it: the store's state into the index), ingest_commit.c (group
 * commits), ingest_io.c (ZeroMQ sockets and the loop's readiness
 * handling), ingest_probe.c (probing engines that are not there),
 * ingest_status.c (status and dumps), ingest_metrics.c (the totals and
 * /metrics), ingest_image.c (the index image), ingest_feed.c (feeding it
 * in process) and handoff.c (planned moves). Every listener's sequence is
 * recovery's (recovery.h), which this thread drives and serves (kvq_owner).
 * Everything here runs on the ingest thread unless a comment says otherwise.
 */
#ifndef KVI_SHARD_INGEST_INT_H
#define KVI_SHARD_INGEST_INT_H

#include <event2/event.h>
#include <pthread.h>
#include <stdatomic.h>

#include "ingest.h"
#include "listener.h"
#include "recover_fetch.h"
#include "recovery.h"
#include "wire.h"
#include "writer.h"

/* A listener behind its engine: live batches queued, waiting to be
 * applied. Keys are namespace/pod#rank (at most 323 bytes) or an instance
 * id and rank; a longer one would be cut here, in /metrics only. */
#define KVG_LAGGING_MAX 16
typedef struct kvg_lag {
	char key[400];
	uint64_t batches, bytes;
} kvg_lag;

/* Shard-wide figures the ingest thread publishes after each commit, for
 * /metrics (read under stats_mu from the metrics thread). */
typedef struct kvg_totals {
	kvl_counters c;
	uint64_t by_state[KVL_STATE_COUNT];
	uint64_t waiting; /* listeners whose engine takes no connection */
	uint64_t backlog_bytes, backlog_batches;
	uint64_t backlog_max_listener; /* the largest listener's bytes */
	/* the KVG_LAGGING_MAX listeners with the most bytes queued */
	kvg_lag lagging[KVG_LAGGING_MAX];
	size_t n_lagging;
	kvs_store_stats store;
	bool store_failing;
} kvg_totals;

/* The totals published (ingest_metrics.c's, which alone touches them):
 * the last ones, under mu for the metrics thread; the store's figures of
 * the last commit; and when they were last published. */
typedef struct kvg_stats {
	pthread_mutex_t mu;
	kvg_totals totals;
	kvs_store_stats store;
	int64_t at_ms;
} kvg_stats;

typedef struct kvg_cmd kvg_cmd;

/* What a load of the store takes (ingest_load.c): everything; the
 * listeners and their marks only (the index comes from an image); the
 * entries only (an image was refused after the listeners were made); or
 * the listeners, their marks and what was committed after an image. */
typedef enum kvg_load_pass {
	KVG_LOAD_ALL,
	KVG_LOAD_MARKS,
	KVG_LOAD_ENTRIES,
	KVG_LOAD_TAIL, /* the listeners, their marks and the log's tail past
			* an image (ingest_tail.c) */
} kvg_load_pass;

typedef struct kvg_tail kvg_tail;

/* A request from another thread, answered on the ingest thread. */
typedef enum kvg_cmd_kind {
	KVG_CMD_ASSIGN,
	KVG_CMD_UNASSIGN,
	KVG_CMD_STATUS,
	KVG_CMD_DUMP,
	KVG_CMD_HANDOFF,
} kvg_cmd_kind;

struct kvg_cmd {
	kvg_cmd_kind kind;
	const Kvindex__Listener *spec;
	const char *key;
	bool has_since; /* status: the digest the caller holds */
	uint64_t since;
	kvp_arena *arena;
	Kvindex__StatusResponse *status;
	Kvindex__DumpResponse *dump;
	const char *handoff_from; /* assign: a planned move from there */
	const Kvindex__HandoffRequest *ho_req;
	Kvindex__HandoffResponse *ho_resp;
	bool existed;
	uint32_t lid; /* assign: the listener's id */
	kvi_err rv;
	char *err;
	size_t errlen;
	bool done;
	pthread_cond_t cv;
	kvg_cmd *next;
};

/* The listeners' sockets (ingest_io.c's, which alone touches them): the
 * ZeroMQ context; the sockets with messages left to read and the event
 * that drains them; backpressure (not reading live sockets); and when a
 * socket could not be made for want of descriptors (kvi_now_ms; 0: never;
 * read by any thread). */
typedef struct kvg_sockets {
	void *zctx;
	struct kvg_io *ready_head, *ready_tail;
	struct event *ev_drain;
	bool paused;
	_Atomic int64_t files_out_ms;
} kvg_sockets;

/* Probes of engines that take no connection (ingest_probe.c's, which
 * alone touches them): the connects in flight; the probe budget's next
 * free slot, on kvi_now_us()'s clock; probes made, and those that waited
 * for the budget (read by the metrics thread). */
typedef struct kvg_probes {
	unsigned in_flight;
	_Atomic uint64_t slot_us;
	_Atomic uint64_t made, waited;
} kvg_probes;

/* Hand-offs (handoff.c's, which alone touches them): the hand-off thread,
 * the jobs it is given and the results it gives back, under mu, and the
 * tokens of the asks. */
typedef struct kvg_handoffs {
	pthread_t thread;
	bool started, stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct kvg_hojob *jobs, *done;
	uint64_t gen;
} kvg_handoffs;

/* Group commits (ingest_commit.c's, which alone touches them): the
 * listeners with ops to commit, the writer thread and its two jobs, the
 * commit timer, and what the last commit said of the store's log. */
typedef struct kvg_commits {
	kvl_dirtyq dirtyq;
	kvw_writer *writer;
	kvw_job jobs[2];
	kvw_job *filling;    /* the job collecting the next commit */
	struct event *timer; /* every commit interval; NULL when fed */
	bool snapshot_oldest;
	uint32_t oldest_lid;
	double last; /* fed in process: when the last commit ran */
	kvi_histogram *h_latency;
	kvi_counter *c_errors;
} kvg_commits;

struct kvg_ingest {
	kvg_config cfg;
	kvx_index *idx;
	kvs_store *store;
	kvq_recovery recovery; /* every listener's sequence (recovery/) */
	kvx_bulk *bulk;        /* loading snapshots at start-up */
	kvg_tail *tail;        /* or what followed an image (ingest_tail.c) */
	kvg_load_pass pass;    /* what the store's load callbacks take */
	bool loaded;           /* the store's state is in the index */
	/* the store's state the image beside it holds (ingest_image.c),
	 * whether that is the store's state now, the items committed since,
	 * and when the last image was tried while running and what it took
	 * (kvi_now_s) */
	kvs_stamp image_stamp;
	bool image_current;
	uint64_t image_tail;
	double image_at, image_took;
	struct event_base *base;
	pthread_t thread;
	bool started;
	atomic_bool stopping;

	/* listeners by id; ids are never reused while the shard runs */
	kvl_listener **lis;
	uint32_t cap_lis;
	uint32_t next_lid;
	/* and by key (kvl_listener.key_next chains; n_buckets a power of 2) */
	kvl_listener **by_key;
	size_t n_buckets, n_keyed;

	/* wake-ups from other threads: requests, fetch results, commits */
	int wake_fd;
	struct event *ev_wake;
	pthread_mutex_t cmd_mu;
	kvg_cmd *cmd_head, *cmd_tail;

	kvg_sockets sockets; /* the listeners' (ingest_io.c) */
	kvg_probes probes;   /* of engines not there (ingest_probe.c) */
	bool feeding; /* fed in process (kvg_feed): no loop, no sockets */

	kvr_fetcher *fetcher;  /* recovery's, made and stopped here */
	kvg_handoffs handoffs; /* planned moves (handoff.c) */

	/* listeners unassigned since memory was last given back, and when
	 * to give it back (0: not due) */
	uint32_t unassigned_since;
	int64_t give_back_at_ms;

	kvg_commits commits; /* group commits (ingest_commit.c) */

	kvg_stats stats; /* the totals for /metrics (ingest_metrics.c) */
};

/* ingest.c */
kvl_listener *kvg_listener(kvg_ingest *g, uint32_t lid);
kvl_listener *kvg_listener_find(kvg_ingest *g, const char *key);
/* kvg_group_lid_new gives a listener's new cache group an id of the
 * index's, past every listener's, which no listener of the store ever
 * takes (kva_scratch's new_lid; arg is the ingest). */
uint32_t kvg_group_lid_new(void *arg);
/* kvg_listener_create makes listener lid from spec (packed: as persisted)
 * and registers it with the index; KVI_EINVAL when the index refuses it. */
kvi_err kvg_listener_create(kvg_ingest *g, uint32_t lid,
			    const Kvindex__Listener *spec,
			    const uint8_t *packed, size_t len,
			    kvl_listener **out);
kvi_err kvg_do_assign(kvg_ingest *g, kvg_cmd *c);
kvi_err kvg_do_unassign(kvg_ingest *g, kvg_cmd *c);
/* kvg_give_back returns to the system the memory a burst of queued
 * batches took, once the queues are empty again, and the memory of many
 * listeners unassigned: the allocator would otherwise keep it. */
void kvg_give_back(kvg_ingest *g);

/* ingest_commit.c: group commits. kvg_commit_init readies them (the jobs)
 * and kvg_commit_metrics registers their metrics; kvg_commit_start starts
 * the writer (notify(arg) after each commit), kvg_commit_arm the commit
 * timer in g's loop; kvg_commit_stop stops the writer, taking back its
 * last job, and kvg_commit_fini frees what they hold. */
void kvg_commit_init(kvg_ingest *g);
void kvg_commit_metrics(kvg_ingest *g, kvi_metrics *m);
kvi_err kvg_commit_start(kvg_ingest *g, void (*notify)(void *), void *arg);
void kvg_commit_arm(kvg_ingest *g);
void kvg_commit_stop(kvg_ingest *g);
void kvg_commit_fini(kvg_ingest *g);
/* kvg_commit_watch has l's changes committed; kvg_commit_assign puts l's
 * spec and an empty snapshot in the next commit, kvg_commit_unassign the
 * removal of listener lid. */
void kvg_commit_watch(kvg_ingest *g, kvl_listener *l);
void kvg_commit_assign(kvg_ingest *g, const kvl_listener *l);
void kvg_commit_unassign(kvg_ingest *g, uint32_t lid);
/* kvg_commit_settled says whether everything applied is committed, as far
 * as the commits know (listeners may hold changes not yet queued). */
bool kvg_commit_settled(kvg_ingest *g);
/* kvg_commit hands what was applied since the last commit to the writer
 * unless it is busy; kvg_commit_done takes back a committed job. */
void kvg_commit(kvg_ingest *g);
void kvg_commit_done(kvg_ingest *g, kvw_job *done);
/* kvg_commit_last is the stop's: it waits for the job in flight and
 * commits what is left, unless the store is failing. kvg_commit_settle
 * does that and waits for the commit too: true when everything applied is
 * committed (kvg_commit_settled), false when the store is failing. */
void kvg_commit_last(kvg_ingest *g);
bool kvg_commit_settle(kvg_ingest *g);
/* Fed in process: kvg_commit_feed commits when the interval has passed
 * (waiting for a lagging store as the loop would stop reading);
 * kvg_commit_sync returns once everything fed is committed. */
void kvg_commit_feed(kvg_ingest *g);
void kvg_commit_sync(kvg_ingest *g);
void kvg_on_wake(evutil_socket_t fd, short what, void *arg);
void kvg_wake(kvg_ingest *g);

/* ingest_load.c: kvg_fetcher_open makes and starts g's /kv_recover fetcher
 * as its config says, notify(arg) after each result (NULL: none), and
 * hands it to recovery. */
kvi_err kvg_fetcher_open(kvg_ingest *g, void (*notify)(void *), void *arg);

/* ingest_status.c: the status and dump requests */
void kvg_counters_add(kvl_counters *sum, const kvl_counters *c);
kvi_err kvg_do_status(kvg_ingest *g, kvg_cmd *c);
kvi_err kvg_do_dump(kvg_ingest *g, kvg_cmd *c);

/* ingest_metrics.c: kvg_publish_totals republishes the shard-wide figures
 * (at most every 100 ms: it sums every listener), with the store's figures
 * of done, the commit just finished (NULL: none); kvg_metrics_register
 * registers /metrics, which renders the last ones published. */
void kvg_publish_totals(kvg_ingest *g, const kvw_job *done);
void kvg_metrics_register(kvg_ingest *g);
/* kvg_metrics_init readies the totals, kvg_metrics_fini releases them;
 * kvg_metrics_store gives the store's figures last published (any
 * thread). */
void kvg_metrics_init(kvg_ingest *g);
void kvg_metrics_fini(kvg_ingest *g);
kvs_store_stats kvg_metrics_store(kvg_ingest *g);

/* ingest_image.c: the index image beside the store */
#define KVG_IMAGE_FILE "index.image"
/* kvg_image_find opens the image if it holds the store's state stamp or an
 * earlier one, which it gives in *at (an image of another state is
 * removed); -1 if there is none to use. */
int kvg_image_find(kvg_ingest *g, const kvs_stamp *stamp, kvs_stamp *at);
/* kvg_image_load reads the image of state stamp into the index, whose
 * listeners the store's load made (all but those fresh[] marks, made or
 * snapshotted since, may be missing from it: kvx_image_load); false (the
 * index untouched) if it is refused. */
bool kvg_image_load(kvg_ingest *g, int fd, const kvs_stamp *stamp,
		    const bool *fresh, size_t n_fresh);
/* kvg_image_drop removes the image: of no use to any later start. */
void kvg_image_drop(kvg_ingest *g);
/* Images while running: kvg_image_note counts items (snapshot entries,
 * log ops) a commit will write, kvg_image_tick writes an image when one is
 * due (ingest_image.c says when), settling the commits first if need be;
 * kvg_image_waiting says whether one is wanted, its turn not come yet.
 * Ingest thread. */
#define KVG_IMAGE_TAIL_DIV 16
#define KVG_IMAGE_IDLE_DIV 64
#define KVG_IMAGE_TAIL_MIN 65536
#define KVG_IMAGE_COST_GAP 20
#define KVG_IMAGE_RETRY_S  60.0
void kvg_image_note(kvg_ingest *g, uint64_t items);
void kvg_image_tick(kvg_ingest *g);
bool kvg_image_waiting(kvg_ingest *g);

/* ingest_tail.c: a start from an image the store has moved past. Between
 * kvg_tail_begin() (from: the image's next lsn) and kvg_tail_end(), the
 * load hands each snapshot header (KVI_ENOENT: its entries are not
 * needed), the entries of the others and the ops of the records at or
 * past from; kvg_tail_load() then loads the image and replays them, or
 * returns false, the index untouched, when the index is to be rebuilt
 * instead. */
void kvg_tail_begin(kvg_ingest *g, uint64_t from);
void kvg_tail_end(kvg_ingest *g);
/* kvg_tail_wants says whether the ops of the record at lsn are to be
 * replayed: it was committed after the image, and the tail is still to be
 * replayed at all. */
bool kvg_tail_wants(const kvg_ingest *g, uint64_t lsn);
kvi_err kvg_tail_snapshot(kvg_ingest *g, uint32_t lid, uint64_t lsn,
			  uint64_t n);
void kvg_tail_entries(kvg_ingest *g, uint32_t lid, const uint8_t *e, size_t n);
void kvg_tail_op(kvg_ingest *g, uint32_t lid, const kvo_op *op);
bool kvg_tail_load(kvg_ingest *g, int fd, const kvs_stamp *stamp);
/* kvg_image_save writes the image when the index is exactly the store's
 * state and the image on disk is not already of it; returns whether the
 * image on disk is of that state now. After the threads stop, or on the
 * ingest thread with the commits settled (kvg_commit_settle). */
bool kvg_image_save(kvg_ingest *g);

/* ingest_io.c */
/* kvg_io_init makes the ZeroMQ context and the drain event in g's loop:
 * KVI_EIO when the context cannot be made; kvg_io_fini frees them, once
 * every listener's sockets are closed. */
kvi_err kvg_io_init(kvg_ingest *g);
void kvg_io_fini(kvg_ingest *g);
kvi_err kvg_io_open(kvg_ingest *g, kvl_listener *l);
void kvg_io_close(kvg_ingest *g, kvl_listener *l);
/* kvg_io_waiting: l's engine has not taken a connection (yet, or again):
 * l holds no sockets, and probes it (ingest_probe.c). */
bool kvg_io_waiting(const kvl_listener *l);
/* kvg_probe_metrics gives what probing the engines that are not there
 * cost, and how far behind the probe budget (--probe-rate) is; any
 * thread (ingest_probe.c). */
void kvg_probe_metrics(kvi_metrics_out *out, kvg_ingest *g);
void kvg_io_drain(kvg_ingest *g);
/* kvg_io_pause stops reading live sockets (backpressure) or starts again;
 * kvg_io_paused says which. */
void kvg_io_pause(kvg_ingest *g, bool paused);
bool kvg_io_paused(const kvg_ingest *g);
/* kvg_io_replay_start opens a DEALER to the listener's replay socket and
 * asks for every batch from seq on. */
kvi_err kvg_io_replay_start(kvg_ingest *g, kvl_listener *l, uint64_t seq);
void kvg_io_replay_stop(kvg_ingest *g, kvl_listener *l);
/* kvg_io_timer arms the listener's one timer (replay silence, backoff);
 * ms < 0 disarms it. */
void kvg_io_timer(kvg_ingest *g, kvl_listener *l, int ms);

#endif /* KVI_SHARD_INGEST_INT_H */
