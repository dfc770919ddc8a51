/*
 * test_engine_args.c - what an engine's command line in a pod spec says
 * (coordinator/discovery/engine_args.h): vLLM's flags in every form, long
 * and short, with '=' and '_'; the ranks a pod hosts by vLLM's rules;
 * SGLang's flags; the KV events' configuration whole and field by field;
 * the shell's -c form split by its quoting rules; values only known when
 * the container starts, never guessed; which container is the engine.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "engine_args.h"
#include "engine_args_int.h"

/* container returns {"name", "command": argv} (argv NULL-terminated). */
static json_t *
container(const char *name, const char *const *argv)
{
	json_t *cmd = json_array();
	for (size_t i = 0; argv[i] != NULL; i++) {
		json_array_append_new(cmd, json_string(argv[i]));
	}
	return json_pack("{s:s,s:o}", "name", name, "command", cmd);
}

/* spec_of returns {"containers": [c...]}, taking the containers. */
static json_t *
spec_of(json_t *c1, json_t *c2)
{
	json_t *cs = json_array();
	json_array_append_new(cs, c1);
	if (c2 != NULL) {
		json_array_append_new(cs, c2);
	}
	return json_pack("{s:o}", "containers", cs);
}

static kvc_engine_args
read_spec(json_t *spec, const char *want)
{
	kvc_engine_args ea;
	char err[200];
	memset(&ea, 0xa5, sizeof(ea));
	assert_int_equal(
	    kvc_engine_args_read(spec, want, &ea, err, sizeof(err)), KVI_OK);
	json_decref(spec);
	return ea;
}

#define ARGV(...) ((const char *const[]){__VA_ARGS__, NULL})

static kvc_engine_args
read_argv(const char *const *argv)
{
	return read_spec(spec_of(container("engine", argv), NULL), NULL);
}

/* read_sh runs script through /bin/sh -c. */
static kvc_engine_args
read_sh(const char *script)
{
	return read_argv(ARGV("/bin/sh", "-c", script));
}

static void
want_set(const kvc_ea_value *v, uint32_t x)
{
	if (v->state != KVC_EA_SET || v->none || v->value != x) {
		fail_msg("want %u, got state %d none %d value %u (%s)", x,
			 v->state, v->none, v->value, v->said);
	}
}

static void
want_unknown(const kvc_ea_value *v, const char *needle)
{
	if (v->state != KVC_EA_UNKNOWN || strstr(v->said, needle) == NULL) {
		fail_msg("want unknown with \"%s\", got state %d (%s)", needle,
			 v->state, v->said);
	}
}

static void
want_absent(const kvc_ea_value *v)
{
	if (v->state != KVC_EA_ABSENT) {
		fail_msg("want absent, got state %d (%s)", v->state, v->said);
	}
}

