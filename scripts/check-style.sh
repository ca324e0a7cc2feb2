#!/usr/bin/env bash
# Fails on anything that breaks the code's habits (docs/architecture.md):
#   1. an include against the direction of the layers (a file includes only from its own folder
#      or a folder below it in the order in docs/architecture.md);
#   2. a file in src/ or tools/ longer than 500 lines;
#   3. a file not formatted by clang-format (the root .clang-format);
#   4. a name the C++ standard reserves (a leading underscore, a double underscore) outside
#      comments and strings, but for the compiler's own (__x86_64__, __builtin_*...), in src/ and
#      tools/: the job of clang-tidy's bugprone-reserved-identifier, which took a fifth of its
#      time (it looks at every declaration of every system header);
#   5. a clang-tidy finding (.clang-tidy: functions over 60 lines, bugprone-*), on src/ and tools/,
#      as BUILD_DIR compiles them (scripts/test.sh: the ASan + UBSan build, whose rooms compile in
#      unity batches).
# Usage: scripts/check-style.sh BUILD_DIR   (a built build directory with compile_commands.json)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:?usage: scripts/check-style.sh BUILD_DIR}
failed=0
fail() { echo "check-style: $*" >&2; failed=1; }

# The files checked, listed once up front. A failing git (outside a checkout, or in one owned by
# another user, which git refuses) stops the script here: read through a process substitution in
# each loop, its failure went unseen and every check passed on no files.
#   code_files   the .h and .cc files of src/ and tools/;
#   code_units   the .cc files of src/ and tools/;
#   format_files every .h and .cc file but those of tests/install_consumer/.
all_files=$(git ls-files -- '*.h' '*.cc') || {
  echo "check-style: git ls-files failed: run it in a git checkout that git accepts" >&2
  exit 1
}
code_files=()
code_units=()
format_files=()
while IFS= read -r file; do
  [ -n "$file" ] || continue
  case $file in
    tests/install_consumer/*) ;;
    *) format_files+=("$file") ;;
  esac
  case $file in
    src/*.cc | tools/*.cc) code_files+=("$file"); code_units+=("$file") ;;
    src/* | tools/*) code_files+=("$file") ;;
  esac
done <<<"$all_files"
if [ ${#code_units[@]} -eq 0 ]; then
  echo "check-style: git lists no .cc file in src/ or tools/: nothing to check" >&2
  exit 1
fi

# The layers from top to bottom. A folder may include its own headers and those of any folder
# listed after it (engines of one line may not include each other).
layers=(
  "tools/kvq"
  "layers/fair"
  "layers"
  "layers/contention layers/combining"
  "client"
  "engine/memory engine/rocksdb engine/etcd engine/testing"
  "engine/pipeline"
  "engine"
  "tuple"
  "common"
)
rank_of() {  # rank_of FOLDER -> index in layers, or -1
  local i
  for i in "${!layers[@]}"; do
    for f in ${layers[$i]}; do [ "$f" = "$1" ] && { echo "$i"; return; }; done
  done
  echo -1
}

check_includes() {
  local file dir own rank inc inc_dir inc_rank
  for file in "${code_files[@]}"; do
    dir=$(dirname "$file"); own=${dir#src/}
    rank=$(rank_of "$own")
    [ "$rank" -ge 0 ] || { fail "$file: folder $own is not in the layer list"; continue; }
    while IFS= read -r inc; do
      inc_dir=$(dirname "${inc#src/}")
      [ "$inc_dir" = "$own" ] && continue
      inc_rank=$(rank_of "$inc_dir")
      if [ "$inc_rank" -lt 0 ] || [ "$inc_rank" -le "$rank" ]; then
        fail "$file includes \"$inc\": against the direction of the layers"
      fi
    done < <(grep -oE '^#include "[^"]+"' "$file" | sed -E 's/#include "(.*)"/\1/' |
             grep -vE '^kvq/|\.pb\.h$' || true)
  done
}

check_file_lengths() {
  local file lines
  for file in "${code_files[@]}"; do
    lines=$(wc -l < "$file")
    [ "$lines" -le 500 ] || fail "$file: $lines lines (at most 500)"
  done
}

check_reserved_names() {
  local file hits
  for file in "${code_files[@]}"; do
    hits=$(sed -E 's://.*$::; s/"([^"\\]|\\.)*"/""/g' "$file" |
           grep -nE '(^|[^A-Za-z0-9_])_[A-Za-z_]|[A-Za-z0-9_]__' |
           grep -vE '__(x86_64|i386|aarch64)__|__builtin_' || true)
    [ -z "$hits" ] ||
      fail "$file: names the standard reserves, lines $(echo "$hits" | cut -d: -f1 | paste -sd, -)"
  done
}

check_format() {
  local file
  for file in "${format_files[@]}"; do
    clang-format --dry-run --Werror "$file" >/dev/null 2>&1 ||
      fail "$file: not clang-formatted (clang-format -i $file)"
  done
}

# The translation units of BUILD_DIR's compile_commands.json that compile src/ and tools/: their
# own files, or CMake's unity files of kvq's targets (KVQ_UNITY, the CLI), one per batch of files.
tidy_units() {
  python3 - "$build_dir/compile_commands.json" "$PWD" <<'PY'
import json, re, sys
root = sys.argv[2] + "/"
for entry in json.load(open(sys.argv[1])):
    f = entry["file"]
    if re.search(r"/CMakeFiles/kvq_[a-z_]+\.dir/Unity/unity_\d+_cxx\.cxx$", f) or \
            re.match(re.escape(root) + r"(src|tools)/", f):
        print(f)
PY
}

# Fails unless every .cc of src/ and tools/ is one of `units` or included by one (a unity file).
check_tidy_covers() {
  local units=$1 file
  for file in "${code_units[@]}"; do
    grep -qxF "$PWD/$file" "$units" ||
      grep -qF "#include \"$PWD/$file\"" $(grep '/Unity/' "$units") /dev/null ||
      fail "clang-tidy: $file is in no translation unit of $build_dir"
  done
}

# clang-tidy on each translation unit. Batches of files (unity files) parse the headers they share
# once: on the ASan + UBSan build's 24 units the check took 119 s, against 340 s on 93 files one by
# one. The configuration is named, as a unity file lies outside the tree; a unity file's own
# includes of .cc files are what bugprone-suspicious-include would report, so that check is off.
# A finding is a "warning:" or "error:" line of its output. A clang-tidy that is missing, or that
# exits non-zero on a unit without a finding (a crash, a signal), or skips a unit (no compile
# command; "Error while processing"), fails the check as well: it checked nothing there.
check_tidy() {
  local dir units unit_log status code unit
  if ! command -v clang-tidy >/dev/null; then
    fail "clang-tidy: not installed (scripts/install-deps.sh)"
    return
  fi
  dir=$(mktemp -d)
  units=$dir/units
  tidy_units >"$units"
  check_tidy_covers "$units"
  # One log and one exit status per unit: UNIT.log, and UNIT.status ("STATUS UNIT").
  # shellcheck disable=SC2016  # expanded by the inner shell
  xargs -r -P "$(nproc)" -n 1 bash -c 'log=$(mktemp --suffix=.log "$1/unit.XXXXXX")
    clang-tidy -p "$2" --config-file=.clang-tidy --checks=-bugprone-suspicious-include --quiet \
      "$3" >"$log" 2>&1
    echo "$? $3" >"${log%.log}.status"' tidy "$dir" "$build_dir" <"$units" ||
    fail "clang-tidy: xargs exited $? (a clang-tidy killed or not run)"
  cat "$dir"/unit.*.log /dev/null >"$dir/all.log"
  if grep -qE '(warning|error):' "$dir/all.log"; then
    grep -E '(warning|error):' "$dir/all.log" | sort -u | sed 's/^/check-style: clang-tidy: /' >&2
    failed=1
  fi
  [ "$(cat "$dir"/unit.*.status /dev/null | wc -l)" -eq "$(wc -l <"$units")" ] ||
    fail "clang-tidy: $(wc -l <"$units") units, but $(cat "$dir"/unit.*.status /dev/null | wc -l) ran"
  for status in "$dir"/unit.*.status; do
    [ -e "$status" ] || continue
    read -r code unit <"$status"
    unit_log=${status%.status}.log
    [ "$code" -lt 128 ] && grep -qE '(warning|error):' "$unit_log" && continue  # reported above
    if [ "$code" -ne 0 ] || grep -qE 'Error while processing|Compile command not found' "$unit_log"
    then
      fail "clang-tidy exited $code on $unit (crashed, or could not process it):"
      tail -5 "$unit_log" | sed 's/^/check-style:   /' >&2
    fi
  done
  rm -rf "$dir"
}

check_includes
check_file_lengths
check_reserved_names
check_format
check_tidy
if [ "$failed" -ne 0 ]; then
  echo "check-style: FAILED" >&2
  exit 1
fi
echo "check-style: passed (layers, file length, reserved names, clang-format, clang-tidy)"
