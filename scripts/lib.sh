# shellcheck shell=bash
# Helpers shared by scripts/test and scripts/demo. Source it; it does not run anything itself.
#
#   install_missing_packages     apt-installs whatever in scripts/packages.txt is not installed
#   meson_setup DIR [OPTS...]    configures DIR with OPTS, or re-applies OPTS if already configured
#   build_release                configures (if needed) and builds build/release
#
# Paths are relative to the repository root; callers cd there first (ringrpc_root gives it).

RINGRPC_SCRIPTS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RINGRPC_ROOT="$(cd "$RINGRPC_SCRIPTS_DIR/.." && pwd)"
: "${RINGRPC_JOBS:=2}"   # parallel compile jobs / test processes

ringrpc_root() { printf '%s\n' "$RINGRPC_ROOT"; }

log_header() {
  printf '\n==================== %s ====================\n' "$*"
}

# Package names from scripts/packages.txt, comments and blank lines removed.
required_packages() {
  sed -e 's/#.*//' -e 's/[[:space:]]\+$//' -e 's/^[[:space:]]\+//' \
    "$RINGRPC_SCRIPTS_DIR/packages.txt" | grep -v '^$'
}

# Installs the packages of scripts/packages.txt that are not installed yet. Runs apt-get only
# when something is missing, so a second run costs nothing and needs no network.
install_missing_packages() {
  local pkg missing=()
  while IFS= read -r pkg; do
    if [[ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)" != "install ok installed" ]]; then
      missing+=("$pkg")
    fi
  done < <(required_packages)
  if ((${#missing[@]} == 0)); then
    echo "All $(required_packages | wc -l) required Debian packages are installed."
    return 0
  fi
  echo "Installing missing Debian packages: ${missing[*]}"
  local sudo=()
  if ((EUID != 0)); then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "error: not root and no sudo; install as root: apt-get install ${missing[*]}" >&2
      return 1
    fi
  fi
  "${sudo[@]}" apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
}

# meson_setup DIR [meson options...]
# A fresh (or half-configured) DIR gets `meson setup`; an existing one gets `meson configure`
# with the same options, so re-runs are incremental. Use -Dname=value forms only.
meson_setup() {
  local dir=$1
  shift
  if [[ -f "$dir/meson-private/coredata.dat" && -f "$dir/build.ninja" ]]; then
    meson configure "$dir" "$@"
  else
    rm -rf "$dir"
    meson setup "$dir" "$@"
  fi
}

# Options of the release build; scripts/test adds -Dwerror=true.
RINGRPC_RELEASE_OPTS=(-Dbuildtype=release)

# Configures build/release if needed and builds everything in it.
build_release() {
  (cd "$RINGRPC_ROOT" &&
    meson_setup build/release "${RINGRPC_RELEASE_OPTS[@]}" "$@" &&
    ninja -C build/release -j"$RINGRPC_JOBS")
}
