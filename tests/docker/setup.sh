#!/usr/bin/env bash
# Prepare a real Docker engine for tests/docker (run as root; idempotent).
#
#   1. install docker.io and busybox-static when missing (apt-get, quiet);
#   2. start dockerd in the background unless `docker info` already answers,
#      logging to $ASTRAEUS_DOCKERD_LOG (default /tmp/astraeus-dockerd.log);
#   3. build the test image astraeus-test:busybox with `docker import` from a
#      busybox-static rootfs (no registry is ever contacted).
#
# Exits non-zero with one clear line when something cannot be done.
set -euo pipefail

IMAGE="${ASTRAEUS_TEST_IMAGE:-astraeus-test:busybox}"
DOCKERD_LOG="${ASTRAEUS_DOCKERD_LOG:-/tmp/astraeus-dockerd.log}"
WAIT_SECONDS="${ASTRAEUS_DOCKERD_WAIT:-60}"

say() { echo "setup.sh: $*"; }
die() { echo "setup.sh: error: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run me as root (I install packages and start dockerd)"

busybox_bin() {
    # busybox-static installs /bin/busybox; prefer a statically linked one.
    local candidate
    for candidate in /bin/busybox /usr/bin/busybox; do
        if [ -x "$candidate" ] && ! ldd "$candidate" >/dev/null 2>&1; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

install_packages() {
    local wanted=()
    { command -v dockerd && command -v docker; } >/dev/null 2>&1 || wanted+=(docker.io)
    busybox_bin >/dev/null || wanted+=(busybox-static)
    [ "${#wanted[@]}" -eq 0 ] && return 0
    say "installing ${wanted[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null || die "apt-get update failed"
    apt-get install -y -qq --no-install-recommends "${wanted[@]}" >/dev/null \
        || die "apt-get install ${wanted[*]} failed"
}

engine_answers() { timeout 10 docker info >/dev/null 2>&1; }

start_dockerd() {
    if engine_answers; then
        say "docker engine already answers"
        return 0
    fi
    local pidfile=/var/run/docker.pid
    if [ -f "$pidfile" ] && ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        rm -f "$pidfile"  # left by a dockerd that died; it would refuse to start
    fi
    say "starting dockerd (log: $DOCKERD_LOG)"
    setsid nohup dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null &
    local waited=0
    until engine_answers; do
        if ! kill -0 $! 2>/dev/null; then
            tail -n 20 "$DOCKERD_LOG" >&2 || true
            die "dockerd exited at once; see $DOCKERD_LOG"
        fi
        if [ "$waited" -ge "$WAIT_SECONDS" ]; then
            tail -n 20 "$DOCKERD_LOG" >&2 || true
            die "dockerd did not answer within ${WAIT_SECONDS}s; see $DOCKERD_LOG"
        fi
        sleep 1
        waited=$((waited + 1))
    done
    say "docker engine is up after ${waited}s"
}

build_busybox_image() {
    if docker image inspect "$IMAGE" >/dev/null 2>&1; then
        say "image $IMAGE already present"
        return 0
    fi
    local busybox root
    busybox="$(busybox_bin)" || die "no statically linked busybox found"
    root="$(mktemp -d /tmp/astraeus-rootfs.XXXXXX)"
    mkdir -p "$root"/{bin,etc,tmp,proc,sys,dev,work,home}
    chmod 1777 "$root/tmp"
    cp "$busybox" "$root/bin/busybox"
    local applet
    for applet in $("$busybox" --list); do
        [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
    done
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' \
        >"$root/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
    if ! tar -C "$root" -c . | docker import \
        --change 'CMD ["/bin/sh"]' \
        --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
        --change 'WORKDIR /' \
        - "$IMAGE" >/dev/null; then
        rm -rf "$root"
        die "docker import of $IMAGE failed"
    fi
    rm -rf "$root"
    say "built image $IMAGE"
}

install_packages
start_dockerd
build_busybox_image
