#!/usr/bin/env bash
# Install StarCraft II 4.10 (Linux, headless build) and the SMAC maps, for `--backend sc2` / `backend="auto"`.
#
#   bash scripts/install_sc2.sh              # installs into $SC2PATH, default ~/StarCraftII
#   SC2PATH=/data/StarCraftII bash scripts/install_sc2.sh
#
# Needs internet access (Blizzard's CDN and GitHub), ~4 GB of free disk while unpacking, and curl or wget.
# Running it means accepting the StarCraft II AI and Machine Learning License (the archive password
# "iagreetotheeula" is that agreement): https://blzdistsc2-a.akamaihd.net/AI_AND_MACHINE_LEARNING_LICENSE.html
# Afterwards install pysc2 into the project's environment (--no-deps: pysc2 4.0 would pull pygame over mpe2's
# pygame-ce and a Python 2 enum backport; '.[sc2]' brings the packages pysc2 really needs):
#   pip install --no-deps pysc2==4.0.0 && pip install -e '.[sc2]'
# Idempotent: an existing game or map folder is kept (FORCE=1 reinstalls).
set -euo pipefail

SC2_URL="${SC2_URL:-https://blzdistsc2-a.akamaihd.net/Linux/SC2.4.10.zip}"
# Checksum of SC2.4.10.zip as recorded by other public install scripts (not verified by this project).
# A mismatch is reported; set SC2_STRICT_SHA=1 to make it fatal.
SC2_SHA256="1052f249f30a242bf5e17cc3315324919f9689307ca6dbcdb30bb41ea3004884"
MAPS_URL="${SMAC_MAPS_URL:-https://github.com/oxwhirl/smac/releases/download/v0.1-beta1/SMAC_Maps.zip}"
SC2PATH="${SC2PATH:-$HOME/StarCraftII}"
SC2PATH="${SC2PATH%/}"
FORCE="${FORCE:-0}"
SMAC_MAPS=(3m 8m 25m 5m_vs_6m 8m_vs_9m 10m_vs_11m 27m_vs_30m MMM MMM2 2s3z 3s5z 3s5z_vs_3s6z 3s_vs_3z
           3s_vs_4z 3s_vs_5z 1c3s5z 2m_vs_1z corridor 6h_vs_8z 2s_vs_1sc so_many_baneling bane_vs_bane
           2c_vs_64zg)

have_game() { compgen -G "$SC2PATH/Versions/Base*/SC2_x64" >/dev/null; }  # 4.10 ships Base75689
say() { printf '[install_sc2] %s\n' "$*"; }
die() { printf '[install_sc2] error: %s\n' "$*" >&2; exit 1; }

download() {  # download URL FILE
    if command -v curl >/dev/null 2>&1; then
        curl -fL --retry 3 --retry-delay 5 -o "$2" "$1"
    elif command -v wget >/dev/null 2>&1; then
        wget --tries=3 --progress=dot:giga -O "$2" "$1"
    else
        die "neither curl nor wget is installed"
    fi
}

extract() {  # extract ZIP DEST [PASSWORD]: unzip when present, else Python's zipfile (handles ZipCrypto)
    if command -v unzip >/dev/null 2>&1; then
        if [ -n "${3:-}" ]; then unzip -q -o -P "$3" "$1" -d "$2"; else unzip -q -o "$1" -d "$2"; fi
    else
        python3 - "$1" "$2" "${3:-}" <<'PY'
import sys, zipfile
src, dest, pwd = sys.argv[1], sys.argv[2], sys.argv[3]
with zipfile.ZipFile(src) as z:
    z.extractall(dest, pwd=pwd.encode() if pwd else None)
PY
    fi
}

TMP="$(mktemp -d "${TMPDIR:-/tmp}/install_sc2.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$(dirname "$SC2PATH")"

# ---- the game ---------------------------------------------------------------------------------------
if have_game && [ "$FORCE" != 1 ]; then
    say "StarCraft II already installed at $SC2PATH ($(ls "$SC2PATH/Versions" | tr '\n' ' '))"
else
    say "downloading StarCraft II 4.10 for Linux (about 3.5 GB) from $SC2_URL"
    download "$SC2_URL" "$TMP/SC2.4.10.zip"
    if command -v sha256sum >/dev/null 2>&1; then
        got="$(sha256sum "$TMP/SC2.4.10.zip" | cut -d' ' -f1)"
        if [ "$got" != "$SC2_SHA256" ]; then
            say "warning: sha256 $got differs from the recorded $SC2_SHA256"
            [ "${SC2_STRICT_SHA:-0}" = 1 ] && die "checksum mismatch (SC2_STRICT_SHA=1)"
        fi
    fi
    say "unpacking (accepting the AI and Machine Learning License)"
    extract "$TMP/SC2.4.10.zip" "$TMP/game" iagreetotheeula
    rm -f "$TMP/SC2.4.10.zip"
    [ -d "$TMP/game/StarCraftII" ] || die "the archive has no StarCraftII/ folder"
    if [ -d "$SC2PATH" ]; then
        say "replacing the game files in $SC2PATH (its Maps/ folder is kept)"
        cp -a "$TMP/game/StarCraftII/." "$SC2PATH/"
    else
        mv "$TMP/game/StarCraftII" "$SC2PATH"
    fi
fi

# ---- the SMAC maps -----------------------------------------------------------------------------------
MAP_DIR="$SC2PATH/Maps/SMAC_Maps"
if [ -f "$MAP_DIR/3m.SC2Map" ] && [ "$FORCE" != 1 ]; then
    say "SMAC maps already in $MAP_DIR"
else
    say "downloading the SMAC maps from $MAPS_URL"
    download "$MAPS_URL" "$TMP/SMAC_Maps.zip"
    extract "$TMP/SMAC_Maps.zip" "$TMP/maps"
    src="$(dirname "$(find "$TMP/maps" -name '3m.SC2Map' | head -n 1)")"
    [ -f "$src/3m.SC2Map" ] || die "SMAC_Maps.zip has no 3m.SC2Map"
    mkdir -p "$MAP_DIR"
    cp -a "$src/." "$MAP_DIR/"
fi

# ---- check -------------------------------------------------------------------------------------------
have_game || die "no game binary at $SC2PATH/Versions/Base*/SC2_x64"
missing=()
for m in "${SMAC_MAPS[@]}"; do [ -f "$MAP_DIR/$m.SC2Map" ] || missing+=("$m"); done
[ ${#missing[@]} -eq 0 ] || die "maps missing from $MAP_DIR: ${missing[*]}"
say "done: StarCraft II 4.10 and ${#SMAC_MAPS[@]} SMAC maps in $SC2PATH"
if [ "$SC2PATH" != "$HOME/StarCraftII" ]; then
    say "add to your shell profile:  export SC2PATH=$SC2PATH"
fi
say "next: pip install --no-deps pysc2==4.0.0 && pip install -e '.[sc2]'"
say "then e.g.: python scripts/evaluate.py --checkpoint results/<run>/models/best --map 3m --backend sc2 --envs 1"