static void
test_vllm_dp_forms(void **state)
{
	(void)state;
	const char *const *fours[] = {
	    ARGV("vllm", "serve", "m", "--data-parallel-size", "4"),
	    ARGV("vllm", "serve", "m", "-dp", "4"),
	    ARGV("vllm", "serve", "m", "--data-parallel-size=4"),
	    ARGV("vllm", "serve", "m", "-dp=4"),
	    ARGV("vllm", "serve", "m", "--data_parallel_size=4"),
	    ARGV("vllm", "serve", "m", "-dp", "2", "-dp", "4"), /* last */
	    ARGV("/opt/venv/bin/vllm", "serve", "--model", "m", "-dp", "4"),
	    ARGV("python3", "-m", "vllm.entrypoints.openai.api_server",
		 "--model", "m", "-dp", "4"),
	    ARGV("/usr/bin/python3.12", "-u", "-m", "vllm.entrypoints.cli.main",
		 "serve", "m", "-dp", "4"),
	};
	for (size_t i = 0; i < sizeof(fours) / sizeof(fours[0]); i++) {
		kvc_engine_args ea = read_argv(fours[i]);
		assert_int_equal(ea.kind, KVC_EA_VLLM);
		assert_string_equal(ea.container, "engine");
		want_set(&ea.dp_size, 4);
		want_set(&ea.dp_start_rank, 0);
		assert_string_equal(ea.dp_size.said, "--data-parallel-size 4");
	}
	/* local size and start rank, long, short and with '=' */
	const char *const *locals[] = {
	    ARGV("vllm", "serve", "m", "--data-parallel-size", "8",
		 "--data-parallel-size-local", "2",
		 "--data-parallel-start-rank", "6"),
	    ARGV("vllm", "serve", "m", "-dp", "8", "-dpl", "2", "-dpr", "6"),
	    ARGV("vllm", "serve", "m", "-dpl=2", "-dpr=6", "--headless"),
	    ARGV("vllm", "serve", "m", "--data-parallel-size-local=2",
		 "--data_parallel_start_rank", "6"),
	};
	for (size_t i = 0; i < sizeof(locals) / sizeof(locals[0]); i++) {
		kvc_engine_args ea = read_argv(locals[i]);
		want_set(&ea.dp_size, 2);
		want_set(&ea.dp_start_rank, 6);
		assert_string_equal(ea.dp_size.said,
				    "--data-parallel-size-local 2");
		assert_string_equal(ea.dp_start_rank.said,
				    "--data-parallel-start-rank 6");
	}
	/* one rank of external load balancing */
	kvc_engine_args ea =
	    read_argv(ARGV("vllm", "serve", "m", "-dp", "4", "-dpn", "3"));
	want_set(&ea.dp_size, 1);
	want_set(&ea.dp_start_rank, 3);
	ea = read_argv(ARGV("vllm", "serve", "m", "--data-parallel-rank=3"));
	want_set(&ea.dp_start_rank, 3);
	/* a local size without a start rank starts at 0 */
	ea = read_argv(ARGV("vllm", "serve", "m", "-dp", "4", "-dpl", "2"));
	want_set(&ea.dp_size, 2);
	want_set(&ea.dp_start_rank, 0);
	/* a start rank without a local size is not read by vLLM */
	ea = read_argv(ARGV("vllm", "serve", "m", "-dp", "4", "-dpr", "2"));
	want_set(&ea.dp_size, 4);
	want_set(&ea.dp_start_rank, 0);
	/* nothing: absent, and nothing after a bare -- */
	ea = read_argv(ARGV("vllm", "serve", "m", "--", "-dp", "4"));
	assert_int_equal(ea.kind, KVC_EA_VLLM);
	want_absent(&ea.dp_size);
	want_absent(&ea.dp_start_rank);
	want_absent(&ea.block_size);
	assert_int_equal(ea.events, KVC_EA_EVENTS_OFF);
	/* Ray places the ranks; mp does not change anything */
	ea = read_argv(ARGV("vllm", "serve", "m", "-dp", "4", "-dpb", "ray"));
	want_unknown(&ea.dp_size, "ray");
	want_unknown(&ea.dp_start_rank, "ray");
	ea = read_argv(ARGV("vllm", "serve", "m", "-dp", "4",
			    "--data-parallel-backend=mp"));
	want_set(&ea.dp_size, 4);
	/* not an integer, out of range, no value */
	ea = read_argv(ARGV("vllm", "serve", "m", "-dp", "four"));
	want_unknown(&ea.dp_size, "\"four\" is not an integer");
	ea = read_argv(ARGV("vllm", "serve", "m", "-dp", "0"));
	want_unknown(&ea.dp_size, "not an integer in 1..65536");
	ea = read_argv(ARGV("vllm", "serve", "m", "-dp"));
	want_unknown(&ea.dp_size, "without a value");
}

static void
test_vllm_block_size(void **state)
{
	(void)state;
	kvc_engine_args ea =
	    read_argv(ARGV("vllm", "serve", "m", "--block-size", "32"));
	want_set(&ea.block_size, 32);
	assert_string_equal(ea.block_size.said, "--block-size 32");
	ea = read_argv(ARGV("vllm", "serve", "m", "--block_size=64"));
	want_set(&ea.block_size, 64);
	/* SGLang's name is not vLLM's */
	ea = read_argv(ARGV("vllm", "serve", "m", "--page-size", "64"));
	want_absent(&ea.block_size);
}

