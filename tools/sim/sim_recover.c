#include "sim_recover.h"

#include <string.h>

#include "alloc.h"
#include "hash.h"

/* A record is a sequence of u64 words: the number of events, then per
 * event a header (type | tier << 8 | has_parent << 16 | n << 32) followed
 * by, for stored, the parent and n (block hash, local hash) pairs; for
 * removed, n block hashes; for cleared, nothing.
 *
 * RouterEvents have no group field: the events of KV cache groups other
 * than 0 are not recorded (they would read as group 0's), and group 0's
 * blocks are recorded at its own block size, a block's local hash over
 * all its tokens. */
#define HDR(type, tier, has_parent, n)                                         \
	((uint64_t)(type) | (uint64_t)(tier) << 8 |                            \
	 (uint64_t)(has_parent) << 16 | (uint64_t)(n) << 32)

static bool
recorded(const sim_event *ev)
{
	return !ev->grouped || ev->group == 0;
}

/* stored_block writes block j of a stored event: its hash and local
 * hash. */
static void
stored_block(const sim_batch *batch, const sim_event *ev, uint32_t j,
	     uint64_t *w)
{
	uint32_t stride = ev->stride > 1 ? ev->stride : 1;
	uint32_t last = ev->first + (j + 1) * stride - 1;
	w[0] = batch->ext[last];
	w[1] = batch->local[last];
	if (stride > 1) {
		uint32_t bs = batch->block_size;
		w[1] = kvi_local_hash(
		    batch->tokens + (size_t)(last + 1 - stride) * bs,
		    (size_t)stride * bs, kvi_local_seed(NULL, 0, NULL, 0));
	}
}

void *
sim_recover_record(const sim_batch *batch, size_t *len)
{
	size_t words = 1;
	for (uint32_t i = 0; i < batch->n_events; i++) {
		const sim_event *ev = &batch->events[i];
		if (recorded(ev)) {
			words += 1 + (ev->type == SIM_EV_STORED
					  ? 1 + 2 * (size_t)ev->n
				      : ev->type == SIM_EV_REMOVED ? ev->n
								   : 0);
		}
	}
	uint64_t *w = kvi_malloc(words * sizeof(uint64_t));
	size_t o = 1;
	w[0] = 0;
	for (uint32_t i = 0; i < batch->n_events; i++) {
		const sim_event *ev = &batch->events[i];
		if (!recorded(ev)) {
			continue;
		}
		w[0]++;
		w[o++] = HDR(ev->type, ev->tier, ev->has_parent, ev->n);
		if (ev->type == SIM_EV_STORED) {
			w[o++] = ev->parent;
			for (uint32_t j = 0; j < ev->n; j++, o += 2) {
				stored_block(batch, ev, j, &w[o]);
			}
		} else if (ev->type == SIM_EV_REMOVED) {
			memcpy(&w[o], &batch->removed[ev->first],
			       ev->n * sizeof(uint64_t));
			o += ev->n;
		}
	}
	*len = words * sizeof(uint64_t);
	return w;
}

sim_recover_kind
sim_recover_decide(const sim_recover_query *q, const sim_ring *log,
		   bool has_newest, uint64_t newest)
{
	if (!q->has_range) {
		return SIM_RECOVER_TREE_DUMP;
	}
	if (q->start > q->end) {
		return SIM_RECOVER_INVALID_RANGE;
	}
	if (!has_newest || q->start > newest) {
		return SIM_RECOVER_TOO_NEW;
	}
	uint64_t oldest;
	if (sim_ring_oldest(log, &oldest) && oldest <= q->start) {
		return SIM_RECOVER_EVENTS;
	}
	return SIM_RECOVER_TREE_DUMP;
}

static const char *
tier_name(unsigned tier)
{
	return tier == SIM_TIER_CPU ? "HostPinned" : "Device";
}

/* begin_event writes a RouterEvent up to and including `"data":`. */
static void
begin_event(sim_buf *out, const sim_recover_origin *o, unsigned tier,
	    uint64_t event_id)
{
	sim_buf_puts(out, "{\"worker_id\":");
	sim_buf_u64(out, o->worker_id);
	sim_buf_puts(out, ",\"storage_tier\":\"");
	sim_buf_puts(out, tier_name(tier));
	sim_buf_puts(out, "\",\"event\":{\"event_id\":");
	sim_buf_u64(out, event_id);
	sim_buf_puts(out, ",\"dp_rank\":");
	sim_buf_u64(out, o->dp_rank);
	sim_buf_puts(out, ",\"data\":");
}

static void
write_stored_head(sim_buf *out, bool has_parent, uint64_t parent)
{
	sim_buf_puts(out, "{\"stored\":{\"parent_hash\":");
	if (has_parent) {
		sim_buf_u64(out, parent);
	} else {
		sim_buf_puts(out, "null");
	}
	sim_buf_puts(out, ",\"blocks\":[");
}

static void
write_block(sim_buf *out, uint64_t hash, uint64_t local)
{
	sim_buf_puts(out, "{\"block_hash\":");
	sim_buf_u64(out, hash);
	sim_buf_puts(out, ",\"tokens_hash\":");
	sim_buf_u64(out, local);
	sim_buf_puts(out, "}");
}

/* write_record writes the RouterEvents of one logged batch; returns false
 * when nothing was written (so the caller knows about commas). */
