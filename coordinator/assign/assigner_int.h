/*
 * assigner_int.h - the assigner's internals, shared by assigner.c (the
 * thread and its commands) and reconcile.c (the tick). Everything here is
 * touched by the assigner thread only, except what `mu` guards.
 */
#ifndef KVI_COORDINATOR_ASSIGNER_INT_H
#define KVI_COORDINATOR_ASSIGNER_INT_H

#include <pthread.h>

#include "assigner.h"
#include "fanout.h"
#include "lease.h"
#include "rendezvous.h"

typedef enum kvc_cmd_kind {
	KVC_CMD_REGISTER = 0,
	KVC_CMD_UNREGISTER,
	KVC_CMD_SYNC,
	KVC_CMD_CALL, /* run call(a, c) on the assigner thread (admin.c) */
} kvc_cmd_kind;

typedef struct kvc_cmd {
	kvc_cmd_kind kind;
	kvc_pod pod;   /* register */
	kvc_pod *pods; /* sync */
	size_t n_pods;
	kvc_source source;
	char *name, *model; /* unregister */
	uint64_t id;
	int rank;
	bool flag;                                        /* call */
	void (*call)(kvc_assigner *a, struct kvc_cmd *c); /* call */
	kvc_assigner_done done;
	void *arg;
	struct kvc_cmd *next;
} kvc_cmd;

/* The last full status a shard answered, kept across polls: a poll asks
 * for the listeners only if they changed since (since_digest), and goes
 * on with these when they did not. */
typedef struct kvc_kept {
	char *id; /* the shard's */
	Kvindex__Response *resp;
	uint64_t digest;
	bool has_digest;
} kvc_kept;

/* One listener a shard reported at the last poll. */
typedef struct kvc_owned {
	const char *key;
	size_t shard; /* index into the poll's snapshot */
	const Kvindex__ListenerStatus *st;
} kvc_owned;

/* Backoff of a registration unit (or a single listener's move). */
typedef struct kvc_retry {
	char *unit;
	int64_t next_ms;
	int backoff_ms;
	char err[200];
} kvc_retry;

/* One assign or unassign of the tick's batch. */
typedef struct kvc_op {
	bool assign;
	size_t shard;
	char *key;           /* unassign */
	const kvc_lview *lv; /* assign */
	bool handoff;        /* assign: a planned move, state from shard from */
	size_t from;
	char err[128]; /* kvc_run_ops: why it failed */
} kvc_op;

/* commands.c: what the commands do, on the assigner thread. */
/* Registrations queued together and assigned in one round of calls. */
#define KVC_REGISTER_BATCH 256
/* kvc_err_body returns {"error": msg}. */
json_t *kvc_err_body(const char *msg);
/* kvc_do_registers registers n pods that arrived together. */
void kvc_do_registers(kvc_assigner *a, kvc_cmd *const *cmds, size_t n);
void kvc_do_unregister(kvc_assigner *a, kvc_cmd *c);
void kvc_do_sync(kvc_assigner *a, kvc_cmd *c);

/* kvc_sync_assign assigns the listeners of the n pods just added (by a
 * sync, or a retry of skipped pods) that no shard owns, all at once; what
 * it leaves to the ticks sets sync_left. */
void kvc_sync_assign(kvc_assigner *a, const kvc_pod *const *pods, size_t n);

/* skipped.c: the pods of a source the registry refused. */
typedef struct kvc_skip {
	kvc_pod pod;
	kvc_reg_why why;
	char holder[KVC_NAME_MAX + 16];
} kvc_skip;
typedef struct kvc_skips {
	kvc_skip *v;
	size_t n, cap;
} kvc_skips;
/* kvc_skip_note logs and counts p's refusal (res, err) unless the
 * source's last sync had it too, and adds p to next. */
void kvc_skip_note(kvc_assigner *a, kvc_skips *next, const kvc_pod *p,
		   const kvc_reg_result *res, const char *err);
/* kvc_skip_set makes next (taken) the skipped pods of source s. */
void kvc_skip_set(kvc_assigner *a, kvc_source s, kvc_skips *next);
/* kvc_skip_retry adds and assigns the skipped pods that fit now, when
 * listeners were removed since it last ran. */
void kvc_skip_retry(kvc_assigner *a);
void kvc_skips_fini(kvc_skips *s);
/* kvc_refused_count counts a registration of source s refused for why. */
void kvc_refused_count(kvc_assigner *a, kvc_source s, kvc_reg_why why);

/* kvc_spec_fill fills the Listener spec of lv (pointing into it). */
void kvc_spec_fill(Kvindex__Listener *sp, const kvc_lview *lv);

/* kvc_leading says whether this coordinator may command shards now, and
 * the term its commands carry (0 without leader election). */
bool kvc_leading(kvc_assigner *a, uint64_t *term);

/* kvc_strv_free frees n strings and their array (NULL ok). */
void kvc_strv_free(char **v, size_t n);

