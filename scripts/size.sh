#!/usr/bin/env bash
# The daemon's size: the stripped binary (make build's flags) and, from an
# unstripped build of the same code, the bytes of code and read-only data
# each module and each package puts into it (go tool nm -size; a symbol is
# its package's, a generic instance the package that defines it, the
# runtime's function tables "(runtime tables)"). The symbol sizes do not
# count the line tables (.gopclntab), which grow with the code. TOP sets
# how many rows (default 15).
set -euo pipefail
cd "$(dirname "$0")/.."

TOP=${TOP:-15}
GO=${GO:-go}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

TAGS=disable_grpc_modules # make build's
CGO_ENABLED=0 $GO build -tags $TAGS -trimpath -ldflags '-s -w' -o "$tmp/sf2loki" ./cmd/sf2loki
CGO_ENABLED=0 $GO build -tags $TAGS -trimpath -o "$tmp/sf2loki.sym" ./cmd/sf2loki
$GO list -tags $TAGS -deps -f '{{.ImportPath}} {{with .Module}}{{.Path}}{{else}}std{{end}}' ./cmd/sf2loki >"$tmp/modules"

bytes=$(stat -c %s "$tmp/sf2loki")
printf 'stripped binary (CGO_ENABLED=0 go build -tags %s -trimpath -ldflags "-s -w"): %d bytes, %.1f MiB\n' "$TAGS" "$bytes" "$(echo "$bytes / 1048576" | bc -l)"
printf 'modules linked: %d\n\n' "$($GO version -m "$tmp/sf2loki" | grep -c $'^\tdep')"

$GO tool nm -size "$tmp/sf2loki.sym" | awk -v modules="$tmp/modules" -v out="$tmp/agg" '
BEGIN { while ((getline line < modules) > 0) { split(line, f, " "); mod[f[1]] = f[2] } }
$3 == "T" || $3 == "t" || $3 == "R" || $3 == "r" {
  size = $2; name = $4; for (i = 5; i <= NF; i++) name = name " " $i
  sub(/^type:(\.[a-z]+\.)?/, "", name); sub(/^go:itab\./, "", name); sub(/^\*/, "", name)
  if (name ~ /^go:/) { pkg = "(runtime tables)" } else {
    cut = name
    p = index(cut, "("); if (p > 0) cut = substr(cut, 1, p - 1)
    p = index(cut, "["); if (p > 0) cut = substr(cut, 1, p - 1)
    slash = 0; for (i = length(cut); i > 0; i--) if (substr(cut, i, 1) == "/") { slash = i; break }
    rest = substr(cut, slash + 1); d = index(rest, "."); if (d > 0) rest = substr(rest, 1, d - 1)
    pkg = substr(cut, 1, slash) rest
  }
  if (pkg in mod) m = mod[pkg]; else if (pkg ~ /^vendor\// || pkg !~ /\./) m = "std"; else m = "(other)"
  bypkg[pkg] += size; bymod[m] += size; total += size
}
END {
  printf "%.1f\n", total / 1048576 > (out ".total")
  for (k in bymod) printf "%s\t%d\n", k, bymod[k] > (out ".mod")
  for (k in bypkg) printf "%s\t%d\n", k, bypkg[k] > (out ".pkg")
}'

printf 'code and read-only data in symbols: %s MiB; the %d largest modules:\n' "$(cat "$tmp/agg.total")" "$TOP"
sort -t$'\t' -k2 -nr "$tmp/agg.mod" | head -"$TOP" | awk -F'\t' '{ printf "  %6.2f MiB  %s\n", $2 / 1048576, $1 }'
printf '\nthe %d largest packages:\n' "$TOP"
sort -t$'\t' -k2 -nr "$tmp/agg.pkg" | head -"$TOP" | awk -F'\t' '{ printf "  %6.2f MiB  %s\n", $2 / 1048576, $1 }'
