#!/bin/sh
# Builds the example task's image without a registry or a Docker engine: an OCI layout at
# hello/environment/image (tag latest), /app as WorkingDir holding README.txt.
#   build_image.sh [LAYOUT_DIR]                  busybox-static, bash and the libraries bash links
#                                                (needs umoci, busybox-static; about 3 MB, seconds)
#   build_image.sh --debian SUITE [LAYOUT_DIR]   a Debian root (minbase) from a Debian mirror, e.g.
#                                                bullseye or bookworm (needs umoci, mmdebstrap, root
#                                                or unprivileged user namespaces; about 55 MB)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
suite=
if [ "${1:-}" = --debian ]; then
  suite=${2:?--debian needs a suite, e.g. bookworm}
  shift 2
fi
layout=${1:-$here/hello/environment/image}
need="umoci busybox bash ldd"
[ -z "$suite" ] || need="umoci mmdebstrap"
for tool in $need; do
  command -v "$tool" >/dev/null || { echo "build_image.sh needs $tool (apt-get install -y umoci busybox-static mmdebstrap)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$layout"
mkdir -p "$(dirname "$layout")"
umoci init --layout "$layout"
umoci new --image "$layout:latest"
if [ -n "$suite" ]; then
  mmdebstrap --variant=minbase --format=tar \
    --customize-hook='mkdir -p "$1/app" && echo "Greetings from the image." > "$1/app/README.txt"' \
    "$suite" "$work/root.tar"
  umoci raw add-layer --image "$layout:latest" "$work/root.tar"
  umoci config --image "$layout:latest" --config.workingdir /app \
    --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  umoci gc --layout "$layout"
  echo "built $layout (tag latest, Debian $suite)"
  exit 0
fi
umoci unpack --rootless --image "$layout:latest" "$work/bundle"
root=$work/bundle/rootfs
mkdir -p "$root/bin" "$root/etc" "$root/app" "$root/tmp" "$root/root" "$root/usr/bin"
chmod 1777 "$root/tmp"
cp "$(readlink -f "$(command -v busybox)")" "$root/bin/busybox"
for applet in $("$root/bin/busybox" --list); do
  [ "$applet" = busybox ] || [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done
cp "$(readlink -f "$(command -v bash)")" "$root/bin/bash"
for lib in $(ldd "$(command -v bash)" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
  mkdir -p "$root$(dirname "$lib")"
  cp "$(readlink -f "$lib")" "$root$lib"
done
printf 'root:x:0:0:root:/root:/bin/sh\n' > "$root/etc/passwd"
printf 'root:x:0:\n' > "$root/etc/group"
printf 'Greetings from the image.\n' > "$root/app/README.txt"
umoci repack --image "$layout:latest" "$work/bundle"
umoci config --image "$layout:latest" --config.workingdir /app --config.env PATH=/usr/local/bin:/usr/bin:/bin
umoci gc --layout "$layout"
echo "built $layout (tag latest)"
