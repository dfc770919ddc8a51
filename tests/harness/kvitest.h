/*
 * kvitest.h - the integration-test harness (library kvitest).
 *
 * Integration tests start the real kvindex binaries and the engine
 * simulator on loopback, with ephemeral ports and temporary directories,
 * and talk to them over HTTP and ZeroMQ. The harness gives them:
 *
 *   kvt_proc.h  child processes: start, stop (SIGTERM then SIGKILL),
 *               kill -9, wait, all killed at exit or on a fatal signal;
 *   kvt_run.h   a command-line tool run to its end, its input given and
 *               its output, error and exit status captured;
 *   kvt_env.h   temporary directories, polling with deadlines, ports;
 *   kvt_http.h  HTTP GET/POST with parsed JSON (u64-safe);
 *   kvt_zmq.h   connecting with a handshake wait, receiving with timeouts;
 *   kvt_sim.h   running the engine simulator and reading its layout;
 *   kvt_kubeapi.h  running the test Kubernetes API server and driving it.
 *
 * Paths of built binaries and of test data come from CMake as compile
 * definitions of each test (for example KVI_SIM_BIN and KVI_DATA_DIR), never
 * from hard-coded paths.
 */
#ifndef KVI_TESTS_KVITEST_H
#define KVI_TESTS_KVITEST_H

#include "kvt_env.h"
#include "kvt_http.h"
#include "kvt_kubeapi.h"
#include "kvt_proc.h"
#include "kvt_run.h"
#include "kvt_sim.h"
#include "kvt_zmq.h"

#endif /* KVI_TESTS_KVITEST_H */