/* kv_events reads a vLLM engine given --kv-events-config cfg. */
static kvc_engine_args
kv_events(const char *cfg)
{
	return read_argv(ARGV("vllm", "serve", "m", "--kv-events-config", cfg));
}

static void
test_vllm_kv_events(void **state)
{
	(void)state;
	kvc_engine_args ea =
	    kv_events("{\"enable_kv_cache_events\": true, \"publisher\": "
		      "\"zmq\", \"endpoint\": \"tcp://*:6000\", "
		      "\"replay_endpoint\": \"tcp://*:6100\", \"topic\": "
		      "\"kv\"}");
	assert_int_equal(ea.events, KVC_EA_EVENTS_ON);
	want_set(&ea.zmq_port, 6000);
	want_set(&ea.replay_port, 6100);
	assert_string_equal(ea.zmq_port.said,
			    "--kv-events-config endpoint tcp://*:6000");
	/* enabled without an endpoint: the engine's default, and no replay */
	ea = kv_events("{\"enable_kv_cache_events\": true}");
	assert_int_equal(ea.events, KVC_EA_EVENTS_ON);
	want_set(&ea.zmq_port, 5557);
	assert_int_equal(ea.replay_port.state, KVC_EA_SET);
	assert_true(ea.replay_port.none);
	ea = kv_events("{\"enable_kv_cache_events\": \"true\", "
		       "\"replay_endpoint\": null, \"endpoint\": "
		       "\"tcp://[::]:6000\"}");
	want_set(&ea.zmq_port, 6000);
	assert_true(ea.replay_port.none);
	/* disabled: the ports are left to the fallbacks */
	const char *off[] = {
	    "{\"endpoint\": \"tcp://*:6000\"}",
	    "{\"enable_kv_cache_events\": false, \"endpoint\": "
	    "\"tcp://*:6000\"}",
	    "{\"enable_kv_cache_events\": true, \"publisher\": \"null\"}",
	};
	for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++) {
		ea = kv_events(off[i]);
		assert_int_equal(ea.events, KVC_EA_EVENTS_OFF);
		want_absent(&ea.zmq_port);
		want_absent(&ea.replay_port);
	}
	/* endpoints nothing on the pod listens on */
	ea = kv_events("{\"enable_kv_cache_events\": true, \"endpoint\": "
		       "\"ipc:///tmp/kv\"}");
	want_unknown(&ea.zmq_port, "is not tcp://host:port");
	ea = kv_events("{\"enable_kv_cache_events\": true, \"endpoint\": "
		       "\"tcp://10.0.0.9:6000\"}");
	want_unknown(&ea.zmq_port, "binding nothing on the pod");
	ea = kv_events("{\"enable_kv_cache_events\": true, \"endpoint\": "
		       "\"tcp://0.0.0.0:6000\"}"); /* vLLM connects to it */
	want_unknown(&ea.zmq_port, "binding nothing on the pod");
	ea = kv_events("{\"enable_kv_cache_events\": true, \"endpoint\": "
		       "\"tcp://*:70000\"}");
	want_unknown(&ea.zmq_port, "is not tcp://host:port");
	/* a replay endpoint on a host is still bound (a ROUTER binds) */
	ea = kv_events("{\"enable_kv_cache_events\": true, "
		       "\"replay_endpoint\": \"tcp://0.0.0.0:6100\"}");
	want_set(&ea.replay_port, 6100);
	/* unreadable configurations */
	const char *bad[] = {
	    "{not json",
	    "[1]",
	    "{\"enable_kv_cache_events\": \"maybe\"}",
	    "{\"enable_kv_cache_events\": true, \"publisher\": \"kafka\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ea = kv_events(bad[i]);
		assert_int_equal(ea.events, KVC_EA_EVENTS_UNKNOWN);
		want_unknown(&ea.zmq_port, "--kv-events-config");
		want_unknown(&ea.replay_port, "--kv-events-config");
	}
}

