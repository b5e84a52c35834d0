#!/usr/bin/env bash
# A Nix remote builder on this very machine, for the tests and benchmarks of
# `build-and-copy --builders` (tests/it/nix_remote.rs, bench/nix-remote.sh): a second sshd on a
# free 127.0.0.1 port (its own host key, key-only auth, its own authorized_keys) whose sessions
# see their own Nix store. The sshd runs in a private mount namespace where DIR/nix is mounted
# on /nix and DIR/etc-nix on /etc/nix, so `nix-daemon --stdio` (what Nix's `ssh-ng://` store
# runs over SSH) opens a separate store (the physical files are DIR/nix/store/...) with its own
# nix.conf; the rest of the file system (/usr, the host's compiler) is shared, as on a real
# builder of the same distribution. Its builds run as the users kbremote1..4 (group kbremote),
# never as the nixbld users of the machine's own store, whose builds Nix would kill otherwise
# (it kills every process of a build user before a build starts).
#
#   scripts/remote-builder.sh setup        (root; idempotent) openssh-server from apt, the
#                                          kbremote build users
#   scripts/remote-builder.sh start DIR    start the builder (DIR must not exist yet or be
#                                          empty); prints KEY=VALUE lines:
#                                            BUILDER   the `builders` spec line for Nix
#                                            NIX_SSHOPTS  what Nix's ssh needs (the port)
#                                            PID       the sshd's process id
#                                            STORE     DIR/nix/store, the builder's store
#   scripts/remote-builder.sh stop DIR     stop it (its sshd and every session), by process id
#
# With KB_REMOTE_TMPFS=SIZE (e.g. 4g) the builder's store is a tmpfs of at most SIZE mounted on
# DIR/nix (unmounted by `stop`), so a test does not need disk for the second copy of the
# cells' inputs. KB_REMOTE_MAX_JOBS (default 2) is the builder's max-jobs and the spec's.
#
# Needs root (mount namespaces, sshd, build users).
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

setup() {
    if [ ! -x /usr/sbin/sshd ]; then
        as_root apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server >/dev/null
    fi
    if ! getent group kbremote >/dev/null; then
        as_root groupadd --system kbremote
    fi
    for i in 1 2 3 4; do
        if ! id "kbremote$i" >/dev/null 2>&1; then
            as_root useradd --system --no-create-home --home-dir /var/empty --shell /usr/sbin/nologin \
                --gid kbremote --groups kbremote "kbremote$i"
        fi
    done
}

# Every descendant of process $1 (children first listed last), from /proc.
descendants() {
    local kids k
    kids="$(ps -o pid= --ppid "$1" 2>/dev/null || true)"
    for k in $kids; do
        descendants "$k"
        echo "$k"
    done
}

start() {
    local dir="$1"
    [ -x /usr/sbin/sshd ] || { echo "remote-builder.sh: no /usr/sbin/sshd: run '$0 setup' (root, apt)" >&2; exit 1; }
    getent group kbremote >/dev/null || { echo "remote-builder.sh: no kbremote build users: run '$0 setup'" >&2; exit 1; }
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    [ -z "$(ls -A "$dir")" ] || { echo "remote-builder.sh: $dir is not empty" >&2; exit 1; }
    mkdir -p "$dir/nix" "$dir/etc-nix" "$dir/run"
    if [ -n "${KB_REMOTE_TMPFS:-}" ]; then
        as_root mount -t tmpfs -o "size=$KB_REMOTE_TMPFS,mode=0755" kb-remote-store "$dir/nix"
    fi
    mkdir -p "$dir/nix/store" "$dir/nix/var"
    ssh-keygen -q -t ed25519 -N '' -C kernel-builder-test-host -f "$dir/host_key"
    ssh-keygen -q -t ed25519 -N '' -C kernel-builder-test-client -f "$dir/client_key"
    cp "$dir/client_key.pub" "$dir/authorized_keys"
    chmod 600 "$dir/authorized_keys"
    cat >"$dir/etc-nix/nix.conf" <<EOF
experimental-features = nix-command flakes
# relaxed: the offline test package set's host-toolchain derivations are __noChroot; every
# other derivation is sandboxed as on the machine's own store.
sandbox = relaxed
sandbox-fallback = false
substituters =
build-users-group = kbremote
max-jobs = ${KB_REMOTE_MAX_JOBS:-2}
EOF
    local port
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    cat >"$dir/sshd_config" <<EOF
ListenAddress 127.0.0.1:$port
HostKey $dir/host_key
PidFile $dir/run/sshd.pid
AuthorizedKeysFile $dir/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AllowTcpForwarding no
X11Forwarding no
PrintMotd no
LogLevel VERBOSE
EOF
    # sshd re-executes itself and wants its privilege separation directory.
    as_root mkdir -p /run/sshd
    # exec: the pid of this background job is the sshd's own.
    nohup unshare --mount --propagation private -- sh -c \
        'mount --bind "$1/nix" /nix && mount --bind "$1/etc-nix" /etc/nix && exec /usr/sbin/sshd -D -e -f "$1/sshd_config"' \
        sh "$dir" >"$dir/sshd.log" 2>&1 </dev/null &
    local pid=$!
    echo "$pid" >"$dir/pid"
    local opts="-p $port"
    local hostkey
    hostkey="$(base64 -w0 <"$dir/host_key.pub")"
    local i
    for i in $(seq 1 100); do
        if ssh -p "$port" -i "$dir/client_key" -o IdentitiesOnly=yes -o BatchMode=yes \
            -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
            root@127.0.0.1 'test -d /nix/store && nix-store --version' >/dev/null 2>&1; then
            echo "BUILDER=ssh-ng://root@127.0.0.1 $(uname -m)-linux $dir/client_key ${KB_REMOTE_MAX_JOBS:-2} 1 - - $hostkey"
            echo "NIX_SSHOPTS=$opts"
            echo "PID=$pid"
            echo "STORE=$dir/nix/store"
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then break; fi
        sleep 0.1
    done
    echo "remote-builder.sh: the test sshd on 127.0.0.1:$port did not come up; its log:" >&2
    cat "$dir/sshd.log" >&2
    stop "$dir"
    exit 1
}

stop() {
    local dir="$1" pid
    if [ -f "$dir/pid" ]; then
        pid="$(cat "$dir/pid")"
        # One kill for all of them, the listener first: no session outlives it to finish a build.
        # shellcheck disable=SC2046
        kill -9 "$pid" $(descendants "$pid") 2>/dev/null || true
        rm -f "$dir/pid"
    fi
    if mountpoint -q "$dir/nix"; then
        as_root umount -l "$dir/nix"
    fi
}

case "${1:-}" in
    setup) setup ;;
    start) start "${2:?usage: $0 start DIR}" ;;
    stop) stop "${2:?usage: $0 stop DIR}" ;;
    *) echo "usage: $0 setup | start DIR | stop DIR" >&2; exit 2 ;;
esac