/* kvc_adopt_http rebuilds, after a poll, the HTTP registrations the
 * shards hold that the registry lacks, as leader or follower
 * (adopt_http.c). */
void kvc_adopt_http(kvc_assigner *a, bool leading);

/* kvc_share_state writes what the leader shares through the Lease (its
 * shards, pins, drains and pending registrations), or on a follower
 * takes it from the Lease (share.c). kvc_share_take only takes it: on a
 * follower, and once on a new leader, before its first tick or command
 * changes anything. kvc_share_pending_has says whether p is a pending
 * registration taken from the Lease. */
void kvc_share_state(kvc_assigner *a, bool leading);
void kvc_share_take(kvc_assigner *a, bool leading);
bool kvc_share_pending_has(const kvc_assigner *a, const kvc_pod *p);

/* kvc_removed_note remembers (on true) or forgets a removed key. */
void kvc_removed_note(kvc_assigner *a, const char *key, bool removed);
bool kvc_removed_has(const kvc_assigner *a, const char *key);

/* The last poll of the shards (reconcile.c writes it; the tick's other
 * steps and the commands read it). */
typedef struct kvc_poll {
	kvc_shard **snap; /* the shards polled */
	size_t n;
	const char **ids; /* snap[i]->id */
	bool *answered;
	bool *eligible;
	Kvindex__Response **resps; /* borrowed from kept */
	kvc_owned *owned;
	size_t n_owned;
	bool done; /* a poll ran */
	/* every shard answered that its listeners are as kept, the same
	 * shards as the poll before, as eligible (owned is the poll
	 * before's then, not rebuilt) */
	bool same;
	kvc_kept *kept; /* a shard's last full status, by shard id */
	size_t n_kept;
	int probes;        /* probes of down shards in flight; under mu */
	bool probe_answer; /* one answered: tick again now; under mu */
} kvc_poll;

/* Whether the last full tick left nothing to do, and what it saw; a
 * tick that would see the same skips its steps (reconcile.c). The
 * assigner thread marks what ran since. */
typedef struct kvc_settle {
	bool done;
	bool leading;
	uint64_t term, gen;
	int64_t full_at_ms;
	bool dirty;       /* a command ran since */
	bool registering; /* registrations ran since */
} kvc_settle;

/* The discovery sources: those expected and those synced once (a bit per
 * kvc_source, under mu), and whether the last sync left listeners to the
 * tick (the assigner thread's). */
typedef struct kvc_sources {
	unsigned expected, synced;
	bool sync_left;
} kvc_sources;

/* Registration units waiting to be retried (units.c). */
typedef struct kvc_retries {
	kvc_retry *v;
	size_t n;
} kvc_retries;

/* Listeners this coordinator removed, not to be rebuilt from a shard that
 * missed the removal; oldest dropped first (adopt_http.c). */
typedef struct kvc_removed {
	char **keys;
	size_t n;
} kvc_removed;

/* Pods of each source the registry refused, and how many listeners had
 * been removed when they were last tried (skipped.c); registrations
 * refused, by source and reason (any thread reads). */
typedef struct kvc_refusals {
	kvc_skips skipped[KVC_SOURCES];
	uint64_t retried_at;
	_Atomic uint64_t count[KVC_SOURCES][KVC_REG_WHYS];
} kvc_refusals;

/* The pending registrations last taken from the Lease, and whether this
 * replica took the Lease's state since it began leading (share.c). */
typedef struct kvc_share_taken {
	kvc_pod *pending;
	size_t n_pending;
	bool took;
} kvc_share_taken;

/* Hand-offs completed lately, newest last (admin.c); under mu. */
typedef struct kvc_moves {
	struct kvc_move_rec *v;
	size_t n;
} kvc_moves;

/* Listeners whose new owner is active while their other owners are kept
 * until it has been in the query route long enough (reconcile.c), as the
 * last full tick left them; the assigner thread's. */
typedef struct kvc_release {
	char *key, *from, *to;
} kvc_release;

typedef struct kvc_releases {
	kvc_release *v;
	size_t n, cap;
} kvc_releases;

/* The assigner's metrics, in the caller's registry or own. */
typedef struct kvc_assigner_metrics {
	kvi_metrics *own;
	kvi_counter *assign_ok, *assign_failed, *unassign_ok, *unassign_failed,
	    *failovers, *orphans, *reg_retries, *ticks_full, *ticks_quiet;
	kvi_histogram *tick_seconds[2]; /* full, quiet */
	kvi_gauge *shards_up, *pending_units;
} kvc_assigner_metrics;

struct kvc_assigner {
	kvc_registry *reg;
	kvc_shardset *shards;
	kvc_cstore *store;
	kvc_assigner_config cfg;
	kvc_rdv_pins *pins;
	kvc_lease *lease; /* NULL: alone, always leading */

