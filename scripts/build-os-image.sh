#!/usr/bin/env bash
# Build the offline task image of the os_interaction environment, without any registry.
#
# AgentBench's OS-interaction tasks run in an Ubuntu image with python3, pip, git, vim, curl,
# wget, zip, unzip and tree. Registries cannot be reached here, so this builds the same kind
# of userland from Debian's package archive (debootstrap, minbase variant) and imports it with
# `docker import`. Differences from AgentBench's image are listed in docs/os_interaction.md.
# Idempotent: an image whose "harnessctl.recipe" label matches this recipe is kept as is.
#
# usage: scripts/build-os-image.sh [IMAGE]   (default harnessctl-os:latest)
# env:   HARNESSCTL_OS_MIRROR (default http://deb.debian.org/debian), HARNESSCTL_OS_SUITE
set -euo pipefail

IMAGE="${1:-${HARNESSCTL_OS_IMAGE:-harnessctl-os:latest}}"
SUITE="${HARNESSCTL_OS_SUITE:-bookworm}"
MIRROR="${HARNESSCTL_OS_MIRROR:-http://deb.debian.org/debian}"
# patchelf: harnessctl builds the checks' read-only copy of these tools from the image with it
# (harnessctl/envs/os_interaction/trusted.py)
PACKAGES="python3,python3-pip,procps,psmisc,tree,zip,unzip,curl,wget,git,vim-tiny,less,file,ca-certificates,patchelf"
RECIPE_VERSION=1

command -v docker >/dev/null || { echo "docker CLI not found" >&2; exit 1; }
docker info >/dev/null 2>&1 || {
    echo "no docker engine reachable: start one (dockerd & or systemctl start docker)" >&2
    exit 1
}

# The recipe: script version + suite + package list. Same recipe => same image. (The mirror
# is where the packages come from, not what they are, so it is not part of the recipe.)
RECIPE="$(printf '%s\n' "$RECIPE_VERSION" "$SUITE" "$PACKAGES" | sha256sum | cut -c1-16)"
current="$(docker image inspect -f '{{ index .Config.Labels "harnessctl.recipe" }}' "$IMAGE" 2>/dev/null || true)"
if [ "$current" = "$RECIPE" ]; then
    echo "$IMAGE is up to date (recipe $RECIPE)"
    exit 0
fi

if ! command -v debootstrap >/dev/null; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap
fi

ROOTFS="$(mktemp -d /tmp/hxosroot-XXXXXX)"
trap 'rm -rf "$ROOTFS"' EXIT
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS" "$MIRROR" >&2

# smaller and stable: no package caches or lists (the task container has no network anyway)
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* \
    "$ROOTFS"/var/log/*.log "$ROOTFS"/var/cache/debconf/*-old
# `vim` as AgentBench's image has it (vim-tiny provides only `vi` and `vim.tiny`)
[ -e "$ROOTFS/usr/bin/vim" ] || ln -s vim.tiny "$ROOTFS/usr/bin/vim"
echo "harnessctl-os" > "$ROOTFS/etc/hostname"

tar -C "$ROOTFS" --numeric-owner -cf - . | docker import \
    -c "LABEL harnessctl.recipe=$RECIPE" \
    -c "LABEL harnessctl.os.suite=$SUITE" \
    -c "ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    -c "WORKDIR /root" \
    -c 'CMD ["sleep", "infinity"]' \
    - "$IMAGE.building" >/dev/null
# tag only an image whose tools run, so a broken build is never "up to date"
docker run --rm --network none "$IMAGE.building" bash -c \
    'set -e; for t in python3 pip3 ps pkill tree zip unzip curl wget git vim useradd getent patchelf setpriv; do
         command -v "$t" >/dev/null || { echo "missing $t" >&2; exit 1; }; done
     python3 -c "print(\"os image ok\")"'
docker tag "$IMAGE.building" "$IMAGE"
docker rmi "$IMAGE.building" >/dev/null
echo "built $IMAGE (recipe $RECIPE)"