static void
test_vllm_kv_events_fields(void **state)
{
	(void)state;
	/* newer vLLM takes a JSON flag's fields one by one */
	kvc_engine_args ea =
	    read_argv(ARGV("vllm", "serve", "m",
			   "--kv-events-config.enable_kv_cache_events=true",
			   "--kv-events-config.endpoint", "tcp://*:6200",
			   "--kv_events_config.replay_endpoint=tcp://*:6300"));
	assert_int_equal(ea.events, KVC_EA_EVENTS_ON);
	want_set(&ea.zmq_port, 6200);
	want_set(&ea.replay_port, 6300);
	/* the fields replace a whole JSON given too: vLLM passes them last */
	ea = read_argv(ARGV("vllm", "serve", "m", "--kv-events-config",
			    "{\"enable_kv_cache_events\": true, \"endpoint\": "
			    "\"tcp://*:6000\"}",
			    "--kv-events-config.enable_kv_cache_events",
			    "true"));
	want_set(&ea.zmq_port, 5557);
	ea = read_argv(ARGV("vllm", "serve", "m",
			    "--kv-events-config.endpoint=tcp://*:6200"));
	assert_int_equal(ea.events, KVC_EA_EVENTS_OFF); /* not enabled */
	want_absent(&ea.zmq_port);
}

static void
test_sglang(void **state)
{
	(void)state;
	kvc_engine_args ea = read_argv(
	    ARGV("python3", "-m", "sglang.launch_server", "--model-path", "m",
		 "--dp-size", "4", "--page-size", "64", "--kv-events-config",
		 "{\"publisher\": \"zmq\", \"endpoint\": \"tcp://*:5600\", "
		 "\"replay_endpoint\": \"tcp://*:5700\"}"));
	assert_int_equal(ea.kind, KVC_EA_SGLANG);
	want_set(&ea.dp_size, 4);
	want_set(&ea.dp_start_rank, 0);
	want_set(&ea.block_size, 64);
	assert_string_equal(ea.block_size.said, "--page-size 64");
	assert_int_equal(ea.events, KVC_EA_EVENTS_ON);
	want_set(&ea.zmq_port, 5600);
	want_set(&ea.replay_port, 5700);
	const char *const *twos[] = {
	    ARGV("sglang", "serve", "--model-path", "m", "--dp", "2"),
	    ARGV("sglang", "serve", "--model-path", "m",
		 "--data-parallel-size=2"),
	    ARGV("python", "-m", "sglang.launch_server", "--dp-size=2",
		 "--nnodes", "1"),
	};
	for (size_t i = 0; i < sizeof(twos) / sizeof(twos[0]); i++) {
		ea = read_argv(twos[i]);
		assert_int_equal(ea.kind, KVC_EA_SGLANG);
		want_set(&ea.dp_size, 2);
	}
	/* vLLM's short flags and names are not SGLang's */
	ea = read_argv(ARGV("sglang", "serve", "--model-path", "m", "-dp", "4",
			    "--block-size", "32", "--dp_size", "4"));
	want_absent(&ea.dp_size);
	want_absent(&ea.block_size);
	/* ranks over several nodes */
	ea = read_argv(ARGV("sglang", "serve", "--dp-size", "4", "--nnodes",
			    "2", "--node-rank", "1"));
	want_unknown(&ea.dp_size, "--nnodes is 2");
	/* SGLang's publisher is off unless zmq; enable_kv_cache_events is
	 * not its field */
	ea = read_argv(ARGV("sglang", "serve", "--kv-events-config",
			    "{\"enable_kv_cache_events\": true, \"endpoint\": "
			    "\"tcp://*:5600\"}"));
	assert_int_equal(ea.events, KVC_EA_EVENTS_OFF);
	want_absent(&ea.zmq_port);
	/* SGLang binds 0.0.0.0 too */
	ea = read_argv(ARGV("sglang", "serve", "--kv-events-config",
			    "{\"publisher\": \"zmq\", \"endpoint\": "
			    "\"tcp://0.0.0.0:5600\"}"));
	want_set(&ea.zmq_port, 5600);
	assert_true(ea.replay_port.none);
}

