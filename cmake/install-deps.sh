#!/usr/bin/env bash
# Installs the Debian 12 packages Layerscope needs to build, run and test; does nothing when all
# are present. Uses sudo when not root.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libfmt-dev nlohmann-json3-dev libcli11-dev libhwy-dev libicu-dev
  libboost-context-dev libgtest-dev libgmock-dev
  libasio-dev libzstd-dev libssl-dev
  libimgui-dev libglfw3-dev libgl-dev libstb-dev fonts-dejavu-core
  xvfb xauth xdotool imagemagick python3-numpy
  clang-14 libclang-rt-14-dev llvm-14
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "Installing missing packages: ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "error: not root and sudo is missing; install as root: apt-get install ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