static bool
write_record(sim_buf *out, const sim_recover_origin *o, uint64_t seq,
	     const uint64_t *w, bool first)
{
	size_t i = 1;
	for (uint64_t e = 0; e < w[0]; e++) {
		uint64_t hdr = w[i++];
		unsigned type = hdr & 0xff;
		unsigned tier = (hdr >> 8) & 0xff;
		bool has_parent = (hdr >> 16) & 1;
		uint32_t n = (uint32_t)(hdr >> 32);
		if (!first || e > 0) {
			sim_buf_puts(out, ",");
		}
		begin_event(out, o, tier, seq);
		if (type == SIM_EV_STORED) {
			write_stored_head(out, has_parent, w[i++]);
			for (uint32_t j = 0; j < n; j++, i += 2) {
				if (j > 0) {
					sim_buf_puts(out, ",");
				}
				write_block(out, w[i], w[i + 1]);
			}
			sim_buf_puts(out, "]}}}}");
		} else if (type == SIM_EV_REMOVED) {
			sim_buf_puts(out, "{\"removed\":{\"block_hashes\":[");
			for (uint32_t j = 0; j < n; j++) {
				if (j > 0) {
					sim_buf_puts(out, ",");
				}
				sim_buf_u64(out, w[i++]);
			}
			sim_buf_puts(out, "]}}}}");
		} else {
			sim_buf_puts(out, "\"cleared\"}}");
		}
	}
	return w[0] > 0;
}

void
sim_recover_write_events(sim_buf *out, const sim_recover_origin *o,
			 const sim_ring *log, uint64_t start, uint64_t end)
{
	sim_buf_puts(out, "{\"Events\":{\"events\":[");
	bool first = true;
	for (uint64_t seq = start; seq <= end; seq++) {
		const sim_ring_entry *e = sim_ring_get(log, seq);
		if (e != NULL && write_record(out, o, seq, e->data, first)) {
			first = false;
		}
	}
	sim_buf_puts(out, "],\"last_event_id\":");
	sim_buf_u64(out, end);
	sim_buf_puts(out, "}}");
}

void
sim_recover_write_dump(sim_buf *out, const sim_recover_origin *o,
		       const sim_block_info *blocks, size_t n, bool has_last,
		       uint64_t last)
{
	static const unsigned tiers[] = {SIM_TIER_GPU, SIM_TIER_CPU};
	sim_buf_puts(out, "{\"TreeDump\":{\"events\":[");
	uint64_t id = 0;
	for (size_t i = 0; i < n; i++) {
		for (size_t t = 0; t < 2; t++) {
			if (!(blocks[i].tiers & tiers[t])) {
				continue;
			}
			if (id > 0) {
				sim_buf_puts(out, ",");
			}
			begin_event(out, o, tiers[t], id++);
			write_stored_head(out, blocks[i].has_parent,
					  blocks[i].parent);
			write_block(out, blocks[i].hash, blocks[i].local_hash);
			sim_buf_puts(out, "]}}}}");
		}
	}
	sim_buf_puts(out, "],\"last_event_id\":");
	if (has_last) {
		sim_buf_u64(out, last);
	} else {
		sim_buf_puts(out, "null");
	}
	sim_buf_puts(out, "}}");
}

void
sim_recover_write_too_new(sim_buf *out, const sim_recover_query *q,
			  bool has_newest, uint64_t newest)
{
	sim_buf_puts(out, "{\"TooNew\":{\"requested_start\":");
	sim_buf_u64(out, q->start);
	sim_buf_puts(out, ",\"requested_end\":");
	sim_buf_u64(out, q->end);
	sim_buf_puts(out, ",\"newest_available\":");
	if (has_newest) {
		sim_buf_u64(out, newest);
	} else {
		sim_buf_puts(out, "null");
	}
	sim_buf_puts(out, "}}");
}

void
sim_recover_write_invalid_range(sim_buf *out, const sim_recover_query *q)
{
	sim_buf_puts(out, "{\"InvalidRange\":{\"start_id\":");
	sim_buf_u64(out, q->start);
	sim_buf_puts(out, ",\"end_id\":");
	sim_buf_u64(out, q->end);
	sim_buf_puts(out, "}}");
}

void
sim_recover_write_error(sim_buf *out, const char *message)
{
	sim_buf_puts(out, "{\"Error\":");
	sim_buf_str(out, message);
	sim_buf_puts(out, "}");
}

static const char *const kind_names[] = {
    [SIM_RECOVER_EVENTS] = "events",
    [SIM_RECOVER_TREE_DUMP] = "tree_dump",
    [SIM_RECOVER_TOO_NEW] = "too_new",
    [SIM_RECOVER_INVALID_RANGE] = "invalid_range",
    [SIM_RECOVER_ERROR] = "error",
    [SIM_RECOVER_HANG] = "hang",
};

const char *
sim_recover_kind_name(sim_recover_kind kind)
{
	return (unsigned)kind <= SIM_RECOVER_HANG ? kind_names[kind] : "?";
}

bool
sim_recover_kind_parse(const char *s, sim_recover_kind *out)
{
	/* "events" is not a fault: it is what the rank answers anyway. */
	for (int k = SIM_RECOVER_TREE_DUMP; k <= SIM_RECOVER_HANG; k++) {
		if (strcmp(s, kind_names[k]) == 0) {
			*out = (sim_recover_kind)k;
			return true;
		}
	}
	return false;
}