static void
test_shell_form(void **state)
{
	(void)state;
	kvc_engine_args ea = read_sh(
	    "vllm serve m --data-parallel-size 2 --kv-events-config "
	    "'{\"enable_kv_cache_events\": true, \"endpoint\": "
	    "\"tcp://*:6000\", \"replay_endpoint\": \"tcp://*:6100\"}'");
	assert_int_equal(ea.kind, KVC_EA_VLLM);
	want_set(&ea.dp_size, 2);
	want_set(&ea.zmq_port, 6000);
	want_set(&ea.replay_port, 6100);
	/* double quotes, backslashes, and the commands around the engine */
	ea = read_argv(ARGV(
	    "bash", "-ec",
	    "set -e; pip install x && exec env A=1 VLLM_LOGGING=2 vllm serve "
	    "\"m\" -dp=3 --kv-events-config "
	    "\"{\\\"enable_kv_cache_events\\\": true, \\\"endpoint\\\": "
	    "\\\"tcp://*:7000\\\"}\" 2>&1 | tee /log"));
	want_set(&ea.dp_size, 3);
	want_set(&ea.zmq_port, 7000);
	/* comments, continued lines, redirections and the next command */
	ea = read_sh("# the engine\n"
		     "cd /app\n"
		     "vllm serve m \\\n"
		     "  --block-size 32 \\\n"
		     "  -dpl 2 >/tmp/out 2> /tmp/err # not -dpr 4\n"
		     "echo -dp 9\n");
	want_set(&ea.block_size, 32);
	want_set(&ea.dp_size, 2);
	want_set(&ea.dp_start_rank, 0);
	/* a shell given options before -c; SGLang in a script */
	ea = read_argv(ARGV("/bin/bash", "-o", "pipefail", "-c",
			    "python3 -m sglang.launch_server --dp-size 2"));
	assert_int_equal(ea.kind, KVC_EA_SGLANG);
	want_set(&ea.dp_size, 2);
	/* a script that does not split */
	ea = read_sh("vllm serve m -dp '4");
	assert_int_equal(ea.kind, KVC_EA_NONE);
	assert_non_null(strstr(ea.why, "unterminated single quote"));
}

/* read_env reads a container of argv with env (JSON text, taken). */
static kvc_engine_args
read_env(const char *const *argv, const char *env)
{
	json_t *c = container("engine", argv);
	json_object_set_new(c, "env", json_loads(env, 0, NULL));
	return read_spec(spec_of(c, NULL), NULL);
}

/* Kubernetes expands $(VAR) in command and args from the container's env
 * before the engine runs: a literal value is known, anything else is set
 * when the container starts. */
static void
k8s_env_cases(void)
{
	kvc_engine_args ea =
	    read_env(ARGV("vllm", "serve", "m", "-dp", "$(DP_SIZE)", "-dpl",
			  "$(LOCAL)", "-dpr", "$(START)"),
		     "[{\"name\": \"DP_SIZE\", \"value\": \"8\"},"
		     " {\"name\": \"HALF\", \"value\": \"4\"},"
		     " {\"name\": \"LOCAL\", \"value\": \"$(HALF)\"},"
		     " {\"name\": \"START\", \"value\": \"4\"}]");
	want_set(&ea.dp_size, 4); /* the local size, from another var */
	want_set(&ea.dp_start_rank, 4);
	/* valueFrom (the downward API, a ConfigMap): not known here */
	ea = read_env(ARGV("vllm", "serve", "m", "-dp", "$(DP_SIZE)"),
		      "[{\"name\": \"DP_SIZE\", \"valueFrom\": "
		      "{\"configMapKeyRef\": {\"name\": \"c\", \"key\": "
		      "\"k\"}}}]");
	want_unknown(&ea.dp_size, "set when the container starts");
	/* $$ escapes: the engine gets "$(DP_SIZE)", not a number */
	ea = read_env(ARGV("vllm", "serve", "m", "-dp", "$$(DP_SIZE)"),
		      "[{\"name\": \"DP_SIZE\", \"value\": \"2\"}]");
	want_unknown(&ea.dp_size, "is not an integer");
	/* a var a later one defines is not expanded in an earlier value */
	ea = read_env(ARGV("vllm", "serve", "m", "-dp", "$(A)"),
		      "[{\"name\": \"A\", \"value\": \"$(B)\"},"
		      " {\"name\": \"B\", \"value\": \"2\"}]");
	want_unknown(&ea.dp_size, "set when the container starts");
	/* in a shell's script too, before the shell reads it */
	ea = read_env(ARGV("/bin/sh", "-c",
			   "exec vllm serve m --data-parallel-size $(DP)"),
		      "[{\"name\": \"DP\", \"value\": \"2\"}]");
	want_set(&ea.dp_size, 2);
}