	/* the thread and its queue (assigner.c) */
	pthread_t thread;
	pthread_mutex_t mu; /* guards the queue, stop, ticks, the probes of
			     * poll, sources' bits and moves */
	pthread_cond_t cv;
	kvc_cmd *head, *tail;
	bool stop;
	uint64_t ticks; /* ticks run */

	kvc_sources sources;
	kvc_poll poll;
	kvc_settle settle;
	kvc_retries retries;
	kvc_removed removed;
	kvc_refusals refusals;
	kvc_share_taken share;
	kvc_moves moves;
	kvc_releases releasing;
	kvc_assigner_metrics m;

	/* listeners removed so far (commands.c, adopt_http.c); memory is
	 * given back once many have gone: the count when it last was, and
	 * when it is due next (0: not due; assigner.c) */
	uint64_t removed_total;
	uint64_t given_back_at;
	int64_t give_back_ms;
	/* the store failing at the last look, and its last probe
	 * (assigner.c) */
	bool store_failing;
	int64_t store_probe_ms;
};

/* assigner.c */
/* kvc_enqueue queues c for the assigner thread (answered 503 when it is
 * stopping); c is taken. */
void kvc_enqueue(kvc_assigner *a, kvc_cmd *c);
json_t *kvc_err_body(const char *msg);

/* admin.c */
/* kvc_admin_tick forgets drained shards that own nothing any more. */
void kvc_admin_tick(kvc_assigner *a);
/* kvc_admin_note_move records a completed move of key; st is the new
 * owner's status (its hand-off, if it took the state from the old one). */
void kvc_admin_note_move(kvc_assigner *a, const char *key,
			 const Kvindex__ListenerStatus *st, const char *from,
			 const char *to);
void kvc_admin_fini(kvc_assigner *a);
/* kvc_admin_note_release records that key's owner from is kept until
 * its new owner to has been in the query route long enough;
 * kvc_admin_releases_clear forgets them all, at each full tick. */
void kvc_admin_note_release(kvc_assigner *a, const char *key, const char *from,
			    const char *to);
void kvc_admin_releases_clear(kvc_assigner *a);

/* reconcile.c */
bool kvc_tick(kvc_assigner *a); /* whether it was a full one */

/* poll.c */
void kvc_poll_free(kvc_assigner *a);
/* kvc_kept_free frees every shard's kept status. */
void kvc_kept_free(kvc_assigner *a);
/* kvc_poll_shards runs step 1 of a tick (poll.c): every shard asked for
 * its status, a->poll filled with what they answered. */
void kvc_poll_shards(kvc_assigner *a);
/* kvc_owned_find returns the first entry for key in the poll's owned
 * list and the number of entries for it. */
const kvc_owned *kvc_owned_find(const kvc_assigner *a, const char *key,
				size_t *n);
/* kvc_run_ops runs a batch of assigns/unassigns in parallel, at most
 * max_in_flight at a time; ok[i] (may be NULL) and existed[i] (may be
 * NULL) receive each outcome and err the first failure. */
void kvc_run_ops(kvc_assigner *a, kvc_op *ops, size_t n, bool *ok,
		 bool *existed, char *err, size_t errlen);
/* kvc_units_attempt assigns n_units registration units at once, unit u
 * being lvs[first[u] .. first[u + 1]), each all or nothing: one round of
 * calls for all of them (max_in_flight at a time), so that a thousand
 * registrations cost about what one does, times their calls. good[u] says
 * whether unit u is assigned, why[u] why not. */
void kvc_units_attempt(kvc_assigner *a, const kvc_lview *const *lvs,
		       const size_t *first, size_t n_units, bool *good,
		       char (*why)[256]);
/* kvc_units_retry is kvc_units_attempt for units named names[u], whose
 * retries it clears or sets back; returns how many failed. */
size_t kvc_units_retry(kvc_assigner *a, const kvc_lview *const *lvs,
		       const size_t *first, const char *const *names,
		       size_t n_units);
/* kvc_unit_attempt is kvc_units_attempt for one unit. */
bool kvc_unit_attempt(kvc_assigner *a, const kvc_lview *const *lvs, size_t n,
		      char *err, size_t errlen);
/* Retry bookkeeping of registration units. */
kvc_retry *kvc_retry_get(kvc_assigner *a, const char *unit, bool create);
void kvc_retry_fail(kvc_assigner *a, const char *unit, const char *err);
void kvc_retry_clear(kvc_assigner *a, const char *unit);
bool kvc_retry_due(kvc_assigner *a, const char *unit, int64_t now);
/* kvc_unit_of writes the registration unit of a listener: its pod name,
 * or its own key for a per-rank registration. */
const char *kvc_unit_of(const kvc_lview *lv);
/* kvc_shard_index returns the index of shard id in the poll's snapshot,
 * or SIZE_MAX. */
size_t kvc_shard_index(const kvc_assigner *a, const char *id);

#endif /* KVI_COORDINATOR_ASSIGNER_INT_H */
