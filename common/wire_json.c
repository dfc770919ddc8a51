#include "wire_json.h"

#include <inttypes.h>
#include <stdio.h>

json_t *
kvi_u64_json(uint64_t v)
{
	char buf[24];
	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return json_string(buf);
}

static json_t *
kvi_str_json(kvi_str s)
{
	return s.ptr == NULL ? json_null() : json_stringn(s.ptr, s.len);
}

static json_t *
kvi_hashes_json(const kvi_event *ev)
{
	json_t *a = json_array();
	for (uint32_t i = 0; i < ev->n_hashes; i++) {
		json_array_append_new(a, kvi_u64_json(ev->hashes[i]));
	}
	return a;
}

static json_t *
kvi_event_json(const kvi_event *ev)
{
	json_t *o = json_object();
	if (ev->type == KVI_EVENT_CLEARED) {
		json_object_set_new(o, "type", json_string("cleared"));
		return o;
	}
	if (ev->type == KVI_EVENT_SKIPPED) {
		/* not decoded: what it is, never a guess at its fields */
		json_object_set_new(o, "type", json_string("skipped"));
		json_object_set_new(o, "reason",
				    json_string(kvi_skip_name(ev->skip)));
		return o;
	}
	bool stored = ev->type == KVI_EVENT_STORED;
	json_object_set_new(o, "type",
			    json_string(stored ? "stored" : "removed"));
	json_object_set_new(o, "block_hashes", kvi_hashes_json(ev));
	json_object_set_new(o, "medium", kvi_str_json(ev->medium));
	json_object_set_new(o, "tier", json_string(kvi_tier_name(ev->tier)));
	json_object_set_new(o, "group_idx",
			    ev->has_group_idx ? json_integer(ev->group_idx)
					      : json_null());
	json_object_set_new(o, "locality", kvi_str_json(ev->locality));
	if (!stored) {
		return o;
	}
	json_object_set_new(o, "parent",
			    ev->has_parent ? kvi_u64_json(ev->parent)
					   : json_null());
	json_t *toks = json_array();
	for (uint32_t i = 0; i < ev->n_tokens; i++) {
		json_array_append_new(toks, json_integer(ev->tokens[i]));
	}
	json_object_set_new(o, "token_ids", toks);
	json_object_set_new(o, "block_size", json_integer(ev->block_size));
	json_object_set_new(o, "lora_name", kvi_str_json(ev->lora_name));
	json_object_set_new(o, "cache_salt", kvi_str_json(ev->cache_salt));
	return o;
}

json_t *
kvi_batch_to_json(const kvi_batch *b)
{
	json_t *o = json_object();
	json_object_set_new(o, "dp_rank",
			    b->has_dp_rank ? json_integer(b->dp_rank)
					   : json_null());
	json_object_set_new(o, "ts", json_real(b->ts));
	json_t *events = json_array();
	for (uint32_t i = 0; i < b->n_events; i++) {
		json_array_append_new(events, kvi_event_json(&b->events[i]));
	}
	json_object_set_new(o, "events", events);
	return o;
}