static void
test_set_at_start(void **state)
{
	(void)state;
	/* words the shell expands are never guessed */
	const char *dyn[] = {
	    "vllm serve m --data-parallel-size $DP_SIZE",
	    "vllm serve m --data-parallel-size=${DP_SIZE}",
	    "vllm serve m -dp \"$(( 2 * 2 ))\"",
	    "vllm serve m -dp `cat /etc/dp`",
	    "vllm serve m -dp \"$DP\"",
	};
	for (size_t i = 0; i < sizeof(dyn) / sizeof(dyn[0]); i++) {
		kvc_engine_args ea = read_sh(dyn[i]);
		want_unknown(&ea.dp_size, "set when the container starts");
		want_set(&ea.dp_start_rank, 0); /* whatever the size */
	}
	kvc_engine_args ea = read_sh("vllm serve m --data-parallel-size $DP");
	assert_string_equal(ea.dp_size.said,
			    "the engine's --data-parallel-size is $DP, set "
			    "when the container starts");
	/* a start rank from the worker's index; the local size is known */
	ea = read_sh("vllm serve m -dp 8 -dpl 2 --data-parallel-start-rank "
		     "$((LWS_WORKER_INDEX * 2))");
	want_set(&ea.dp_size, 2);
	want_unknown(&ea.dp_start_rank, "$((LWS_WORKER_INDEX * 2))");
	ea = read_sh("vllm serve m -dp 8 -dpl $LOCAL -dpr 4");
	want_unknown(&ea.dp_size, "$LOCAL");
	want_set(&ea.dp_start_rank, 4);
	ea = read_sh("vllm serve m -dp 8 -dpn $RANK");
	want_set(&ea.dp_size, 1);
	want_unknown(&ea.dp_start_rank, "$RANK");
	ea = read_sh("sglang serve --dp-size $DP");
	want_unknown(&ea.dp_size, "$DP");
	want_set(&ea.dp_start_rank, 0);
	/* single quotes keep $ as it is: the engine gets "$DP" */
	ea = read_sh("vllm serve m -dp '$DP'");
	want_unknown(&ea.dp_size, "is not an integer");
	/* Kubernetes' own $(VAR) in a command or args */
	ea = read_argv(ARGV("vllm", "serve", "m", "-dp", "$(DP_SIZE)"));
	want_unknown(&ea.dp_size, "$(DP_SIZE), set when the container starts");
	k8s_env_cases();
	/* an expansion in a field that is not read does not matter */
	ea = read_sh("vllm serve m --kv-events-config "
		     "\"{\\\"enable_kv_cache_events\\\":true,"
		     "\\\"endpoint\\\":\\\"tcp://*:5557\\\","
		     "\\\"topic\\\":\\\"kv@$POD_IP\\\"}\"");
	want_set(&ea.zmq_port, 5557);
	ea = read_sh("vllm serve m --kv-events-config "
		     "\"{\\\"enable_kv_cache_events\\\":true,"
		     "\\\"endpoint\\\":\\\"tcp://*:$PORT\\\"}\"");
	want_unknown(&ea.zmq_port, "set when the container starts");
	assert_true(ea.replay_port.none);
	ea = read_sh("vllm serve m --kv-events-config \"$KV_CONFIG\"");
	assert_int_equal(ea.events, KVC_EA_EVENTS_UNKNOWN);
	want_unknown(&ea.zmq_port, "$KV_CONFIG");
	want_unknown(&ea.replay_port, "$KV_CONFIG");
	/* --config names a file that may set what the line does not */
	ea = read_argv(ARGV("vllm", "serve", "m", "--config", "/etc/v.yaml",
			    "--block-size", "16"));
	want_unknown(&ea.dp_size, "--config");
	want_set(&ea.block_size, 16);
	assert_int_equal(ea.events, KVC_EA_EVENTS_UNKNOWN);
	ea = read_argv(ARGV("vllm", "serve", "m", "--config", "/etc/v.yaml",
			    "-dpb", "mp", "-dpn", "2"));
	want_set(&ea.dp_size, 1);
	want_set(&ea.dp_start_rank, 2);
}

