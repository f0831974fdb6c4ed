#!/usr/bin/env bash
# Build corral's docker sandbox image without any image registry.
#
# Shipped in the package beside its Dockerfile (`corral image build` runs it from an
# installed wheel; scripts/build_sandbox_image.sh runs it from a checkout): one copy.
#
#   CORRAL_SANDBOX_IMAGE  tag to build            (default corral-sandbox:latest)
#   CORRAL_BASE_IMAGE     image the Dockerfile starts FROM (default corral-base:bookworm)
#   CORRAL_BASE_SUITE     Debian suite for the base rootfs (default bookworm)
#   CORRAL_CACHE_DIR      where the debootstrap rootfs tarball is cached (default /var/cache/corral)
#
# If the base image is not present locally it is made with debootstrap from the apt
# mirror this machine already uses, then `docker import`ed. The rootfs tarball is
# cached, so later rebuilds skip debootstrap (delete the tarball to refresh it).
# Nothing is ever pulled: the legacy builder is used with --pull=false.
set -euo pipefail

# The directory of this script and its Dockerfile: the build context (it COPYs nothing).
image_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
suite=${CORRAL_BASE_SUITE:-bookworm}
image=${CORRAL_SANDBOX_IMAGE:-corral-sandbox:latest}
base_image=${CORRAL_BASE_IMAGE:-corral-base:$suite}
cache_dir=${CORRAL_CACHE_DIR:-/var/cache/corral}
default_mirror=http://deb.debian.org/debian

# Legacy builder: works with a 20.10 engine and with a CLI that has no buildx plugin,
# and honours --network host without BuildKit entitlements. Caller may override.
export DOCKER_BUILDKIT=${DOCKER_BUILDKIT:-0}

log() { printf '[build_sandbox_image] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Print the first URI of an enabled "deb" source for suite $1, from both the
# one-line (*.list) and deb822 (*.sources) apt formats. Prints nothing if none.
apt_source_uri() {
    local want=$1 f out=''
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [[ -r $f ]] || continue
        # deb [opt=a opt2=b] URI SUITE COMPONENTS...
        out+=$(awk -v s="$want" '
            $1 == "deb" {
                i = 2
                if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                if ($(i + 1) == s) print $i
            }' "$f")$'\n'
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ -r $f ]] || continue
        # One stanza per paragraph; keys are case-insensitive.
        out+=$(awk -v s="$want" '
            BEGIN { RS = ""; FS = "\n" }
            {
                types = ""; uris = ""; suites = ""; enabled = "yes"
                for (i = 1; i <= NF; i++) {
                    line = $i
                    if (line ~ /^[ \t]*#/) continue
                    key = tolower(line); sub(/:.*/, "", key)
                    val = line; sub(/^[^:]*:[ \t]*/, "", val)
                    if (key == "types") types = " " val " "
                    else if (key == "uris") uris = val
                    else if (key == "suites") suites = " " val " "
                    else if (key == "enabled") enabled = tolower(val)
                }
                if (enabled != "no" && types ~ / deb / && suites ~ (" " s " ")) {
                    split(uris, u, /[ \t]+/); print u[1]
                }
            }' "$f")$'\n'
    done
    out=$(printf '%s' "$out" | sed '/^$/d')
    printf '%s' "${out%%$'\n'*}"
}

workdir=''
cleanup() {
    [[ -n $workdir && -d $workdir ]] || return 0
    # debootstrap mounts /proc and /sys in the target; an interrupted run can leave
    # them mounted, and rm -rf must never descend into them.
    local m
    while read -r m; do umount -l "$m" 2>/dev/null || true; done \
        < <(awk -v d="$workdir/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r)
    rm -rf --one-file-system "$workdir"
}
trap cleanup EXIT

# Debootstrap a minbase rootfs into the cached tarball $1.
make_rootfs_tarball() {
    local tarball=$1 mirror security rootfs
    command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
    mirror=$(apt_source_uri "$suite")
    mirror=${mirror:-$default_mirror}
    security=$(apt_source_uri "$suite-security")

    mkdir -p "$cache_dir"
    # Under the cache dir, not /tmp: /tmp may be a nodev/noexec tmpfs, which breaks debootstrap.
    workdir=$(mktemp -d "$cache_dir/rootfs.XXXXXX")
    rootfs=$workdir/rootfs
    log "debootstrap --variant=minbase $suite from $mirror (log: $cache_dir/debootstrap.log)"
    if ! debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$cache_dir/debootstrap.log" 2>&1; then
        tail -n 30 "$cache_dir/debootstrap.log" >&2
        die "debootstrap failed"
    fi

    # Image hygiene: point apt at the same mirrors (plus updates/security when the host
    # has them), drop downloaded debs and lists, and leave host identity files empty
    # (docker bind-mounts its own resolv.conf/hostname/hosts at run time).
    rm -f "$rootfs/etc/apt/sources.list"
    {
        printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\n' "$mirror" "$suite" "$suite"
        printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
        if [[ -n $security ]]; then
            printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\n' "$security" "$suite"
            printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
        fi
    } >"$rootfs/etc/apt/sources.list.d/debian.sources"
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb \
        "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/*.log "$rootfs"/debootstrap
    # Same trimming as Debian's official -slim images: no docs/man/locales, now or in
    # any package installed later (dpkg path-exclude). Copyright files are kept.
    cat >"$rootfs/etc/dpkg/dpkg.cfg.d/corral-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
EOF
    find "$rootfs/usr/share/doc" -mindepth 1 -not -type d -not -name copyright -delete
    find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
    rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/groff/* "$rootfs"/usr/share/info/* \
        "$rootfs"/usr/share/lintian/* "$rootfs"/usr/share/locale/*
    : >"$rootfs/etc/resolv.conf"
    : >"$rootfs/etc/hostname"

    # Write then rename, so an interrupted run never leaves a truncated cache entry.
    tar --numeric-owner -C "$rootfs" -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    cleanup
    workdir=''
    log "cached rootfs tarball $tarball ($(du -h "$tarball" | cut -f1))"
}

docker info >/dev/null 2>&1 || die "no docker engine answers (start dockerd first)"

if docker image inspect "$base_image" >/dev/null 2>&1; then
    log "base image $base_image present"
else
    # Only our own base is made here; any other name must be provided by the caller
    # (docker load / pull) because this script never contacts a registry.
    [[ $base_image == corral-base:* ]] \
        || die "base image $base_image is not present locally and this script never pulls; load it first"
    # Bump rootfs_recipe when make_rootfs_tarball changes, so stale caches are not reused.
    rootfs_recipe=2
    tarball=$cache_dir/rootfs-$suite-minbase-$(dpkg --print-architecture)-r$rootfs_recipe.tar
    if [[ -s $tarball ]]; then
        log "using cached rootfs tarball $tarball"
    else
        make_rootfs_tarball "$tarball"
    fi
    # An imported image has no config: give it a PATH and a harmless default command.
    docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["/bin/sh"]' \
        "$tarball" "$base_image" >/dev/null
    log "imported $base_image"
fi

# The label lets ci_setup.sh notice a Dockerfile change and rebuild a stale image.
dockerfile_sum=$(sha256sum "$image_dir/Dockerfile" | cut -d' ' -f1)
cd "$image_dir"
log "building $image from $base_image"
docker build \
    --pull=false \
    --network host \
    --build-arg "BASE_IMAGE=$base_image" \
    --label "org.corral.dockerfile-sha256=$dockerfile_sum" \
    -t "$image" \
    -f Dockerfile \
    .
log "built $image ($(docker image inspect -f '{{.Id}}' "$image"))"
