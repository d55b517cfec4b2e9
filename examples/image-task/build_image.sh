#!/bin/sh
# Builds the example task's image without a registry or a Docker engine: an OCI layout at
# hello/environment/image (tag latest) holding busybox-static, bash and the libraries bash links,
# /app as WorkingDir. Needs umoci and busybox-static (`apt-get install -y umoci busybox-static`).
# Usage: examples/image-task/build_image.sh [LAYOUT_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
layout=${1:-$here/hello/environment/image}
for tool in umoci busybox bash ldd; do
  command -v "$tool" >/dev/null || { echo "build_image.sh needs $tool (apt-get install -y umoci busybox-static)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$layout"
mkdir -p "$(dirname "$layout")"
umoci init --layout "$layout"
umoci new --image "$layout:latest"
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