static void
test_containers(void **state)
{
	(void)state;
	/* no engine */
	kvc_engine_args ea =
	    read_spec(spec_of(container("side", ARGV("sleep", "inf")),
			      container("log", ARGV("tail", "-f", "/log"))),
		      NULL);
	assert_int_equal(ea.kind, KVC_EA_NONE);
	want_absent(&ea.dp_size);
	want_absent(&ea.zmq_port);
	assert_non_null(strstr(ea.why, "no container runs vllm serve"));
	ea = read_spec(spec_of(container("side", ARGV("sleep", "inf")), NULL),
		       NULL);
	assert_non_null(strstr(ea.why, "container side runs no vllm serve"));
	ea = read_spec(json_pack("{s:[]}", "containers"), NULL);
	assert_int_equal(ea.kind, KVC_EA_NONE);
	ea = read_spec(json_object(), NULL);
	assert_int_equal(ea.kind, KVC_EA_NONE);
	/* the first container that runs an engine */
	ea = read_spec(
	    spec_of(container("proxy", ARGV("python3", "-m", "http.server")),
		    container("vllm", ARGV("vllm", "serve", "m", "-dp", "2"))),
	    NULL);
	assert_int_equal(ea.kind, KVC_EA_VLLM);
	assert_string_equal(ea.container, "vllm");
	want_set(&ea.dp_size, 2);
	/* the annotation names it */
	json_t *two =
	    spec_of(container("a", ARGV("vllm", "serve", "-dp", "2")),
		    container("b", ARGV("vllm", "serve", "-dp", "4")));
	json_incref(two);
	ea = read_spec(two, "b");
	assert_string_equal(ea.container, "b");
	want_set(&ea.dp_size, 4);
	char err[200];
	assert_int_equal(kvc_engine_args_read(two, "c", &ea, err, sizeof(err)),
			 KVI_EINVAL);
	assert_non_null(strstr(err, "kvindex.io/engine-container"));
	assert_non_null(strstr(err, "\"c\""));
	json_decref(two);
	/* a named container that runs no engine says why */
	ea = read_spec(
	    spec_of(container("a", ARGV("/entrypoint.sh", "-dp", "2")), NULL),
	    "a");
	assert_int_equal(ea.kind, KVC_EA_NONE);
	assert_non_null(strstr(ea.why, "container a runs no vllm serve"));
}

