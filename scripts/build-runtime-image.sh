#!/usr/bin/env bash
# Build the offline runtime image for the docker sandbox, without any registry.
#
# The image is a minimal root filesystem holding only the host's CPython (the binary, its
# standard library, and the shared libraries they link) plus the mount points the docker
# backend uses (/harness, /rt, /task). The runtime is standard-library only, so this is
# all a rollout needs. Idempotent: an image whose "harnessctl.recipe" label matches this
# recipe is kept as is.
#
# usage: scripts/build-runtime-image.sh [IMAGE]   (default harnessctl-runtime:latest)
set -euo pipefail

IMAGE="${1:-${HARNESSCTL_DOCKER_IMAGE:-harnessctl-runtime:latest}}"
PYTHON="$(readlink -f "${PYTHON:-/usr/bin/python3}")"
PYVER="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
STDLIB="$("$PYTHON" -I -S -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')"
RECIPE_VERSION=1

command -v docker >/dev/null || { echo "docker CLI not found" >&2; exit 1; }
docker info >/dev/null 2>&1 || {
    echo "no docker engine reachable: start one (dockerd & or systemctl start docker)" >&2
    exit 1
}

# The recipe: script version + the interpreter's identity. Same recipe => same image.
RECIPE="$( { echo "$RECIPE_VERSION"; sha256sum "$PYTHON"; "$PYTHON" -VV; } | sha256sum | cut -c1-16)"
current="$(docker image inspect -f '{{ index .Config.Labels "harnessctl.recipe" }}' "$IMAGE" 2>/dev/null || true)"
if [ "$current" = "$RECIPE" ]; then
    echo "$IMAGE is up to date (recipe $RECIPE)"
    exit 0
fi

ROOTFS="$(mktemp -d /tmp/hxrootfs-XXXXXX)"
trap 'rm -rf "$ROOTFS"' EXIT
mkdir -p "$ROOTFS"/{usr/bin,etc,tmp,harness,rt,task,proc,sys,dev}
chmod 1777 "$ROOTFS/tmp"

# interpreter + standard library (no test suite, no third-party packages)
cp -a "$PYTHON" "$ROOTFS/usr/bin/python$PYVER"
ln -s "python$PYVER" "$ROOTFS/usr/bin/python3"
mkdir -p "$ROOTFS$(dirname "$STDLIB")"
tar -C "$(dirname "$STDLIB")" --exclude='./*/test' --exclude='./*/dist-packages' \
    --exclude='./*/site-packages' --exclude='./*/idlelib' --exclude='./*/tkinter' \
    -cf - "./$(basename "$STDLIB")" | tar -C "$ROOTFS$(dirname "$STDLIB")" -xf -

# every shared library the interpreter and its extension modules link
{
    ldd "$PYTHON"
    find "$STDLIB/lib-dynload" -name '*.so' -exec ldd {} \; 2>/dev/null
} | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u | while read -r lib; do
    for path in "$lib" "$(readlink -f "$lib")"; do
        mkdir -p "$ROOTFS$(dirname "$path")"
        cp -aL "$path" "$ROOTFS$path" 2>/dev/null || true
    done
done

cat > "$ROOTFS/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/nonexistent
nobody:x:65534:65534:nobody:/nonexistent:/nonexistent
PASSWD
cat > "$ROOTFS/etc/group" <<'GROUP'
root:x:0:
nogroup:x:65534:
GROUP

tar -C "$ROOTFS" --numeric-owner -cf - . | docker import \
    -c "LABEL harnessctl.recipe=$RECIPE" \
    -c "LABEL harnessctl.python=$PYVER" \
    -c "ENV LANG=C.UTF-8 PATH=/usr/bin:/bin" \
    -c "WORKDIR /task" \
    -c 'CMD ["/usr/bin/python3", "-I", "-S", "-c", "import time; time.sleep(1e9)"]' \
    - "$IMAGE.building" >/dev/null
# tag only an image that runs the runtime's imports, so a broken build is never "up to date"
docker run --rm --network none --user 65534:65534 "$IMAGE.building" /usr/bin/python3 -I -S -c \
    'import sqlite3, json, hashlib, socket, resource; print("python ok, sqlite", sqlite3.sqlite_version)'
docker tag "$IMAGE.building" "$IMAGE"
docker rmi "$IMAGE.building" >/dev/null
echo "built $IMAGE (recipe $RECIPE)"
