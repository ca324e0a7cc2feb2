#!/usr/bin/env bash
# Prints, as a Markdown table, the figures the tests recorded in one run of the test command
# (tests/support/figures.h): one row per figure, one column per build configuration, summed.
# Usage: scripts/figures.sh BUILD_DIR...   (each may hold a figures.tsv; the others are skipped)
set -euo pipefail
files=()
for dir in "$@"; do
  [ -s "$dir/figures.tsv" ] && files+=("$dir/figures.tsv")
done
[ ${#files[@]} -gt 0 ] || { echo "figures: none recorded"; exit 0; }
awk -F'\t' '
  FNR == 1 { column[++columns] = FILENAME; sub(/\/figures\.tsv$/, "", column[columns]) }
  { if (!($1 in seen)) { seen[$1] = 1; name[++names] = $1 }
    sum[columns, $1] += $2 }
  END {
    header = "| figure |"; rule = "|---|"
    for (c = 1; c <= columns; ++c) { header = header " " column[c] " |"; rule = rule "---:|" }
    print header; print rule
    for (n = 1; n <= names; ++n) {
      row = "| " name[n] " |"
      for (c = 1; c <= columns; ++c) row = row " " ((c, name[n]) in sum ? sum[c, name[n]] : "") " |"
      print row
    }
  }' "${files[@]}"
