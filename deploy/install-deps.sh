#!/bin/sh
# Installs the Debian 12 packages kvindex builds, tests and runs with.
# Idempotent: when every package is present it returns at once without
# touching the network. Runs non-interactively (CI has no standard input).
set -eu

PKGS="build-essential cmake pkg-config git ca-certificates curl
libzmq3-dev libnng-dev liblmdb-dev lmdb-utils libevent-dev
libprotobuf-c-dev protobuf-c-compiler libcmocka-dev libmsgpack-dev
libjansson-dev libxxhash-dev libcurl4-openssl-dev libhiredis-dev
redis-server gnuplot-nox
clang libclang-rt-14-dev clang-format
kubernetes-client python3-kubernetes python3-yaml socat openssl
prometheus"

# prometheus is here for promtool, which checks deploy/monitoring. The
# package also installs the Prometheus server and enables its systemd
# unit: on a host booted with systemd the server starts and listens on
# :9090 (the tests use only promtool and ports of their own; stop it with
# `systemctl disable --now prometheus` if it is unwanted). In a container
# without systemd, invoke-rc.d starts nothing.

missing=""
for p in $PKGS; do
	# Any kubectl renders the manifests; one from another package
	# (Kubernetes' own apt repository, the Google Cloud SDK) owns
	# /usr/bin/kubectl, and dpkg refuses to install kubernetes-client over it.
	if [ "$p" = kubernetes-client ] && command -v kubectl >/dev/null; then
		continue
	fi
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
		missing="$missing $p"
	fi
done

if [ -z "$missing" ]; then
	exit 0
fi

echo "install-deps: installing:$missing"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q </dev/null
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing </dev/null