static void
test_image_entrypoint(void **state)
{
	(void)state;
	static const struct {
		const char *image;
		bool vllm;
	} cases[] = {
	    {"vllm/vllm-openai", true},
	    {"vllm/vllm-openai:v0.10.1", true},
	    {"docker.io/vllm/vllm-openai:latest", true},
	    {"registry:5000/mirror/vllm/vllm-openai@sha256:ab", true},
	    {"myorg/vllm/vllm-openai-custom:1", false},
	    {"notvllm/vllm-openai:1", false},
	    {"lmsysorg/sglang:latest", false},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *c = json_pack("{s:s,s:s,s:[s,s,s,s]}", "name", "e",
				      "image", cases[i].image, "args",
				      "--model", "m", "-dp", "2");
		kvc_engine_args ea = read_spec(spec_of(c, NULL), NULL);
		assert_int_equal(ea.kind,
				 cases[i].vllm ? KVC_EA_VLLM : KVC_EA_NONE);
		if (cases[i].vllm) {
			want_set(&ea.dp_size, 2);
		} else {
			assert_non_null(strstr(ea.why, "entrypoint"));
		}
	}
	/* a command replaces the image's entrypoint */
	json_t *c = json_pack("{s:s,s:s,s:[s],s:[s,s]}", "name", "e", "image",
			      "vllm/vllm-openai", "command", "/start.sh",
			      "args", "-dp", "2");
	kvc_engine_args ea = read_spec(spec_of(c, NULL), NULL);
	assert_int_equal(ea.kind, KVC_EA_NONE);
	/* a command that is not strings */
	c = json_pack("{s:s,s:[s,i]}", "name", "e", "command", "vllm", 1);
	ea = read_spec(spec_of(c, NULL), NULL);
	assert_int_equal(ea.kind, KVC_EA_NONE);
	assert_non_null(strstr(ea.why, "not an array of strings"));
}

/* words_are checks a command's words, "+" marking a dyn one. */
static void
words_are(const kvc_ewords *ws, const char *const *want)
{
	size_t n = 0;
	for (; want[n] != NULL; n++) {
		const char *w = want[n];
		bool dyn = w[0] == '+';
		if (n >= ws->n) {
			fail_msg("word %zu: missing, want %s", n, w);
		}
		assert_string_equal(ws->w[n].s, w + dyn);
		assert_int_equal(ws->w[n].dyn, dyn);
	}
	assert_int_equal(ws->n, n);
}

static void
test_shell_split(void **state)
{
	(void)state;
	kvc_ecmds c;
	char why[128];
	assert_true(kvc_shell_split(
	    "a 'b c' \"d $E\" f\\ g ${H:-1}x $((1 + 2)) '$I' \"\\$J\" ''; "
	    "k&&l||m|n&o\n",
	    &c, why, sizeof(why)));
	assert_int_equal(c.n, 6);
	words_are(&c.c[0], ARGV("a", "b c", "+d $E", "f g", "+${H:-1}x",
				"+$((1 + 2))", "$I", "$J", ""));
	words_are(&c.c[1], ARGV("k"));
	words_are(&c.c[2], ARGV("l"));
	words_are(&c.c[3], ARGV("m"));
	words_are(&c.c[4], ARGV("n"));
	words_are(&c.c[5], ARGV("o"));
	/* the redirections and comment go; the continued line joins */
	kvc_ecmds_fini(&c);
	assert_true(kvc_shell_split("p 2>&1 >/dev/null &>x <in q # r s\n"
				    "t\\\nu \"v\\\nw\" `x y` $",
				    &c, why, sizeof(why)));
	assert_int_equal(c.n, 2);
	words_are(&c.c[0], ARGV("p", "q"));
	words_are(&c.c[1], ARGV("tu", "vw", "+`x y`", "$"));
	kvc_ecmds_fini(&c);
	const char *bad[] = {"a 'b", "a \"b", "a $(b", "a ${b", "a `b"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_false(kvc_shell_split(bad[i], &c, why, sizeof(why)));
		assert_non_null(strstr(why, "unterminated"));
		assert_int_equal(c.n, 0);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_vllm_dp_forms),
	    cmocka_unit_test(test_vllm_block_size),
	    cmocka_unit_test(test_vllm_kv_events),
	    cmocka_unit_test(test_vllm_kv_events_fields),
	    cmocka_unit_test(test_sglang),
	    cmocka_unit_test(test_shell_form),
	    cmocka_unit_test(test_set_at_start),
	    cmocka_unit_test(test_containers),
	    cmocka_unit_test(test_image_entrypoint),
	    cmocka_unit_test(test_shell_split),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
