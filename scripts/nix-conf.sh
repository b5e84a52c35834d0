#!/usr/bin/env bash
# Make a nix.conf (default /etc/nix/nix.conf, or $1) hold what the offline tests need, changing
# only those settings and keeping every other line as it is:
#   experimental-features  gains nix-command and flakes (features already on stay on)
#   sandbox = true, sandbox-fallback = false   (no silent fallback to unsandboxed builds)
#   substituters =                            (no binary cache: the machines are offline)
#   build-users-group = nixbld
# Before the first change, the file is copied to <conf>.before-kernel-builder (once: a later
# run never overwrites that backup). Says on stderr what it changed, or nothing when the file
# already had it all.
set -euo pipefail

conf="${1:-/etc/nix/nix.conf}"
backup="$conf.before-kernel-builder"
as_root() { if [ "$(id -u)" = 0 ] || [ -w "$(dirname "$conf")" ]; then "$@"; else sudo "$@"; fi; }

# The value of the last `key = value` line for KEY, or nothing.
current() {
    [ -f "$conf" ] || return 0
    sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*//p" "$conf" | tail -n 1
}

features="$(current experimental-features)"
for f in nix-command flakes; do
    case " $features " in *" $f "*) ;; *) features="${features:+$features }$f" ;; esac
done

existed=no
if [ -f "$conf" ]; then existed=yes; fi
changed=()
set_key() {
    local key="$1" value="$2" line
    line="$key = $value"
    line="${line% }"
    if [ -f "$conf" ] && [ "$(grep -cE "^[[:space:]]*$key[[:space:]]*=" "$conf" || true)" = 1 ] \
        && [ "$(current "$key")" = "$value" ]; then
        return
    fi
    if [ "$existed" = yes ] && [ ! -e "$backup" ]; then
        as_root cp -p "$conf" "$backup"
    fi
    local tmp
    tmp="$(mktemp)"
    { if [ -f "$conf" ]; then grep -vE "^[[:space:]]*$key[[:space:]]*=" "$conf" || true; fi; printf '%s\n' "$line"; } >"$tmp"
    as_root mkdir -p "$(dirname "$conf")"
    as_root install -m 0644 "$tmp" "$conf.tmp"
    as_root mv "$conf.tmp" "$conf"
    rm -f "$tmp"
    changed+=("$line")
}

set_key experimental-features "$features"
set_key sandbox true
set_key sandbox-fallback false
set_key substituters ""
set_key build-users-group nixbld

if [ "${#changed[@]}" -gt 0 ]; then
    {
        echo "nix-conf.sh: set in $conf (other settings unchanged):"
        printf '  %s\n' "${changed[@]}"
        if [ "$existed" = yes ]; then
            echo "  the file as it was before kernel-builder first changed it: $backup"
        else
            echo "  (there was no $conf before)"
        fi
    } >&2
fi
